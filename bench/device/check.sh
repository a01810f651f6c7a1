#!/bin/sh
# bench/device/check.sh - on the GPU machine (CUDA, PyTorch, cuBLAS; no LLVM,
# no MLIR, no network), with bench/device/artifacts carried from a machine
# that ran bench/device/prepare.sh. Prints one table, and writes it to
# $OUT/device_check.tsv when $OUT is set.
#
# Now: every generated matmul kernel (its sm_90a cubin, or its PTX where the
# driver refuses the cubin: TMA + wgmma where the configurator picks it,
# mma.sync otherwise and where the case says :mma) against a float64
# product (error bound per precision) and
# against cuBLAS through PyTorch (TFLOP/s, ratio); then the GPT training
# steps (steps_check.py: run_steps, the runtime only, one step checked
# against the CPU, then timed) against PyTorch eager on the same GPU
# (tokens/s, ratio), and a data-parallel small step with one rank (its
# gradient sum through NCCL). The bf16 steps' NT matmuls are wgmma kernels.
# Every matmul case and every step runs in a process of its own with a
# timeout (NOVA_CASE_TIMEOUT_S, default 60; NOVA_STEP_TIMEOUT_S, 120): one
# that hangs or faults is a HUNG / FAILED row and the rest still run; a step
# that faulted (and the first that hung) runs once more with NOVA_GPU_SYNC=5,
# which names the launch to blame. The steps' CUDA graphs launch their
# kernels as programmatic dependents (sm_90); each step is also timed with
# NOVA_GPU_PDL=0 (the steps table's last column: that time over the step's).
set -eu
cd "$(dirname "$0")"
[ -f artifacts/manifest.tsv ] || { echo "check.sh: no artifacts/manifest.tsv: run bench/device/prepare.sh where LLVM is, and carry bench/device/artifacts"; exit 2; }
cat artifacts/PREPARED 2>/dev/null || echo "artifacts of unknown origin (no artifacts/PREPARED)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader || true
# NOVA_CHECK_PARTS=matmul or =steps runs one half (two calls of the device
# tool where one call's minutes would not hold both); default both.
# NOVA_CHECK_ONLY=<regex> runs only the kernels and steps whose names it
# matches (Python's re.search), e.g. the issue's targets first where the
# device's minutes are few:
#   NOVA_CHECK_ONLY='_4096x4096x4096_(wgmma|mma)(_bf16out|_flat)?$|_4096x4096x4096_(mma|wgmma)_(probe|interleave)|^gpt_(small|medium)_(fp32|bf16)$'
# (bf16 NN / tf32 NT / tf32 NN wgmma and mma.sync at 4096, bf16 NN writing
# bf16 as cuBLAS does, the flat wgmma kernel, the probes and the mma.sync
# variant, the four GPT steps against PyTorch eager).
parts=${NOVA_CHECK_PARTS:-all}
case "$parts" in all|matmul|steps) ;; *) echo "check.sh: NOVA_CHECK_PARTS is all, matmul or steps, not '$parts'"; exit 2;; esac
status=0
if [ "$parts" != steps ]; then
  python3 matmul_check.py artifacts || status=$?
fi
if [ "$parts" != matmul ] && [ -d artifacts/steps ]; then
  python3 steps_check.py artifacts 20 || status=$?
fi
exit $status
