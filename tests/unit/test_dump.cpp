// test_dump.cpp - NOVA_DUMP_IR=<dir> writes the IR after every stage.
#include "testing.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

TEST_CASE("NOVA_DUMP_IR writes one file per pipeline stage") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("nova-dump-" + std::to_string(nova_test::fresh_seed()));
  ::setenv("NOVA_DUMP_IR", dir.c_str(), 1);
  // A disk hit would skip the codegen stages; restore the caller's setting after.
  const char* cache_was = std::getenv("NOVA_CACHE");
  std::string cache_value = cache_was ? cache_was : "";
  ::setenv("NOVA_CACHE", "off", 1);
  nova::Tensor x = nova::Tensor::randn({3, 2}, 1);
  // A step type of its own, so this test always compiles.
  nova::jit([](auto x) { return nova::softmax(x) * 3.0; })(x);
  ::unsetenv("NOVA_DUMP_IR");
  if (cache_was) ::setenv("NOVA_CACHE", cache_value.c_str(), 1);
  else ::unsetenv("NOVA_CACHE");
  for (const char* stage :
       {"1-nova", "2-graph", "3-linalg", "4-bufferized", "5-kernels", "6-loops", "7-llvm"}) {
    fs::path file = dir / (std::string(stage) + ".mlir");
    INFO(file.string());
    REQUIRE(fs::exists(file));
    std::stringstream text;
    text << std::ifstream(file).rdbuf();
    if (std::string(stage) == "1-nova") CHECK(text.str().find("nova.softmax") != std::string::npos);
    if (std::string(stage) == "5-kernels") {
      CHECK(text.str().find("nova.launch @kernels::") != std::string::npos);
      CHECK(text.str().find("#nova.lowering_config<") != std::string::npos);
    }
    if (std::string(stage) == "7-llvm") CHECK(text.str().find("llvm.func @nova_k") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("nova::named_scope names the ops it covers, through autodiff, in each kernel's class") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("nova-scope-" + std::to_string(nova_test::fresh_seed()));
  ::setenv("NOVA_DUMP_IR", dir.c_str(), 1);
  const char* cache_was = std::getenv("NOVA_CACHE");
  std::string cache_value = cache_was ? cache_was : "";
  ::setenv("NOVA_CACHE", "off", 1);
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
  ::unsetenv("NOVA_DUMP_IR");
  if (cache_was) ::setenv("NOVA_CACHE", cache_value.c_str(), 1);
  else ::unsetenv("NOVA_CACHE");
  std::stringstream nova_ir, kernels;
  nova_ir << std::ifstream(dir / "1-nova.mlir").rdbuf();
  kernels << std::ifstream(dir / "5-kernels.mlir").rdbuf();
  // Nested scopes join with '/'; ops outside keep their plain locations.
  CHECK(nova_ir.str().find("loc(\"outer/optimizer\"") != std::string::npos);
  // A kernel computing the scoped ops (forward or their gradient) is
  // classed by the scope and names it; the unscoped sum is a row kernel.
  CHECK(kernels.str().find("nova.summary = \"optimizer: ") != std::string::npos);
  CHECK(kernels.str().find("[outer/optimizer]\"") != std::string::npos);
  CHECK(kernels.str().find("nova.summary = \"row kernels: ") != std::string::npos);
  fs::remove_all(dir);
}
