// test_data_parallel.cpp - data-parallel training (nova::train_step with a
// communicator): N ranks, each on 1/N of the batch, end every step with the
// parameters one rank reaches on the whole batch, and with the same bits on
// every rank. Ranks are threads of one loopback group (nova/distributed.hpp);
// tests/e2e/data_parallel.sh runs the same over MPI processes (and the
// interpreter, which holds the compiler's lock while it runs a step, so two
// ranks of one process cannot interpret at once).
#include "testing.hpp"

#include <array>
#include <exception>
#include <thread>

using nova::DType;
using nova::Tensor;
using namespace nova_test;

namespace {

auto mlp_mse = [](const nova::ParamExprs& p, auto x, auto y) {
  auto h = nova::gelu(nova::matmul(x, p["w1"]) + p["b1"]);
  return nova::nn::mse(nova::matmul(h, p["w2"]) + p["b2"], y);
};

nova::Params mlp_params(Gen& g, DType dt, int k, int h, int m) {
  nova::Params p;
  p.add("w1", g.randn({k, h}, dt));
  p.add("b1", g.randn({h}, dt));
  p.add("w2", g.randn({h, m}, dt));
  p.add("b2", g.randn({m}, dt));
  return p;
}

nova::Params copy_of(const nova::Params& from) {
  nova::Params p;
  for (std::size_t i = 0; i < from.size(); ++i) p.add(from.names()[i], from.tensors()[i].clone());
  return p;
}

/// Rows [begin, end) of a 2-D tensor.
Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t end) {
  std::int64_t cols = t.shape()[1];
  std::vector<double> all = t.to_vector();
  std::vector<double> part(all.begin() + begin * cols, all.begin() + end * cols);
  return Tensor::from<double>({end - begin, cols}, std::span<const double>(part)).to(t.dtype());
}

