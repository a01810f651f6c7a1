// gpt_reference.cpp OUT.safetensors - a tiny float64 GPT's loss and every
// parameter's gradient, computed by Nova, saved with the parameters and the
// batch so an independent implementation (tests/e2e/gpt_vs_torch.py, PyTorch
// in float64) can recompute them from the same inputs and compare.
#include <nova/nova.hpp>

#include <cstdio>

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gpt_reference OUT.safetensors\n");
    return 2;
  }
  using nova::Tensor;
  nova::nn::GPTConfig c{.vocab = 13, .context = 6, .d_model = 16, .layers = 2, .heads = 4};
  nova::Params params = nova::nn::gpt_init(c, 2024, nova::DType::f64);
  // GPT-2's 0.02 scale leaves the loss near log(vocab); larger weights make
  // every part of the model matter to the comparison.
  for (auto& t : params.tensors())
    for (auto& v : t.span<double>()) v = v * 15.0 + 0.01;
  Tensor x = Tensor::empty({3, 6}, nova::DType::i32), y = Tensor::empty({3, 6}, nova::DType::i32);
  for (std::int64_t i = 0; i < 18; ++i) {
    x.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 7 + 2) % 13);
    y.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 5 + 3) % 13);
  }
  auto loss_and_grads = nova::eval_step(
      [](const nova::ParamExprs& p, auto x, auto y, nova::nn::GPTConfig c) {
        nova::Expr<> loss = nova::nn::gpt_loss(c, p, x, y);
        std::vector<nova::Expr<>> wrt;
        for (std::size_t i = 0; i < p.size(); ++i) wrt.push_back(p.at(i));
        std::vector<nova::Expr<>> out{loss};
        for (auto& g : nova::gradients(loss, wrt)) out.push_back(g);
        return out;
      },
      params);
  std::vector<Tensor> out = loss_and_grads(x, y, nova::static_arg(c));
  std::vector<std::pair<std::string, Tensor>> tensors{{"x", x}, {"y", y}, {"loss", out[0]}};
  for (std::size_t i = 0; i < params.size(); ++i) {
    tensors.emplace_back("param." + params.names()[i], params.tensors()[i]);
    tensors.emplace_back("grad." + params.names()[i], out[i + 1]);
  }
  nova::save_safetensors(argv[1], tensors,
                         {{"vocab", "13"}, {"context", "6"}, {"d_model", "16"}, {"layers", "2"}, {"heads", "4"}});
  std::printf("nova loss %.15f\n", out[0].at({}));
  return 0;
} catch (const nova::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
