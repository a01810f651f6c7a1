// data_parallel.cpp - a tiny float64 GPT trained data-parallel over MPI
// processes, for tests/e2e/data_parallel.sh.
//
//   data_parallel whole OUT STEPS       one process, the whole batch
//   mpirun -np N data_parallel ranks OUT STEPS [interpret]
//                                       rank r on rows [r B/N, (r+1) B/N);
//                                       each rank saves OUT.rank<r>
//   mpirun -np 2 data_parallel hang OUT STEPS   rank 1 never steps
//   mpirun -np 2 data_parallel die OUT STEPS    rank 1 dies after step 1
//   data_parallel compare A B TOL       max |a - b| / max |b| over all
//                                       parameters <= TOL, or exit 1
//
// The batch (8 sequences) and the initial parameters are the same in every
// process; so the ranks' mean gradient is the whole batch's, and their
// parameters after each step equal the single process's to float64
// rounding, and each other's bit for bit.
#include <nova/mpi.hpp>
#include <nova/nova.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

using nova::Tensor;

namespace {

const nova::nn::GPTConfig kConfig{.vocab = 13, .context = 6, .d_model = 16, .layers = 2, .heads = 4};
constexpr std::int64_t kBatch = 8;

auto loss_fn = [](const nova::ParamExprs& p, auto x, auto y, nova::nn::GPTConfig c) {
  return nova::nn::gpt_loss(c, p, x, y);
};

/// Rows [begin, end) of the batch: token (i * 7 + 2 + step) % vocab.
Tensor tokens(std::int64_t begin, std::int64_t end, int shift) {
  Tensor t = Tensor::empty({end - begin, kConfig.context}, nova::DType::i32);
  for (std::int64_t i = begin * kConfig.context; i < end * kConfig.context; ++i)
    t.data<std::int32_t>()[i - begin * kConfig.context] = static_cast<std::int32_t>((i * 7 + 2 + shift) % 13);
  return t;
}

int compare(const std::string& a, const std::string& b, double tol) {
  nova::SafetensorsFile fa = nova::load_safetensors(a), fb = nova::load_safetensors(b);
  if (fa.tensors.size() != fb.tensors.size()) return std::printf("FAIL: different tensors\n"), 1;
  double diff = 0, scale = 1e-300;
  for (std::size_t i = 0; i < fa.tensors.size(); ++i) {
    auto va = fa.tensors[i].second.to_vector(), vb = fb.tensors[i].second.to_vector();
    if (va.size() != vb.size()) return std::printf("FAIL: %s differs in size\n", fa.tensors[i].first.c_str()), 1;
    for (std::size_t j = 0; j < va.size(); ++j) {
      diff = std::max(diff, std::abs(va[j] - vb[j]));
      scale = std::max(scale, std::abs(vb[j]));
    }
  }
  std::printf("%s vs %s: max |a - b| / max |b| = %.3e (bound %.1e)\n", a.c_str(), b.c_str(), diff / scale, tol);
  return diff / scale <= tol ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::fprintf(stderr, "usage: data_parallel whole|ranks|hang|die OUT STEPS | compare A B TOL\n");
    return 2;
  }
  std::string mode = argv[1], out = argv[2];
  if (mode == "compare") return compare(out, argv[3], std::atof(argv[4 < argc ? 4 : 3]));
  int steps = std::atoi(argv[3]);
  bool interpret = argc > 4 && std::string(argv[4]) == "interpret";

  nova::Params params = nova::nn::gpt_init(kConfig, 7, nova::DType::f64);
  for (auto& t : params.tensors())
    for (auto& v : t.span<double>()) v *= 10.0; // every part of the model matters
  int rank = 0, world = 1;
  if (mode != "whole") {
    auto comm = nova::dist::mpi_world(&argc, &argv);
    nova::dist::set_communicator(comm);
    rank = comm->rank();
    world = comm->size();
  }
  if (kBatch % world != 0) throw nova::Error("data_parallel: the batch of 8 does not split over " + std::to_string(world));
  std::int64_t per = kBatch / world, begin = rank * per;
  auto step = nova::train_step(loss_fn, params, nova::AdamW{.lr = 1e-3, .weight_decay = 0.1},
                               {.clip_grad_norm = 1.0, .mode = interpret ? nova::ExecMode::interpreted
                                                                        : nova::ExecMode::compiled});
  for (int s = 0; s < steps; ++s) {
    if (mode == "hang" && rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(120));
      return 0;
    }
    double loss = step(tokens(begin, begin + per, s), tokens(begin, begin + per, s + 1), nova::static_arg(kConfig));
    std::printf("rank %d of %d, step %d: loss %.12f\n", rank, world, s + 1, loss);
    std::fflush(stdout);
    if (mode == "die" && rank == 1) std::raise(SIGKILL);
  }
  nova::save(params, mode == "whole" ? out : out + ".rank" + std::to_string(rank));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
