// test_distributed.cpp - the communicator interface on the in-process
// (loopback) group: sums against a float64 reference on random buffers
// (fixed, printed seed), bitwise-equal results on every rank, several
// collectives in flight at once, and every failure ending in a DistError
// within the timeout: a rank that never takes part, ranks that disagree
// about what they sum, a bad NOVA_DIST_TIMEOUT_S. Runs under TSan too.
#include <doctest/doctest.h>

#include <nova/distributed.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using nova::DType;
using nova::dist::Communicator;

/// Runs `body(rank)` on one thread per rank; rethrows nothing (bodies check).
template <class Body> void on_every_rank(int n, Body body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&body, r] { body(r); });
  for (auto& t : threads) t.join();
}

std::uint64_t test_seed() {
  if (const char* s = std::getenv("NOVA_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return 20261201;
}

} // namespace

TEST_CASE("loopback all-reduce: rank-order sums, the same on every rank, several in flight") {
  const std::uint64_t seed = test_seed();
  INFO("seed = ", seed, " (NOVA_TEST_SEED)");
  for (int n : {1, 2, 3, 4}) {
    INFO("ranks = ", n);
    auto group = nova::dist::loopback_group(n, 30.0);
    // Three buckets of different sizes and dtypes, all started before any wait.
    const std::vector<std::size_t> counts{1, 1000, 4097};
    std::vector<std::vector<std::vector<float>>> f32(n);
    std::vector<std::vector<double>> f64(n);
    std::mt19937_64 rng(seed + static_cast<std::uint64_t>(n));
    std::normal_distribution<double> normal;
    for (int r = 0; r < n; ++r) {
      for (std::size_t c : counts) {
        f32[r].emplace_back(c);
        for (float& x : f32[r].back()) x = static_cast<float>(normal(rng));
      }
      f64[r].resize(333);
      for (double& x : f64[r]) x = normal(rng);
    }
    // The float64 reference of each sum.
    std::vector<std::vector<double>> ref32;
    for (std::size_t b = 0; b < counts.size(); ++b) {
      ref32.emplace_back(counts[b], 0.0);
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < counts[b]; ++i) ref32[b][i] += f32[r][b][i];
    }
    std::vector<double> ref64(333, 0.0);
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < 333; ++i) ref64[i] += f64[r][i];

    std::vector<std::string> errors(n);
    on_every_rank(n, [&](int r) {
      try {
        Communicator& c = *group[r];
        std::vector<Communicator::Handle> h;
        for (std::size_t b = 0; b < counts.size(); ++b)
          h.push_back(c.start_all_reduce_sum(f32[r][b].data(), counts[b], DType::f32));
        Communicator::Handle h64 = c.start_all_reduce_sum(f64[r].data(), 333, DType::f64);
        c.wait(h64);
        for (auto it = h.rbegin(); it != h.rend(); ++it) c.wait(*it); // any order
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
    for (int r = 0; r < n; ++r) CHECK_MESSAGE(errors[r].empty(), "rank ", r, ": ", errors[r]);
    double worst32 = 0, worst64 = 0;
    for (int r = 0; r < n; ++r) {
      CHECK(group[r]->rank() == r);
      CHECK(group[r]->size() == n);
      for (std::size_t b = 0; b < counts.size(); ++b) {
        for (std::size_t i = 0; i < counts[b]; ++i) {
          worst32 = std::max(worst32, std::abs(f32[r][b][i] - ref32[b][i]) / (1.0 + std::abs(ref32[b][i])));
          CHECK(f32[r][b][i] == f32[0][b][i]); // bitwise the same on every rank
        }
      }
      for (std::size_t i = 0; i < 333; ++i) {
        worst64 = std::max(worst64, std::abs(f64[r][i] - ref64[i]) / (1.0 + std::abs(ref64[i])));
        CHECK(f64[r][i] == f64[0][i]);
      }
    }
    CHECK(worst32 <= 1e-6);
    CHECK(worst64 <= 1e-14);
  }
}

TEST_CASE("loopback all-reduce: a rank that never takes part fails the others within the timeout") {
  const double timeout = 0.3;
  auto group = nova::dist::loopback_group(3, timeout, {.absent_rank = 2});
  std::vector<std::string> errors(3);
  std::vector<double> waited(3, 0);
  on_every_rank(3, [&](int r) {
    std::vector<float> g(64, 1.0f);
    auto start = std::chrono::steady_clock::now();
    try {
      auto h = group[r]->start_all_reduce_sum(g.data(), g.size(), DType::f32);
      group[r]->wait(h);
    } catch (const nova::DistError& e) {
      errors[r] = e.what();
    }
    waited[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  CHECK(errors[2].find("rank 2 is absent") != std::string::npos);
  for (int r : {0, 1}) {
    INFO("rank ", r, ": ", errors[r]);
    CHECK(errors[r].find("rank 2 did not take part within 0.3 s (NOVA_DIST_TIMEOUT_S)") != std::string::npos);
    CHECK(errors[r].find("64 x f32") != std::string::npos);
    CHECK(waited[r] >= timeout * 0.9);
    CHECK(waited[r] < timeout + 5.0); // bounded: never a hang
  }
}

TEST_CASE("loopback all-reduce: ranks that sum different things are refused, naming both") {
  auto group = nova::dist::loopback_group(2, 5.0);
  std::vector<std::string> errors(2);
  std::vector<float> a(10, 1.0f), b(12, 1.0f);
  on_every_rank(2, [&](int r) {
    try {
      auto h = group[r]->start_all_reduce_sum(r == 0 ? a.data() : b.data(), r == 0 ? 10 : 12, DType::f32);
      group[r]->wait(h);
    } catch (const nova::DistError& e) {
      errors[r] = e.what();
    }
  });
  for (int r : {0, 1}) {
    INFO("rank ", r, ": ", errors[r]);
    CHECK(errors[r].find("10 x f32") != std::string::npos);
    CHECK(errors[r].find("12 x f32") != std::string::npos);
    CHECK(errors[r].find("different steps") != std::string::npos);
  }
}

TEST_CASE("communicator misuse and settings are named") {
  auto group = nova::dist::loopback_group(1, 1.0);
  CHECK_THROWS_WITH_AS(group[0]->wait(7), doctest::Contains("never started"), nova::DistError);
  std::vector<std::int32_t> ints(4);
  CHECK_THROWS_WITH_AS(group[0]->start_all_reduce_sum(ints.data(), 4, DType::i32),
                       doctest::Contains("only f32 and f64"), nova::DistError);
  CHECK_THROWS_WITH_AS(nova::dist::loopback_group(0), doctest::Contains("at least one rank"), nova::DistError);
  ::setenv("NOVA_DIST_TIMEOUT_S", "soon", 1);
  CHECK_THROWS_WITH_AS(nova::dist::timeout_from_env(), doctest::Contains("NOVA_DIST_TIMEOUT_S='soon'"),
                       nova::DistError);
  ::setenv("NOVA_DIST_TIMEOUT_S", "2.5", 1);
  CHECK(nova::dist::timeout_from_env() == 2.5);
  ::unsetenv("NOVA_DIST_TIMEOUT_S");
  CHECK(nova::dist::timeout_from_env() == 300.0);
}

TEST_CASE("loopback broadcast: rank 0's bytes on every rank, in order; a silent root times out") {
  auto group = nova::dist::loopback_group(3, 5.0);
  std::vector<std::vector<std::uint8_t>> got(3);
  on_every_rank(3, [&](int r) {
    for (int round = 0; round < 3; ++round) {
      std::vector<std::uint8_t> bytes;
      if (r == round) bytes.assign(static_cast<std::size_t>(100 + round), static_cast<std::uint8_t>(round + 1));
      else bytes.assign(7, 0xee); // replaced, size too
      group[r]->broadcast(bytes, round);
      got[r].insert(got[r].end(), bytes.begin(), bytes.end());
    }
  });
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    REQUIRE(got[r].size() == 303);
    CHECK(got[r][0] == 1);
    CHECK(got[r][100] == 2);
    CHECK(got[r][302] == 3);
  }

  // A root that never sends: the others fail within the timeout.
  auto silent = nova::dist::loopback_group(2, 0.3, {.absent_rank = 0});
  std::vector<std::string> errors(2);
  on_every_rank(2, [&](int r) {
    std::vector<std::uint8_t> bytes(4, 1);
    try {
      silent[r]->broadcast(bytes, 0);
    } catch (const nova::DistError& e) {
      errors[r] = e.what();
    }
  });
  CHECK(errors[0].find("rank 0 is absent") != std::string::npos);
  CHECK(errors[1].find("rank 0 did not send within 0.3 s") != std::string::npos);

  // Ranks that disagree about the root are refused.
  auto split = nova::dist::loopback_group(2, 5.0);
  errors.assign(2, "");
  on_every_rank(2, [&](int r) {
    std::vector<std::uint8_t> bytes(4, 1);
    try {
      split[r]->broadcast(bytes, r);
    } catch (const nova::DistError& e) {
      errors[r] = e.what();
    }
  });
  CHECK((errors[0] + errors[1]).find("the ranks run different programs") != std::string::npos);
}
