// test_executable_desc.cpp - the executable description and the runtime
// that runs it, without the compiler: the byte format (round trip, every
// truncation, bit flips, versions, structural validation) and a plan of
// hand-written kernels (runtime_kernels.c) run through the loader, the arena
// and the thread pool, also from several threads at once.
#include <doctest/doctest.h>

#include <nova/cache.hpp>
#include <nova/distributed.hpp>
#include <nova/executable_desc.hpp>
#include <nova/timeline.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>

using nova::BufferRef;
using nova::DType;
using nova::ExecutableDesc;
using nova::Tensor;

namespace {

constexpr std::int64_t kN = 1000;

std::vector<std::uint8_t> kernel_object() {
  std::ifstream in(NOVA_TEST_KERNELS, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

BufferRef input(std::uint32_t i) { return {BufferRef::Kind::input, i, 0, kN * 4}; }
BufferRef output(std::uint32_t i) { return {BufferRef::Kind::output, i, 0, kN * 4}; }
BufferRef arena(std::uint64_t offset) { return {BufferRef::Kind::arena, 0, offset, kN * 4}; }

/// out0 = (2 in0 + 1) + in0 through an arena temporary, 10 workgroups each;
/// out1 is in1 + 1, updated in place.
ExecutableDesc two_kernel_plan() {
  ExecutableDesc d;
  d.compiler_version = nova::compiler_version();
  d.key = {0x1234, 0x5678};
  d.target = nova::host_target();
  d.inputs = {{DType::f32, {kN}}, {DType::f32, {kN}}};
  d.outputs = {{DType::f32, {kN}}, {DType::f32, {kN}}};
  d.aliases = {-1, 1};
  d.arena_bytes = kN * 4 + 64;
  d.kernels = {{"nova_scale", "2x+1"}, {"nova_add", "a+b"}, {"nova_increment", "x+1 in place"}};
  d.launches = {{0, 10, {input(0), arena(64)}}, {1, 10, {arena(64), input(0), output(0)}}, {2, 1, {input(1)}}};
  d.object_format = "elf-shared-object";
  d.object = kernel_object();
  return d;
}

void check_runs(const nova::Executable& exe, std::uint64_t seed) {
  Tensor x = Tensor::randn({kN}, seed), y = Tensor::randn({kN}, seed + 1);
  std::vector<double> y0 = y.to_vector();
  std::vector<Tensor> out = exe(std::vector<Tensor>{x, y});
  REQUIRE(out.size() == 2);
  auto xs = x.to_vector(), o = out[0].to_vector(), o1 = out[1].to_vector(), y1 = y.to_vector();
  for (std::int64_t i = 0; i < kN; ++i) {
    float want = (2.0f * float(xs[i]) + 1.0f) + float(xs[i]);
    REQUIRE(o[i] == want);
    REQUIRE(o1[i] == float(y0[i]) + 1.0f); // the aliased output is its input, updated
    REQUIRE(y1[i] == o1[i]);
  }
}

} // namespace

TEST_CASE("an executable description survives serialization exactly") {
  ExecutableDesc d = two_kernel_plan();
  d.collectives = {{nova::CollectiveDesc::Kind::all_reduce_sum, DType::f64, 1, 2, {output(0)}}};
  std::vector<std::uint8_t> bytes = d.serialize();
  ExecutableDesc back = ExecutableDesc::deserialize(bytes);
  CHECK(back == d);
  CHECK(back.serialize() == bytes);
}

TEST_CASE("every truncation and bit flip of a description is refused by name") {
  std::vector<std::uint8_t> good = two_kernel_plan().serialize();
  for (std::size_t n = 0; n < good.size(); n += (n < 256 ? 1 : 97)) {
    std::vector<std::uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK_THROWS_AS(ExecutableDesc::deserialize(cut, "cut"), nova::FormatError);
  }
  std::uint64_t seed = 7;
  INFO("seed = ", seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<std::uint8_t> bad = good;
    std::size_t bit = rng() % (bad.size() * 8);
    bad[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    INFO("bit ", bit);
    CHECK_THROWS_AS(ExecutableDesc::deserialize(bad, "flipped"), nova::FormatError);
  }
  // A body length of 2^64 - 4 followed by 4 bytes: length + 8 wraps to the 4 bytes left
  // (libFuzzer's find; the reader hashed 2^64 bytes).
  std::vector<std::uint8_t> wrapped(good.begin(), good.begin() + 12);
  for (int i = 0; i < 8; ++i) wrapped.push_back(i == 0 ? 0xfc : 0xff);
  for (std::uint8_t b : {0x6e, 0x27, 0x6f, 0x01}) wrapped.push_back(b);
  CHECK_THROWS_WITH_AS(ExecutableDesc::deserialize(wrapped, "wrapped"), doctest::Contains("body length"),
                       nova::FormatError);
  std::vector<std::uint8_t> newer = good;
  newer[8] = static_cast<std::uint8_t>(nova::executable_format_version + 1);
  try {
    ExecutableDesc::deserialize(newer, "newer");
    FAIL("accepted another format version");
  } catch (const nova::FormatError& e) {
    CHECK(std::string(e.what()).find("format version " + std::to_string(nova::executable_format_version + 1)) !=
          std::string::npos);
  }
}

TEST_CASE("a plan that would touch memory that does not exist is refused") {
  auto refused = [](ExecutableDesc d, const char* fragment) {
    INFO(fragment);
    try {
      ExecutableDesc::deserialize(d.serialize(), "plan");
      FAIL("accepted");
    } catch (const nova::FormatError& e) {
      CHECK(std::string(e.what()).find(fragment) != std::string::npos);
    }
  };
  ExecutableDesc d = two_kernel_plan();
  d.launches[0].kernel = 9;
  refused(d, "names kernel 9 of 3");
  d = two_kernel_plan();
  d.launches[1].args[0].offset = d.arena_bytes;
  refused(d, "passes the end of the");
  d = two_kernel_plan();
  d.launches[0].args[0].index = 5;
  refused(d, "reads input 5 of 2");
  d = two_kernel_plan();
  d.launches[1].args[2] = output(1);
  refused(d, "writes aliased output 1");
  d = two_kernel_plan();
  d.launches[0].workgroups = 0;
  refused(d, "has no workgroups");
  d = two_kernel_plan();
  d.aliases = {-1, 0};
  d.inputs[0] = {DType::f64, {kN}};
  refused(d, "aliases an input of another type");
}

TEST_CASE("the runtime runs a plan of kernels over workgroups, with an arena") {
  std::shared_ptr<nova::Executable> exe = nova::load_executable(two_kernel_plan());
  CHECK(exe->kind() == "cpu");
  check_runs(*exe, 11);
  check_runs(*exe, 12); // arenas are reused across runs
}

TEST_CASE("a plan's collectives run on the calling thread's communicator, between its launches") {
  // launch 0: tmp = 2 x + 1 (arena); tmp summed over the ranks after it and
  // before launch 1: out0 = tmp + x. Two ranks on two threads (loopback).
  ExecutableDesc d = two_kernel_plan();
  d.collectives = {{nova::CollectiveDesc::Kind::all_reduce_sum, DType::f32, 1, 1, {arena(64)}}};
  std::shared_ptr<nova::Executable> exe = nova::load_executable(d);
  auto run_ranks = [&](const std::vector<std::shared_ptr<nova::dist::Communicator>>& group, std::uint64_t seed) {
    std::vector<Tensor> xs{Tensor::randn({kN}, seed), Tensor::randn({kN}, seed + 1)};
    std::vector<std::vector<double>> outs(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        nova::dist::set_communicator(group[static_cast<std::size_t>(r)]);
        try {
          std::vector<Tensor> out = (*exe)(std::vector<Tensor>{xs[static_cast<std::size_t>(r)], Tensor::zeros({kN})});
          outs[static_cast<std::size_t>(r)] = out[0].to_vector();
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(r)] = e.what();
        }
        nova::dist::set_communicator(nullptr);
      });
    for (auto& t : threads) t.join();
    return std::tuple{xs, outs, errors};
  };
  for (std::uint64_t seed : {41, 42}) { // the second run reuses the arenas
    auto [xs, outs, errors] = run_ranks(nova::dist::loopback_group(2, 30.0), seed);
    auto x0 = xs[0].to_vector(), x1 = xs[1].to_vector();
    for (int r = 0; r < 2; ++r) {
      INFO("rank ", r, ": ", errors[static_cast<std::size_t>(r)]);
      REQUIRE(errors[static_cast<std::size_t>(r)].empty());
      const auto& x = r == 0 ? x0 : x1;
      for (std::int64_t i = 0; i < kN; ++i) {
        float sum = (2.0f * float(x0[i]) + 1.0f) + (2.0f * float(x1[i]) + 1.0f);
        REQUIRE(outs[static_cast<std::size_t>(r)][i] == sum + float(x[i]));
      }
    }
  }
  // A rank that never takes part: the other's step fails, bounded, and the
  // executable still runs afterwards (the failed run's arena is not reused).
  auto [xs, outs, errors] = run_ranks(nova::dist::loopback_group(2, 0.2, {.absent_rank = 1}), 43);
  CHECK(errors[0].find("rank 1 did not take part within 0.2 s") != std::string::npos);
  CHECK(errors[1].find("rank 1 is absent") != std::string::npos);
  auto again = run_ranks(nova::dist::loopback_group(2, 30.0), 44);
  CHECK(std::get<2>(again)[0].empty());
  CHECK(std::get<2>(again)[1].empty());
  // Without a communicator the step refuses to run, saying why.
  CHECK_THROWS_WITH_AS((*exe)(std::vector<Tensor>{Tensor::zeros({kN}), Tensor::zeros({kN})}),
                       doctest::Contains("no communicator (nova::dist::set_communicator)"), nova::DistError);
  // A collective of a dtype it cannot sum, or of a partial element, is refused when described.
  ExecutableDesc odd = two_kernel_plan();
  odd.collectives = {{nova::CollectiveDesc::Kind::all_reduce_sum, DType::f64, 1, 1, {{BufferRef::Kind::arena, 0, 64, 12}}}};
  CHECK_THROWS_WITH_AS(odd.validate(), doctest::Contains("not a whole number of f64"), nova::FormatError);
}

TEST_CASE("one executable runs on several threads at once") {
  std::shared_ptr<nova::Executable> exe = nova::load_executable(two_kernel_plan());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) check_runs(*exe, 100 + 10 * t + i);
    });
  for (auto& th : threads) th.join();
}

