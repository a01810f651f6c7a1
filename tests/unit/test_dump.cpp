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
  nova::Tensor x = nova::Tensor::randn({3, 2}, 1);
  // A step type of its own, so this test always compiles.
  nova::jit([](auto x) { return nova::softmax(x) * 3.0; })(x);
  ::unsetenv("NOVA_DUMP_IR");
  for (const char* stage : {"1-nova", "2-graph", "3-linalg", "4-bufferized", "5-loops", "6-llvm"}) {
    fs::path file = dir / (std::string(stage) + ".mlir");
    INFO(file.string());
    REQUIRE(fs::exists(file));
    std::stringstream text;
    text << std::ifstream(file).rdbuf();
    if (std::string(stage) == "1-nova") CHECK(text.str().find("nova.softmax") != std::string::npos);
    if (std::string(stage) == "6-llvm") CHECK(text.str().find("llvm.func") != std::string::npos);
  }
  fs::remove_all(dir);
}
