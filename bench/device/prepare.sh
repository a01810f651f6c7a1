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
# bf16 and tf32 take the TMA + wgmma kernel, tf32 NN's rhs transposed in
# shared memory first since 2026-12-05 (mma.sync before);
# ":mma" keeps mma.sync for the comparison), transposed operands, an edge
# shape, the GPT's layer products (tokens x features), and two weight
# gradients over many tokens that the configurator splits across K (tf32
# mma.sync: 16 and 4 parts; bf16 wgmma: 8 and 4; the launcher sums the
# parts). Then variants (CASE@BMxBN/WMxWN:
# only that block and warp tile) measured beside the configurator's
# choices: mma.sync in 256x128 blocks of eight 64x64 warps (one an SM: the
# choice before 128x128 blocks two an SM measured faster) and 128x256, and
# 128x128 of eight 64x32 warps; the GPT's TN weight gradient (72 tiles of
# 128x256 on 132 SMs) in smaller wgmma tiles.
# Since 192-column wgmma tiles became candidates, the TN one takes 128x192
# (96 tiles); 128x256 (the choice before) is measured beside it, and the
# NT 8192x768x3072 (192 tiles of 128x256 in 2 waves, 73% full) in 128x192
# (256 tiles, 97%), which the model ranks slower by its L2 term.
# Last, f32 products at f32's accuracy as 3xtf32 (square, and the GPT's
# layer products as the medium f32 step runs them: TMA + wgmma, each slab
# converted in shared memory; ":mma" the mma.sync kernel that splits in
# registers), against cuBLAS's f32 product.
# Since wgmma kernels of more tiles than the SMs hold at once became
# persistent (a block an SM looping over the tiles, its producer loading the
# next tile during the epilogue), ":flat" keeps a block a tile for the
# comparison: bf16 at 4096 and the GPT's short-K product, 3xtf32 the same;
# and ":pingpong", the persistent kernel whose two consumer warpgroups take
# 64-row tiles in turn (one's epilogue beside the other's wgmmas), which
# the configurator does not choose itself (its model has no epilogue term).
# Since the wgmma kernels with two consumer warpgroups hand the producer's
# registers to the consumers by setmaxnreg (232 a consumer thread instead
# of 168), ":evenregs" keeps the even share (the kernels measured before):
# bf16 NN at 4096 (the same tile), tf32 NN at 4096 (128x192 there, 128x256
# with setmaxnreg) and the medium step's 3xtf32 NN product.
# ":cluster": the persistent wgmma kernel in clusters of 2 CTAs along M,
# each loading half of the B tile they share and multicasting it (B read
# from L2 once a cluster), launched with cuLaunchKernelEx's cluster
# attribute; the configurator does not choose it itself yet. And
# ":pingpong+cluster" both (64-row ping-pong tiles read each B slab twice
# as often as 128-row ones; the cluster halves that back) for the GPT's
# short-K product, whose epilogue ping-pong hides.
# ":probeshared" and ":probemma" (beside the mma.sync kernels at 4096): that
# kernel without its global loads (the prologue's slabs read over and
# over: ldmatrix, MMAs and a barrier a slab), and without any loads (the
# MMAs alone, on one k step's fragments): probes, not products (matmul_check
# marks them "probe"), whose times bound what mma.sync can reach here.
# ":interleave": that kernel with each slab's refill issued a share at each
# k step, after its fragment loads (CUTLASS's multistage order), instead of
# all before the slab's first ldmatrix; the configurator does not choose it.
# ":bf16out": the configurator's kernel writing C in bf16 (rounded in its
# epilogue, as a step's bf16 copy of a product is), as cuBLAS writes the
# bf16 product it is timed against: the same bytes out on both sides.
# ":wgmmaprobe": the wgmma kernel, a block a tile (beside ":flat"), loading
# only each block's first stages and multiplying them over and over: what
# the wgmma mainloop reaches without global loads (a probe, as above).
"$build/bin/nova-gpu-kernels" "$target" bench/device/artifacts \
  tf32:NN:1024x1024x1024 tf32:NN:2048x2048x2048 tf32:NN:4096x4096x4096 tf32:NN:8192x8192x8192 \
  tf32:NT:1024x1024x1024 tf32:NT:2048x2048x2048 tf32:NT:4096x4096x4096 tf32:NT:8192x8192x8192 \
  bf16:NN:1024x1024x1024 bf16:NN:2048x2048x2048 bf16:NN:4096x4096x4096 bf16:NN:8192x8192x8192 \
  bf16:NN:4096x4096x4096:mma tf32:NT:4096x4096x4096:mma tf32:NN:4096x4096x4096:mma \
  bf16:NN:4096x4096x4096:probeshared bf16:NN:4096x4096x4096:probemma \
  tf32:NT:4096x4096x4096:probeshared tf32:NT:4096x4096x4096:probemma \
  bf16:NN:4096x4096x4096:interleave tf32:NT:4096x4096x4096:interleave \
  bf16:NN:4096x4096x4096:bf16out bf16:NN:8192x8192x8192:bf16out bf16:NN:8192x3072x768:bf16out \
  bf16:NT:8192x768x3072:bf16out bf16:TN:768x3072x8192:bf16out \
  bf16:NN:4096x4096x4096:wgmmaprobe tf32:NT:4096x4096x4096:wgmmaprobe tf32:NT:4096x4096x4096:flat \
  bf16:NT:4096x4096x4096 bf16:TN:4096x4096x4096 f16:NN:4096x4096x4096 bf16:NN:1000x1000x1000 \
  bf16:NN:8192x3072x768 bf16:NT:8192x768x3072 bf16:TN:768x3072x8192 \
  tf32:TN:256x256x16384 tf32:TN:1024x1024x16384 bf16:TN:256x256x16384 bf16:TN:1024x1024x16384 \
  tf32:NN:4096x4096x4096:mma@256x128/64x64 tf32:NN:4096x4096x4096:mma@128x256/64x64 \
  bf16:NN:4096x4096x4096:mma@256x128/64x64 bf16:NN:4096x4096x4096:mma@128x256/64x64 \
  bf16:NN:4096x4096x4096:mma@128x128/64x32 tf32:NT:4096x4096x4096:mma@256x128/64x64 \
  bf16:TN:768x3072x8192@128x128/64x128 bf16:TN:768x3072x8192@64x128/64x128 \
  bf16:TN:768x3072x8192@128x256/64x256 bf16:NT:8192x768x3072@128x192/64x192 \
  3xtf32:NN:4096x4096x4096 3xtf32:NT:4096x4096x4096 3xtf32:NN:4096x4096x4096:mma \
  3xtf32:NN:8192x3072x768 3xtf32:NT:8192x768x3072 3xtf32:TN:768x3072x8192 \
  3xtf32:NN:2048x2048x512 3xtf32:TN:512x2048x2048 3xtf32:NN:2048x2048x512:mma \
  bf16:NN:4096x4096x4096:flat bf16:NN:8192x3072x768:flat 3xtf32:NN:8192x3072x768:flat \
  bf16:NN:4096x4096x4096:pingpong bf16:NN:8192x3072x768:pingpong 3xtf32:NN:8192x3072x768:pingpong \
  bf16:NN:4096x4096x4096:evenregs tf32:NN:4096x4096x4096:evenregs 3xtf32:NN:8192x3072x768:evenregs \
  bf16:NN:4096x4096x4096:cluster bf16:NT:4096x4096x4096:cluster tf32:NT:4096x4096x4096:cluster \
  bf16:NN:8192x3072x768:cluster bf16:NN:8192x3072x768:pingpong+cluster 3xtf32:NN:8192x3072x768:pingpong+cluster