TEST_CASE("a forked child runs executables on its own thread") {
  std::shared_ptr<nova::Executable> exe = nova::load_executable(two_kernel_plan());
  check_runs(*exe, 21); // the pool's workers exist in this process now
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    Tensor x = Tensor::full({kN}, 1.0), y = Tensor::zeros({kN});
    std::vector<Tensor> out = (*exe)(std::vector<Tensor>{x, y});
    ::_exit(out[0].at({kN - 1}) == 4.0 ? 0 : 1); // (2 + 1) + 1
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("code this machine cannot run is refused when loaded, kept when described") {
  ExecutableDesc d = two_kernel_plan();
  d.target.features.push_back("an_isa_feature_no_cpu_has");
  try {
    nova::load_executable(d);
    FAIL("loaded");
  } catch (const nova::Error& e) {
    CHECK(std::string(e.what()).find("lacks an_isa_feature_no_cpu_has") != std::string::npos);
  }
  std::shared_ptr<nova::Executable> kept = nova::load_or_describe(d);
  CHECK(kept->kind() == "unloadable");
  REQUIRE(kept->description() != nullptr);
  CHECK(*kept->description() == d);
  Tensor x = Tensor::zeros({kN}), y = Tensor::zeros({kN});
  CHECK_THROWS_AS((*kept)(std::vector<Tensor>{x, y}), nova::Error);
  // A missing symbol is an error too, not a crash at run time.
  d = two_kernel_plan();
  d.kernels[1].symbol = "nova_no_such_kernel";
  CHECK_THROWS_AS(nova::load_executable(d), nova::Error);
}

TEST_CASE("targets: named entries, hashes and the host") {
  nova::TargetDesc host = nova::host_target();
  CHECK(host.name == "host");
  CHECK(host.cores >= 1);
  CHECK(host.has("sse2"));
  nova::TargetDesc v4 = nova::named_target("x86-64-v4"), v3 = nova::named_target("x86-64-v3");
  CHECK(v4.vector_bits == 512);
  CHECK(v4.vector_registers == 32);
  CHECK(v3.vector_bits == 256);
  CHECK(v4.has("avx512f"));
  CHECK_FALSE(v3.has("avx512f"));
  CHECK(v4.hash() != v3.hash());
  CHECK(v4.hash() == nova::named_target("x86-64-v4").hash());
  nova::TargetDesc tweaked = v4;
  tweaked.model = "another brand string";
  CHECK(tweaked.hash() == v4.hash()); // informative only
  tweaked.cores += 1;
  CHECK(tweaked.hash() != v4.hash());
  CHECK(nova::missing_features(v3, v4).empty());
  CHECK_FALSE(nova::missing_features(v4, v3).empty());
  CHECK_THROWS_AS(nova::named_target("sm_42"), nova::Error);
}

TEST_CASE("the in-process cache under concurrent misses: one compile per key, every thread its result") {
  // Eight threads ask for four keys at once, twice each; each key's compile
  // runs once (it sleeps, so the others really wait on it) and everyone gets
  // that key's executable. Run under TSan in the thread-sanitizer build.
  nova::clear_cache();
  auto exe = nova::load_executable(two_kernel_plan());
  std::atomic<int> compiles{0};
  std::vector<std::shared_ptr<nova::Executable>> got(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 2; ++round) {
        nova::CacheKey key{{0xcafe, std::uint64_t(t % 4)}};
        got[std::size_t(t * 2 + round)] = nova::detail::cache_get_or_compile(key, [&] {
          ++compiles;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          return exe;
        });
      }
    });
  for (auto& th : threads) th.join();
  CHECK(compiles == 4);
  for (const auto& e : got) CHECK(e == exe);
  check_runs(*got[3], 11);
  nova::clear_cache();
}

