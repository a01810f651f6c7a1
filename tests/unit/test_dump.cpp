// test_dump.cpp - NOVA_DUMP_IR=<dir> writes the IR after every stage.
#include "testing.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

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