/// Runs `body(rank)` on `n` threads, each with its rank of `group` set;
/// rethrows the first failure after all have ended.
template <class Body>
void on_ranks(const std::vector<std::shared_ptr<nova::dist::Communicator>>& group, Body body) {
  std::vector<std::exception_ptr> errors(group.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < group.size(); ++r)
    threads.emplace_back([&, r] {
      nova::dist::set_communicator(group[r]);
      try {
        body(static_cast<int>(r));
      } catch (...) {
        errors[r] = std::current_exception();
      }
      nova::dist::set_communicator(nullptr);
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

/// Two ranks of `group` each take one step of a small MLP on `batch[r]`
/// rows; returns each rank's DistError message ("" if none).
std::vector<std::string> first_step_errors(const std::vector<std::shared_ptr<nova::dist::Communicator>>& group,
                                           std::array<int, 2> batch) {
  const int k = 6, h = 10, m = 3;
  Gen g;
  nova::Params init = mlp_params(g, DType::f32, k, h, m);
  std::vector<nova::Params> mine(2);
  for (auto& p : mine) p = copy_of(init);
  std::vector<std::string> errors(2);
  on_ranks(group, [&](int r) {
    auto step = nova::train_step(mlp_mse, mine[static_cast<std::size_t>(r)], nova::AdamW{});
    int rows = batch[static_cast<std::size_t>(r)];
    try {
      step(g.randn({rows, k}), g.randn({rows, m}));
    } catch (const nova::DistError& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
  });
  return errors;
}

} // namespace

TEST_CASE("data parallel: N ranks on 1/N of the batch reach one rank's parameters on all of it") {
  const int k = 12, h = 40, m = 6, steps = 3;
  for (DType dt : {DType::f64, DType::f32}) {
    for (int world : {2, 3}) {
      for (double clip : {0.0, 0.5}) {
        Gen g;
        INFO("seed = ", g.seed, ", ", nova::name_of(dt), ", ", world, " ranks, clip ", clip);
        const int per_rank = 8, n = per_rank * world;
        Tensor x = g.randn({n, k}, dt), y = g.randn({n, m}, dt);
        nova::Params init = mlp_params(g, dt, k, h, m);
        nova::AdamW opt{.lr = 0.01, .weight_decay = 0.1};

        nova::Params whole = copy_of(init);
        auto reference = nova::train_step(mlp_mse, whole, opt, {.clip_grad_norm = clip});
        std::vector<double> want_loss;
        for (int s = 0; s < steps; ++s) want_loss.push_back(reference(x, y));

        std::vector<nova::Params> mine(static_cast<std::size_t>(world));
        for (auto& p : mine) p = copy_of(init);
        std::vector<std::vector<double>> losses(static_cast<std::size_t>(world));
        std::vector<std::size_t> collectives(static_cast<std::size_t>(world));
        on_ranks(nova::dist::loopback_group(world, 60), [&](int r) {
          auto step = nova::train_step(mlp_mse, mine[static_cast<std::size_t>(r)], opt, {.clip_grad_norm = clip});
          Tensor xr = rows(x, r * per_rank, (r + 1) * per_rank), yr = rows(y, r * per_rank, (r + 1) * per_rank);
          for (int s = 0; s < steps; ++s) losses[static_cast<std::size_t>(r)].push_back(step(xr, yr));
          const nova::ExecutableDesc* desc = step.executable(xr, yr)->description();
          collectives[static_cast<std::size_t>(r)] = desc ? desc->collectives.size() : 0;
        });

        double tol = dt == DType::f64 ? 1e-10 : 1e-5;
        for (int r = 0; r < world; ++r) {
          CAPTURE(r);
          CHECK(collectives[static_cast<std::size_t>(r)] >= 1);
          for (std::size_t i = 0; i < init.size(); ++i) {
            CAPTURE(init.names()[i]);
            // The same bits on every rank: each sums in rank order.
            CHECK(mine[static_cast<std::size_t>(r)].tensors()[i].to_vector() == mine[0].tensors()[i].to_vector());
            CHECK(rel_error(mine[static_cast<std::size_t>(r)].tensors()[i], whole.tensors()[i]) <= tol);
          }
        }
        // Each rank's loss is its own shard's; their mean is the whole batch's.
        for (int s = 0; s < steps; ++s) {
          double mean = 0;
          for (int r = 0; r < world; ++r) mean += losses[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)] / world;
          CHECK(std::abs(mean - want_loss[static_cast<std::size_t>(s)]) <= tol * std::abs(want_loss[static_cast<std::size_t>(s)]));
        }
      }
    }
  }
}

TEST_CASE("data parallel: small buckets start during the backward, and give the same parameters") {
  // 1 KiB buckets: each of w2 (40 x 6 f64), b2, w1, b1 in its own bucket or
  // two, started in the order the backward produces them.
  const int k = 12, h = 40, m = 6;
  Gen g;
  INFO("seed = ", g.seed);
  Tensor x = g.randn({16, k}, DType::f64), y = g.randn({16, m}, DType::f64);
  nova::Params init = mlp_params(g, DType::f64, k, h, m);
  nova::AdamW opt{.lr = 0.01};
  std::vector<nova::Params> mine(2);
  for (auto& p : mine) p = copy_of(init);
  nova::Params whole = copy_of(init);
  auto reference = nova::train_step(mlp_mse, whole, opt);
  reference(x, y);
  reference(x, y);

  setenv("NOVA_DIST_BUCKET_MB", "0.001", 1);
  std::vector<nova::CollectiveDesc> plan;
  std::size_t launches = 0;
  on_ranks(nova::dist::loopback_group(2, 60), [&](int r) {
    auto step = nova::train_step(mlp_mse, mine[static_cast<std::size_t>(r)], opt);
    Tensor xr = rows(x, r * 8, r * 8 + 8), yr = rows(y, r * 8, r * 8 + 8);
    step(xr, yr);
    step(xr, yr);
    if (r == 0) {
      plan = step.executable(xr, yr)->description()->collectives;
      launches = step.executable(xr, yr)->description()->launches.size();
    }
  });
  unsetenv("NOVA_DIST_BUCKET_MB");
  REQUIRE(plan.size() >= 3);
  for (std::size_t c = 0; c < plan.size(); ++c) {
    CAPTURE(c);
    CHECK(plan[c].after_launch <= plan[c].before_launch);
    CHECK(plan[c].before_launch <= launches);
    if (c > 0) CHECK(plan[c - 1].after_launch <= plan[c].after_launch);
  }
  // The first bucket starts before the last one's gradients exist: its sum
  // overlaps the rest of the backward.
  CHECK(plan.front().after_launch < plan.back().after_launch);
  for (std::size_t i = 0; i < init.size(); ++i) {
    CAPTURE(init.names()[i]);
    CHECK(mine[1].tensors()[i].to_vector() == mine[0].tensors()[i].to_vector());
    CHECK(rel_error(mine[0].tensors()[i], whole.tensors()[i]) <= 1e-10);
  }
}

TEST_CASE("data parallel: ranks whose steps differ are refused at the first step, naming both keys") {
  std::vector<std::string> errors = first_step_errors(nova::dist::loopback_group(2, 60), {4, 5}); // rank 1: another shape
  INFO(errors[0], "\n", errors[1]);
  CHECK(errors[0].find("differs on rank(s) 1") != std::string::npos);
  CHECK(errors[1].find("rank 1 runs a step with key") != std::string::npos);
  CHECK(errors[1].find("rank 0 one with key") != std::string::npos);
  CHECK(errors[1].find("test_data_parallel.cpp") != std::string::npos);
}

TEST_CASE("data parallel: an absent rank makes the others fail within the timeout") {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors = first_step_errors(nova::dist::loopback_group(2, 1.0, {.absent_rank = 1}), {4, 4});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(errors[0], "\n", errors[1]);
  // Rank 0 sent its step and then found nobody to agree with.
  CHECK(errors[0].find("did not take part within 1 s") != std::string::npos);
  CHECK(errors[1].find("absent") != std::string::npos);
  CHECK(seconds < 30);
}
