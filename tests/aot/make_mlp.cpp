// make_mlp.cpp - an ahead-of-time generator, as a user writes one.
//
//   make_mlp OUT.nexe DATA_DIR
//
// Compiles an MLP forward step for fixed shapes into OUT.nexe (for
// NOVA_TARGET, set by nova_aot_compile), and writes DATA_DIR/inputs.safetensors
// (in0..in4, seeded) and DATA_DIR/expected.safetensors (out0, the JIT's result
// on them) for `nova-run --expect` to check the artifact against.
#include <nova/aot.hpp>
#include <nova/nova.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_mlp OUT.nexe DATA_DIR\n");
    return 2;
  }
  auto mlp = nova::jit([](auto x, auto w1, auto b1, auto w2, auto b2) {
    return nova::matmul(nova::gelu(nova::matmul(x, w1) + b1), w2) + b2;
  });
  std::uint64_t seed = 20261201;
  std::printf("make_mlp: seed %llu\n", (unsigned long long)seed);
  nova::Tensor x = nova::Tensor::randn({64, 96}, seed), w1 = nova::Tensor::randn({96, 128}, seed + 1, nova::DType::f32, 0.1),
               b1 = nova::Tensor::randn({128}, seed + 2), w2 = nova::Tensor::randn({128, 10}, seed + 3, nova::DType::f32, 0.1),
               b2 = nova::Tensor::randn({10}, seed + 4);
  auto exe = mlp.executable(x, w1, b1, w2, b2);
  nova::aot::save(*exe, argv[1]);
  std::filesystem::create_directories(argv[2]);
  std::string dir = argv[2];
  nova::save_safetensors(dir + "/inputs.safetensors", {{"in0", x}, {"in1", w1}, {"in2", b1}, {"in3", w2}, {"in4", b2}});
  // The reference: the same step, run through the JIT in this process.
  nova::Tensor y = mlp(x, w1, b1, w2, b2);
  nova::save_safetensors(dir + "/expected.safetensors", {{"out0", y}});
  std::printf("make_mlp: wrote %s for %s (%zu kernels)\n", argv[1], exe->description()->target.describe().c_str(),
              exe->description()->kernels.size());
  return 0;
}
