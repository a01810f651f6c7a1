// gpt_dp_step.cpp - the GPT training step data-parallel over MPI ranks:
// tokens/s, and how much of the gradients' communication the backward hides.
//
//   mpirun -np N ./gpt_dp_step [small|medium] [steps]   (1 rank without mpirun)
//
// The global batch is the single-process bench's (small 16, medium 8
// sequences), split over the ranks; each rank runs cores / ranks threads
// (NOVA_NUM_THREADS). From the runtime's timeline (nova/timeline.hpp) of
// every timed step, rank 0 prints each bucket's start and finish against
// the step's launches (the backward's kernels), the time its start took
// and the time its wait blocked. Then the ranks run the same sums again,
// bucket by bucket (lined up by a barrier before each), nothing else running: the
// communication's own time. Hidden fraction = 1 - blocked / own time, where
// blocked is the time the step spent inside the starts and the waits (a
// wait also counts any lag of the slower rank).
#include <nova/mpi.hpp>
#include <nova/nova.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) try {
  using nova::nn::GPTConfig;
  bool medium = argc > 1 && std::strcmp(argv[1], "medium") == 0;
  int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  GPTConfig c = medium ? GPTConfig{.vocab = 256, .context = 256, .d_model = 512, .layers = 8, .heads = 8}
                       : GPTConfig{.vocab = 256, .context = 128, .d_model = 256, .layers = 4, .heads = 4};
  std::int64_t batch = medium ? 8 : 16, T = c.context;

  std::shared_ptr<nova::dist::Communicator> comm;
  if (nova::dist::launched_by_mpi()) {
    comm = nova::dist::mpi_world(&argc, &argv);
    nova::dist::set_communicator(comm);
  }
  int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  if (batch % world) throw nova::Error("gpt_dp_step: the batch does not split over the ranks");
  std::int64_t B = batch / world;

  nova::Params params = nova::nn::gpt_init(c, 1);
  nova::Tensor x = nova::Tensor::empty({B, T}, nova::DType::i32), y = nova::Tensor::empty({B, T}, nova::DType::i32);
  std::uint64_t rng = 7 + static_cast<std::uint64_t>(rank);
  for (std::int64_t i = 0; i < B * T; ++i) {
    x.data<std::int32_t>()[i] = static_cast<std::int32_t>(nova::splitmix64(rng) % 256);
    y.data<std::int32_t>()[i] = static_cast<std::int32_t>(nova::splitmix64(rng) % 256);
  }
  auto step = nova::train_step(
      [](const nova::ParamExprs& p, auto x, auto y, GPTConfig c) { return nova::nn::gpt_loss(c, p, x, y); },
      params, nova::AdamW{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1},
      {.clip_grad_norm = 1.0});
  auto barrier = [&] {
    if (!comm) return;
    double one = 1;
    comm->wait(comm->start_all_reduce_sum(&one, 1, nova::DType::f64));
  };
  step(x, y, nova::static_arg(c)); // compile (rank 0) or load, run
  step(x, y, nova::static_arg(c));
  nova::set_timeline(true);
  barrier();
  double blocked = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    step(x, y, nova::static_arg(c));
    nova::RunTimeline t = nova::last_timeline();
    // The step waits for communication inside each start and each wait.
    for (const auto& k : t.collectives) blocked += (k.start_end_s - k.start_s) + (k.wait_end_s - k.wait_begin_s);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
  nova::set_timeline(false);
  nova::RunTimeline last = nova::last_timeline();

  // The communication's own time: the step's collectives (each bucket as
  // the runtime starts it, then waited for), bucket after bucket, with
  // nothing else running and the ranks lined up before each bucket.
  double own = 0;
  if (comm && !last.collectives.empty()) {
    std::vector<std::vector<std::vector<float>>> buckets;
    for (const auto& k : last.collectives) {
      buckets.emplace_back();
      for (std::uint64_t b : k.buffer_bytes) buckets.back().emplace_back(b / sizeof(float), 1.0f);
    }
    const int reps = 5;
    for (int r = 0; r < reps; ++r)
      for (auto& bucket : buckets) {
        barrier();
        auto c0 = std::chrono::steady_clock::now();
        std::vector<nova::dist::Communicator::Buffer> buffers;
        for (auto& b : bucket) buffers.push_back({b.data(), b.size()});
        for (auto h : comm->start_bucket_sum(buffers, nova::DType::f32)) comm->wait(h);
        own += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count() / reps;
      }
  }
  if (rank != 0) return 0;

  double tokens = double(batch * T) / secs;
  std::printf("nova %s, %d rank%s, %lld sequences each, %s threads each: step %.3f s, %.0f tokens/s\n",
              medium ? "medium" : "small", world, world > 1 ? "s" : "", (long long)B,
              std::getenv("NOVA_NUM_THREADS") ? std::getenv("NOVA_NUM_THREADS") : "all", secs, tokens);
  if (!last.collectives.empty()) {
    double span = last.end_s - last.begin_s;
    auto at = [&](double t) { return (t - last.begin_s) * 1e3; };
    std::printf("  last step on rank 0: %zu launches in %.1f ms; %zu buckets\n", last.launches.size(), span * 1e3,
                last.collectives.size());
    for (std::size_t k = 0; k < last.collectives.size(); ++k) {
      const auto& b = last.collectives[k];
      std::printf("  bucket %zu, %.2f MiB: started after launch %u of %zu (%.1f ms; the start took %.2f ms), its "
                  "wait before launch %u (%.1f ms) returned at %.1f ms, blocked %.2f ms\n",
                  k, double(b.bytes) / (1 << 20), b.after_launch, last.launches.size(), at(b.start_s),
                  (b.start_end_s - b.start_s) * 1e3, b.before_launch, at(b.wait_begin_s), at(b.wait_end_s),
                  (b.wait_end_s - b.wait_begin_s) * 1e3);
    }
    double hidden = own > 0 ? std::clamp(1.0 - (blocked / steps) / own, 0.0, 1.0) : 0.0;
    std::printf("  communication per step: own time %.2f ms (the same sums alone), blocked %.2f ms in the "
                "step's starts and waits: %.3f of it hidden\n",
                own * 1e3, blocked / steps * 1e3, hidden);
    std::printf("RESULT nova ranks=%d tokens_per_s=%.1f own_ms=%.3f blocked_ms=%.3f hidden=%.3f\n", world, tokens,
                own * 1e3, blocked / steps * 1e3, hidden);
  } else {
    std::printf("RESULT nova ranks=%d tokens_per_s=%.1f\n", world, tokens);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpt_dp_step: %s\n", e.what());
  return 1;
}