TEST_CASE("the timeline records a run's launches and its collectives in order") {
  ExecutableDesc d = two_kernel_plan();
  d.collectives = {{nova::CollectiveDesc::Kind::all_reduce_sum, DType::f32, 1, 1, {arena(64)}}};
  std::shared_ptr<nova::Executable> exe = nova::load_executable(d);
  auto group = nova::dist::loopback_group(1, 30.0);
  nova::dist::set_communicator(group[0]);
  nova::set_timeline(true);
  (*exe)(std::vector<Tensor>{Tensor::zeros({kN}), Tensor::zeros({kN})});
  nova::set_timeline(false);
  nova::dist::set_communicator(nullptr);
  nova::RunTimeline t = nova::last_timeline();
  CHECK(t.rank == 0);
  REQUIRE(t.launches.size() == d.launches.size());
  REQUIRE(t.collectives.size() == 1);
  const nova::CollectiveTiming& c = t.collectives[0];
  CHECK(c.after_launch == 1);
  CHECK(c.before_launch == 1);
  CHECK(c.bytes == arena(64).bytes);
  REQUIRE(c.buffer_bytes.size() == 1);
  // launch 0, then the start, the wait, launch 1, all inside the run.
  CHECK(t.begin_s <= t.launches[0].begin_s);
  CHECK(t.launches[0].end_s <= c.start_s);
  CHECK(c.start_s <= c.start_end_s);
  CHECK(c.start_end_s <= c.wait_begin_s);
  CHECK(c.wait_begin_s <= c.wait_end_s);
  CHECK(c.wait_end_s <= t.launches[1].begin_s);
  CHECK(t.launches[1].end_s <= t.end_s);
  std::string json = nova::timeline_json(t);
  CHECK(json.rfind("{\"traceEvents\":[", 0) == 0);
  CHECK(json.find("\"launches\":" + std::to_string(d.launches.size())) != std::string::npos);
  CHECK(json.find("summed over the ranks") != std::string::npos);
}