# Each kernel's cubin too, where ptxas is here, as a step carries its own
# (matmul_check.py loads it first, the PTX where the driver refuses it).
ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
if [ -x "$ptxas" ]; then
  for ptx in bench/device/artifacts/*.ptx; do
    "$ptxas" -O3 -arch="$target" "$ptx" -o "${ptx%.ptx}.cubin"
  done
fi
# The GPT training steps (make_steps: small and medium, f32 and bf16-allowed
# matmuls; the medium bf16 one also with its wgmma matmuls in clusters of
# 2, NOVA_GPU_CLUSTER=2) and run_steps with the libraries it needs there (the runtime,
# xxhash, the C++ library it was built with).
cmake --build "$build" --target make_steps run_steps >/dev/null
# Where ptxas is here every step must carry its cubin: a step whose PTX
# ptxas refused (e.g. a kernel over 4352 bytes of parameters) would fail
# the same way in the device's driver.
require_cubin=0
[ -x "$ptxas" ] && require_cubin=1
NOVA_CACHE=off NOVA_TARGET="$target" NOVA_REQUIRE_CUBIN=$require_cubin "$build/bench/make_steps" \
  bench/device/artifacts/steps
mkdir -p bench/device/artifacts/bin bench/device/artifacts/lib
cp "$build/bench/run_steps" bench/device/artifacts/bin/
ldd "$build/bench/run_steps" | awk '/libnova_runtime|libxxhash|libstdc\+\+|libgcc_s/ {print $3}' |
  xargs -I{} cp {} bench/device/artifacts/lib/
echo "bench/device/artifacts: $(du -sh bench/device/artifacts | cut -f1) for $target"
# The steps' load path as check.sh takes it (the cubin, each kernel's
# function, tensor maps, the graph capture, NCCL for dp1) through the tests'
# fake driver, which runs none of the real kernels: every step must load
# and launch here (exit 1 = losses that differ, expected), or the device's
# minutes would go on a failure this machine can see.
fake="$build/tests/libnova_fake_cuda.so"
if [ -f "$fake" ]; then
  rc=0
  NOVA_CUDA_DRIVER="$fake" NOVA_NCCL_LIBRARY="$fake" LD_LIBRARY_PATH=bench/device/artifacts/lib \
    bench/device/artifacts/bin/run_steps bench/device/artifacts/steps 1 >/tmp/nova-prepare-smoke.txt 2>&1 || rc=$?
  loaded=$(grep -c '^RESULT nova' /tmp/nova-prepare-smoke.txt || true)
  steps=$(ls bench/device/artifacts/steps/*.nexe | wc -l)
  if [ "$rc" -gt 1 ] || [ "$loaded" != "$steps" ]; then
    cat /tmp/nova-prepare-smoke.txt
    echo "prepare.sh: only $loaded of $steps steps loaded and launched through the fake CUDA driver"
    exit 1
  fi
  echo "the $steps steps load and launch through the fake CUDA driver ($fake)"
  # steps_check.py's profiled runs (NOVA_PROFILE: timing events, no graph),
  # a process a step as there (run_steps zeroes the profile after its
  # checked step).
  rc=0
  : >/tmp/nova-prepare-profile.txt
  for nexe in bench/device/artifacts/steps/*.nexe; do
    NOVA_PROFILE=5 NOVA_CUDA_DRIVER="$fake" NOVA_NCCL_LIBRARY="$fake" LD_LIBRARY_PATH=bench/device/artifacts/lib \
      bench/device/artifacts/bin/run_steps bench/device/artifacts/steps 1 "$(basename "$nexe" .nexe)" \
      >>/tmp/nova-prepare-profile.txt 2>&1 || { r=$?; [ "$r" -gt "$rc" ] && rc=$r; }
  done
  profiled=$(grep -c '^nova profile: executable' /tmp/nova-prepare-profile.txt || true)
  if [ "$rc" -gt 1 ] || [ "$profiled" != "$steps" ]; then
    cat /tmp/nova-prepare-profile.txt
    echo "prepare.sh: $profiled of $steps steps profiled (NOVA_PROFILE) through the fake CUDA driver"
    exit 1
  fi
  echo "the $steps steps profile kernel by kernel through the fake CUDA driver"
fi
# What the artifacts were built from, for check.sh to print beside its
# table (a table measured on stale artifacts says so).
{
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "prepared $(date -u +%Y-%m-%dT%H:%M:%SZ) for $target by $build"
} > bench/device/artifacts/PREPARED
cat bench/device/artifacts/PREPARED
