// test_dump.cpp - NOVA_DUMP_IR=<dir> writes the IR after every stage.
#include "testing.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <vector>

namespace fs = std::filesystem;

namespace {

/// While alive: NOVA_DUMP_IR names a fresh directory, and the disk cache is
/// off (a disk hit would skip the codegen stages). Restores both after.
struct DumpScope {
  fs::path dir;
  std::string cache_value;
  bool had_cache;
  explicit DumpScope(const char* prefix)
      : dir(fs::temp_directory_path() / (prefix + std::to_string(nova_test::unique_number()))) {
    const char* was = std::getenv("NOVA_CACHE");
    had_cache = was != nullptr;
    cache_value = was ? was : "";
    ::setenv("NOVA_DUMP_IR", dir.c_str(), 1);
    ::setenv("NOVA_CACHE", "off", 1);
  }
  void restore() const {
    ::unsetenv("NOVA_DUMP_IR");
    if (had_cache) ::setenv("NOVA_CACHE", cache_value.c_str(), 1);
    else ::unsetenv("NOVA_CACHE");
  }
  /// The folder of the one step compiled (NOVA_DUMP_IR=<dir> writes
  /// <dir>/<step>/<N>-<stage>.mlir).
  fs::path step_dir() const {
    std::vector<fs::path> steps;
    for (const auto& entry : fs::directory_iterator(dir)) steps.push_back(entry.path());
    REQUIRE(steps.size() == 1);
    REQUIRE(fs::is_directory(steps[0]));
    return steps[0];
  }
  std::string read(const char* stage) const {
    std::stringstream text;
    text << std::ifstream(step_dir() / (std::string(stage) + ".mlir")).rdbuf();
    return text.str();
  }
  ~DumpScope() {
    restore();
    fs::remove_all(dir);
  }
};

} // namespace

TEST_CASE("NOVA_DUMP_IR writes one file per pipeline stage") {
  DumpScope dump("nova-dump-");
  nova::Tensor x = nova::Tensor::randn({3, 2}, 1);
  // A step type of its own, so this test always compiles.
  nova::jit([](auto x) { return nova::softmax(x) * 3.0; })(x);
  dump.restore();
  for (const char* stage :
       {"1-nova", "2-graph", "3-linalg", "4-bufferized", "5-kernels", "6-loops", "7-llvm"}) {
    fs::path file = dump.step_dir() / (std::string(stage) + ".mlir");
    INFO(file.string());
    REQUIRE(fs::exists(file));
    std::string text = dump.read(stage);
    if (std::string(stage) == "1-nova") CHECK(text.find("nova.softmax") != std::string::npos);
    if (std::string(stage) == "5-kernels") {
      CHECK(text.find("nova.launch @kernels::") != std::string::npos);
      CHECK(text.find("#nova.lowering_config<") != std::string::npos);
    }
    if (std::string(stage) == "7-llvm") CHECK(text.find("llvm.func @nova_k") != std::string::npos);
  }
}

TEST_CASE("nova::named_scope names the ops it covers, through autodiff, in each kernel's class") {
  DumpScope dump("nova-scope-");
  nova::Tensor x = nova::Tensor::randn({64, 32}, 2);
  nova::jit([](auto x) {
    nova::Expr<> y = [&] {
      nova::named_scope outer("outer");
      nova::named_scope inner("optimizer");
      return nova::Expr<>(nova::exp(x) * 2.0);
    }();
    nova::Expr<> loss = nova::sum(y * y + x);  // outside any scope
    return std::make_tuple(loss, nova::gradients(loss, {x})[0]);
  })(x);
  dump.restore();
  std::string nova_ir = dump.read("1-nova"), kernels = dump.read("5-kernels");
  // Nested scopes join with '/'; ops outside keep their plain locations.
  CHECK(nova_ir.find("loc(\"outer/optimizer\"") != std::string::npos);
  // A kernel computing the scoped ops (forward or their gradient) is
  // classed by the scope and names it; the unscoped sum is a row kernel.
  CHECK(kernels.find("nova.summary = \"optimizer: ") != std::string::npos);
  CHECK(kernels.find("[outer/optimizer]\"") != std::string::npos);
  CHECK(kernels.find("nova.summary = \"row kernels: ") != std::string::npos);
}
