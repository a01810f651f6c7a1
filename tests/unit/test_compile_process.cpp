// test_compile_process.cpp - steps compiled by the nova-compile child process
// (NOVA_COMPILE=process, the default) and in this process (inline) give the
// same executables; the child's peak is counted; every way the child can
// fail (an error, a crash, a bad exit, no tool at all) is a named
// nova::CompileError, and this process goes on compiling afterwards.
// nova::set_explain reaches the child.
#include "captured_stderr.hpp"
#include "scoped_env.hpp"
#include "testing.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace fs = std::filesystem;
using nova::Tensor;
using nova_test::Env;
using nova_test::Gen;
using nova_test::rel_error;

namespace {

auto step_fn = [](auto x, auto w) { return nova::sum(nova::tanh(nova::matmul(x, w)) * 2.0 - x); };

Tensor run(Env& env, const char* mode, std::uint64_t seed) {
  env.set("NOVA_COMPILE", mode);
  nova::clear_cache();
  Tensor x = Tensor::randn({24, 24}, seed), w = Tensor::randn({24, 24}, seed + 1);
  return nova::jit(step_fn)(x, w);
}

/// A shell script standing in for the tool, removed afterwards.
/// (Gen's seeds are printed by INFO where results are compared.)
struct FakeTool {
  fs::path path;
  explicit FakeTool(const std::string& body) {
    path = fs::temp_directory_path() / ("nova-fake-compile-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(nova_test::unique_number()));
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
  }
  ~FakeTool() { fs::remove(path); }
};

std::string compile_error(Env& env) {
  try {
    run(env, "process", 5);
  } catch (const nova::CompileError& e) {
    return e.what();
  }
  return "(no nova::CompileError)";
}

} // namespace

TEST_CASE("a step compiled by the child process equals the one compiled inline, and its peak is counted") {
  Env env;
  env.set("NOVA_CACHE", "off");
  env.unset("NOVA_COMPILE_TOOL");
  Gen g;
  INFO("seed ", g.seed);
  Tensor inline_result = run(env, "inline", g.seed);
  CHECK(nova::cache_stats().compiles == 1);
  CHECK(nova::cache_stats().compiles_in_child == 0);
  Tensor child_result = run(env, "process", g.seed);
  nova::CacheStats stats = nova::cache_stats();
  CHECK(stats.compiles == 1);
  CHECK(stats.compiles_in_child == 1);
  // The child links the whole compiler: its peak is megabytes, not zero.
  CHECK(stats.compile_peak_bytes > (std::uint64_t{8} << 20));
  CHECK(rel_error(child_result, inline_result) == 0.0);
  Tensor x = Tensor::randn({24, 24}, g.seed), w = Tensor::randn({24, 24}, g.seed + 1);
  env.set("NOVA_COMPILE", "inline");
  CHECK(rel_error(child_result, nova::jit(step_fn, nova::ExecMode::interpreted)(x, w)) < 1e-5);
}

TEST_CASE("the child's peak is its own: a program holding much memory does not lend it to the compiler's") {
  // wait4's ru_maxrss of a posix_spawn child includes the parent's peak
  // (Linux adds the old address space's high-water mark at exec): a step
  // compiled while this process held 768 MiB was reported as needing more.
  Env env;
  env.set("NOVA_CACHE", "off");
  env.unset("NOVA_COMPILE_TOOL");
  const std::size_t held = std::size_t{768} << 20;
  std::vector<unsigned char> ballast(held, 1); // every page touched
  Gen g;
  INFO("seed ", g.seed);
  run(env, "process", g.seed);
  nova::CacheStats stats = nova::cache_stats();
  REQUIRE(stats.compiles_in_child == 1);
  MESSAGE("a small step's compiler peak with this process holding 768 MiB: ", stats.compile_peak_bytes >> 20,
          " MiB");
  CHECK(stats.compile_peak_bytes > (std::uint64_t{8} << 20));
  CHECK(stats.compile_peak_bytes < held);
  CHECK(ballast[held / 2] == 1);
}

TEST_CASE("the compiler process's own errors reach the caller with its message") {
  Env env;
  env.set("NOVA_CACHE", "off");
  env.unset("NOVA_COMPILE_TOOL");
  env.set("NOVA_COMPILE", "process");
  std::uint64_t previous = nova::memory_budget();
  nova::set_memory_budget(64); // no plan fits 64 bytes: the child's CompileError
  std::string msg = compile_error(env);
  nova::set_memory_budget(previous);
  INFO(msg);
  CHECK(msg.find("needs more memory than its budget") != std::string::npos);
  CHECK(msg.find("64 bytes") != std::string::npos);
}

TEST_CASE("a step for a GPU target compiles to PTX in process and in the compiler process; running it is a named error") {
  // The CUDA target generates every kernel; the runtime does not run GPU
  // steps yet, which the error says, naming the target. In process and in
  // the compiler process alike, the description carries the PTX.
  for (const char* mode : {"inline", "process"}) {
    CAPTURE(mode);
    Env env;
    env.set("NOVA_CACHE", "off");
    env.unset("NOVA_COMPILE_TOOL");
    env.unset("NOVA_GPU");
    env.set("NOVA_TARGET", "sm_80");
    std::string msg;
    try {
      run(env, mode, 5);
    } catch (const nova::Error& e) {
      msg = e.what();
    }
    INFO(msg);
    CHECK(msg.find("this executable is for a CUDA device (sm_80") != std::string::npos);
    env.set("NOVA_COMPILE", mode);
    Tensor x = Tensor::randn({24, 24}, 1), w = Tensor::randn({24, 24}, 2);
    auto exe = nova::jit(step_fn).executable(x, w);
    REQUIRE(exe->description() != nullptr);
    CHECK(exe->description()->object_format == "ptx");
    std::string ptx(exe->description()->object.begin(), exe->description()->object.end());
    CHECK(ptx.find(".target sm_80") != std::string::npos);
  }
}

TEST_CASE("a compiler process that crashes, fails or cannot start is a named CompileError") {
  Env env;
  env.set("NOVA_CACHE", "off");
  {
    FakeTool crash("kill -SEGV $$");
    env.set("NOVA_COMPILE_TOOL", crash.path.string());
    std::string msg = compile_error(env);
    INFO(msg);
    CHECK(msg.find("died of signal 11") != std::string::npos);
    CHECK(msg.find("NOVA_COMPILE=inline") != std::string::npos);
    CHECK(msg.find(crash.path.string()) != std::string::npos);
  }
  {
    FakeTool fail("echo broken >&2; exit 7");
    env.set("NOVA_COMPILE_TOOL", fail.path.string());
    std::string msg = compile_error(env);
    INFO(msg);
    CHECK(msg.find("exited with status 7") != std::string::npos);
  }
  {
    // Exits 0 without writing the executable.
    FakeTool silent("exit 0");
    env.set("NOVA_COMPILE_TOOL", silent.path.string());
    std::string msg = compile_error(env);
    INFO(msg);
    CHECK(msg.find("exited without writing the executable") != std::string::npos);
  }
  {
    // The real tool, told the program is another build: it refuses, since
    // its code would be cached under the program's keys.
    FakeTool other(std::string("NOVA_COMPILER_BUILD=another-build exec ") + NOVA_TEST_COMPILE_TOOL + " \"$@\"");
    env.set("NOVA_COMPILE_TOOL", other.path.string());
    std::string msg = compile_error(env);
    INFO(msg);
    CHECK(msg.find("is another build of Nova") != std::string::npos);
    CHECK(msg.find("another-build") != std::string::npos);
  }
  {
    env.set("NOVA_COMPILE_TOOL", "/nonexistent/nova-compile");
    std::string msg = compile_error(env);
    INFO(msg);
    CHECK(msg.find("cannot start the compiler process /nonexistent/nova-compile") != std::string::npos);
  }
  // This process still compiles, in the child and inline.
  env.unset("NOVA_COMPILE_TOOL");
  Gen g;
  Tensor a = run(env, "process", g.seed), b = run(env, "inline", g.seed);
  CHECK(rel_error(a, b) == 0.0);
}

TEST_CASE("NOVA_COMPILE names its two modes when set to anything else") {
  Env env;
  env.set("NOVA_CACHE", "off");
  env.set("NOVA_COMPILE", "sideways");
  nova::clear_cache();
  Tensor x = Tensor::randn({4, 4}, 1), w = Tensor::randn({4, 4}, 2);
  try {
    nova::jit(step_fn)(x, w);
    FAIL("no nova::Error for NOVA_COMPILE=sideways");
  } catch (const nova::Error& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("NOVA_COMPILE must be \"process\"") != std::string::npos);
    CHECK(msg.find("\"inline\"") != std::string::npos);
    CHECK(msg.find("sideways") != std::string::npos);
  }
}

TEST_CASE("nova::set_explain prints the plan of each compile, the child process's too") {
  Env env;
  env.set("NOVA_CACHE", "off");
  env.unset("NOVA_EXPLAIN");
  env.unset("NOVA_COMPILE_TOOL");
  for (const char* mode : {"process", "inline"}) {
    INFO("NOVA_COMPILE=", mode);
    // stderr, the child's too.
    Gen g;
    const std::string text = nova_test::captured_stderr([&] {
      nova::set_explain(true);
      run(env, mode, g.seed);
      nova::set_explain(false);
      run(env, mode, g.seed + 7); // compiles again (new in-process cache): prints nothing
    });
    INFO(text);
    CHECK(text.find("memory: arena") != std::string::npos);
    CHECK(text.find("live at the peak") != std::string::npos);
    CHECK(text.find("largest buffers") != std::string::npos);
    // One compile explained, the second not.
    std::size_t first = text.find("memory: arena");
    CHECK(text.find("memory: arena", first + 1) == std::string::npos);
    if (std::string(mode) == "process")
      CHECK(text.find("was compiled by a child process") != std::string::npos);
  }
}
