#!/bin/sh
# bench/device/prepare.sh - on this machine (LLVM/MLIR, no GPU): the PTX and
# launch manifest of the matmul kernels, and the training steps, that
# bench/device/check.sh needs, in bench/device/artifacts/.
#   bench/device/prepare.sh [BUILD_DIR] [TARGET]     (default build, sm_90a)
# Then, with a device lent: the `run` tool with carry ["bench/device/artifacts"]
# and the command `sh bench/device/check.sh`.
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build}
target=${2:-sm_90a}
cmake --build "$build" --target nova-gpu-kernels >/dev/null
rm -rf bench/device/artifacts
# Square TF32 and BF16 products at the sizes the issue names (on sm_90a
# bf16 and K-major tf32 (NT) take the TMA + wgmma kernel, tf32 NN mma.sync;
# ":mma" keeps mma.sync for the comparison), transposed operands, an edge
# shape, and the GPT's layer products (tokens x features).
"$build/bin/nova-gpu-kernels" "$target" bench/device/artifacts \
  tf32:NN:1024x1024x1024 tf32:NN:2048x2048x2048 tf32:NN:4096x4096x4096 tf32:NN:8192x8192x8192 \
  tf32:NT:1024x1024x1024 tf32:NT:2048x2048x2048 tf32:NT:4096x4096x4096 tf32:NT:8192x8192x8192 \
  bf16:NN:1024x1024x1024 bf16:NN:2048x2048x2048 bf16:NN:4096x4096x4096 bf16:NN:8192x8192x8192 \
  bf16:NN:4096x4096x4096:mma tf32:NT:4096x4096x4096:mma \
  bf16:NT:4096x4096x4096 bf16:TN:4096x4096x4096 f16:NN:4096x4096x4096 bf16:NN:1000x1000x1000 \
  bf16:NN:8192x3072x768 bf16:NT:8192x768x3072 bf16:TN:768x3072x8192
# The GPT training steps (make_steps: small and medium, f32 and bf16-allowed
# matmuls) and run_steps with the libraries it needs there (the runtime,
# xxhash, the C++ library it was built with).
cmake --build "$build" --target make_steps run_steps >/dev/null
NOVA_CACHE=off NOVA_TARGET="$target" "$build/bench/make_steps" bench/device/artifacts/steps
mkdir -p bench/device/artifacts/bin bench/device/artifacts/lib
cp "$build/bench/run_steps" bench/device/artifacts/bin/
ldd "$build/bench/run_steps" | awk '/libnova_runtime|libxxhash|libstdc\+\+|libgcc_s/ {print $3}' |
  xargs -I{} cp {} bench/device/artifacts/lib/
echo "bench/device/artifacts: $(du -sh bench/device/artifacts | cut -f1) for $target"
