#!/usr/bin/env bash
# gpt_fits.sh - the deepest GPT whose training step fits a memory budget,
# Nova against the PyTorch with the smallest step memory here (1.13 from
# Debian, eager; torch.compile is close to it and takes minutes per depth),
# in one run.
#
#   bench/gpt_fits.sh [BUDGET_MIB] [LAYERS...]
#
# The medium GPT (d 512, context 256, batch 8) with more and more layers
# (default 8 12 16 24 32). A step fits when its step memory (peak RSS
# minus RSS once parameters and batch exist, as in gpt_step; Nova's
# includes its compile, and on both sides the AdamW state) is at most
# BUDGET_MIB (default 600). Nova compiles with an arena budget of BUDGET_MIB
# less its AdamW state and 16 MiB (NOVA_BENCH_STEP_BUDGET_MIB: gpt_step.cpp),
# so it recomputes more where the plan would not fit; PyTorch runs as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${NOVA_BUILD:-$here/../build}
budget=${1:-600}
shift || true
layers=${*:-8 12 16 24 32}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
. "$here/peer_env.sh"
peer_setup debian
field() { echo "$1" | sed -n "s/.*$2=\([-0-9.]*\).*/\1/p"; }
fits() { awk -v m="$1" -v b="$budget" 'BEGIN { exit !(m != "" && m <= b) }'; }

echo "== budget ${budget} MiB of step memory, medium GPT, layers: $layers"
nova_best=0 torch_best=0
for L in $layers; do
  n=$(NOVA_BENCH_LAYERS=$L NOVA_BENCH_STEP_BUDGET_MIB=$budget NOVA_CACHE_DIR="$scratch/cache" \
      "$build/bench/gpt_step" medium 2 2>&1 | grep '^RESULT' || true)
  tout=$(NOVA_BENCH_LAYERS=$L run_debian "$here/gpt_step_peer.py" medium 2 eager 2>/dev/null || true)
  # What the peer loaded (BLAS, kernel set, threads, allocator), once.
  [ "$L" = "${layers%% *}" ] && echo "$tout" | grep '^peer:' | sed 's/^/  torch 1.13 /'
  t=$(echo "$tout" | grep '^RESULT' || true)
  nm=$(field "$n" step_mib) tm=$(field "$t" step_mib)
  printf "  %2d layers: nova step memory %8s MiB (%s tok/s), torch 1.13 eager %8s MiB (%s tok/s)\n" \
    "$L" "${nm:-none}" "$(field "$n" tokens_per_s)" "${tm:-none}" "$(field "$t" tokens_per_s)"
  fits "$nm" && nova_best=$L
  fits "$tm" && torch_best=$L
done
echo "  => deepest that fits ${budget} MiB: nova ${nova_best} layers, torch 1.13 eager ${torch_best} layers"