TEST_CASE("agree_on_executable: rank 0 compiles, the others load its description; builds, keys and failures") {
  ExecutableDesc d = two_kernel_plan();
  auto run = [&](std::array<std::string, 2> builds, std::array<std::array<std::uint64_t, 2>, 2> keys,
                 bool rank0_fails) {
    auto group = nova::dist::loopback_group(2, 30.0);
    std::array<std::string, 2> errors;
    std::array<std::shared_ptr<nova::Executable>, 2> exes;
    std::array<int, 2> compiles{0, 0};
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        try {
          exes[r] = nova::dist::agree_on_executable(*group[r], keys[r], builds[r], [&] {
            ++compiles[r];
            if (rank0_fails) throw nova::CompileError("nova: no plan fits the budget");
            return nova::load_executable(d);
          }, "step.cpp:7");
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    return std::tuple{exes, errors, compiles};
  };
  // Agreement: only rank 0 compiles; rank 1 runs rank 0's description.
  auto [exes, errors, compiles] = run({"build A", "build A"}, {{{1, 2}, {1, 2}}}, false);
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  CHECK(compiles[0] == 1);
  CHECK(compiles[1] == 0);
  REQUIRE(exes[1]->description());
  CHECK(*exes[1]->description() == *exes[0]->description());
  // Another build: both ranks fail, rank 1 naming both builds.
  auto [e2, errors2, c2] = run({"build A", "build B"}, {{{1, 2}, {1, 2}}}, false);
  CHECK(errors2[1].find("rank 1 runs compiler build B, rank 0 build A (another build)") != std::string::npos);
  CHECK(errors2[0].find("differs on rank(s) 1") != std::string::npos);
  // Another step: both fail, naming both keys.
  auto [e3, errors3, c3] = run({"build A", "build A"}, {{{1, 2}, {1, 3}}}, false);
  CHECK(errors3[1].find("key 00000000000000010000000000000003, rank 0 one with key 00000000000000010000000000000002") !=
        std::string::npos);
  CHECK(errors3[0].find("step.cpp:7") != std::string::npos);
  // Rank 0's compile fails: rank 0 gets its own error, rank 1 its message.
  auto [e4, errors4, c4] = run({"build A", "build A"}, {{{1, 2}, {1, 2}}}, true);
  CHECK(errors4[0] == "nova: no plan fits the budget");
  CHECK(errors4[1].find("rank 0 could not compile the data-parallel step declared at step.cpp:7: nova: no plan fits") !=
        std::string::npos);
  CHECK(c4[1] == 0);
}
