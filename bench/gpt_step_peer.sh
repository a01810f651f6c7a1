#!/usr/bin/env bash
# gpt_step_peer.sh [steps] - Nova and PyTorch, each at its best, on the same
# GPT training step (forward + backward + AdamW, fp32), both configs, side
# by side in one run, with ratios against the best peer.
#
# Peers (each prints what it actually loaded: BLAS, kernel set, threads):
#   torch2-eager    PyTorch 2.x from PyPI (MKL) in a virtual environment this
#                   script creates ($NOVA_BENCH_VENV, default
#                   ~/.cache/nova-bench/torch2; pip install torch==$NOVA_BENCH_TORCH),
#                   AdamW(fused=True)
#   torch2-compile  the same with torch.compile (Inductor)
#   torch1-debian   Debian's python3-torch 1.13 on OpenBLAS-on-OpenMP
#                   (libopenblas0-openmp first on LD_LIBRARY_PATH), tcmalloc
#                   preloaded, OPENBLAS_CORETYPE = the best kernel set this CPU
#                   has (OpenBLAS 0.3.21 takes newer CPUs for "Prescott")
# Missing Debian packages are installed when possible (root or sudo).
# NOVA_BENCH_PEERS="torch2-eager torch2-compile torch1-debian" picks peers,
# NOVA_BENCH_CONFIGS="small medium" the configs; NOVA_BENCH_VOCAB=8192 gives
# both sides a word-piece vocabulary instead of bytes (256).
# NOVA_MATMUL_PRECISION=bf16 runs Nova's matmuls in bf16 and the peers under
# bf16 autocast; NOVA_ACTIVATION_PRECISION=bf16 also keeps Nova's products'
# outputs that the backward reads in bf16, as autocast keeps a linear
# layer's output (nova/precision.hpp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${NOVA_BUILD:-$here/../build}
steps=${1:-5}
peers=${NOVA_BENCH_PEERS:-torch2-eager torch2-compile torch1-debian}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
. "$here/peer_env.sh"
peer_setup $([[ " $peers " == *" torch2-"* ]] && echo torch2) $([[ " $peers " == *" torch1-debian "* ]] && echo debian)

run_peer() { # peer config -> output lines
  case "$1" in
    torch2-eager) run_torch2 "$here/gpt_step_peer.py" "$2" "$steps" eager ;;
    torch2-compile) run_torch2 "$here/gpt_step_peer.py" "$2" "$steps" compile 2>/dev/null ;;
    torch1-debian) run_debian "$here/gpt_step_peer.py" "$2" "$steps" eager ;;
  esac
}
field() { echo "$1" | sed -n "s/.*$2=\([-0-9.]*\).*/\1/p"; }

for config in ${NOVA_BENCH_CONFIGS:-small medium}; do
  echo "== $config"
  nova=$(NOVA_CACHE_DIR="$scratch/cache" "$build/bench/gpt_step" "$config" "$steps")
  echo "$nova" | grep -v '^RESULT' | sed 's/^/  /'
  n_tps=$(field "$(echo "$nova" | grep '^RESULT')" tokens_per_s)
  n_mem=$(field "$(echo "$nova" | grep '^RESULT')" step_mib)
  # The same step without rematerialization (NOVA_REMAT=0): what it costs and
  # saves. Under NOVA_MEMORY_BUDGET it may not compile (the budget needs the
  # recomputation): said, and the peers run.
  off=$(NOVA_REMAT=0 NOVA_CACHE_DIR="$scratch/cache" "$build/bench/gpt_step" "$config" "$steps" 2>/dev/null | grep '^RESULT' || true)
  [ -z "$off" ] && echo "  rematerialization off (NOVA_REMAT=0): no plan (over NOVA_MEMORY_BUDGET?)"
  [ -n "$off" ] && awk -v a="$n_tps" -v b="$(field "$off" tokens_per_s)" -v c="$n_mem" -v d="$(field "$off" step_mib)" \
      -v e="$(field "$(echo "$nova" | grep '^RESULT')" arena_mib)" -v f="$(field "$off" arena_mib)" 'function t(x) { return int(x * 1000) / 1000 } BEGIN {
    printf "  rematerialization on / off: tokens/s %.3fx, step memory %.3fx, planned arena %.1f / %.1f MiB\n", t(a / b), t(c / d), e, f }'
  # Only the cheap values recomputed, not the fused attention's output (NOVA_REMAT=cheap).
  cheap=$(NOVA_REMAT=cheap NOVA_CACHE_DIR="$scratch/cache" "$build/bench/gpt_step" "$config" "$steps" 2>/dev/null | grep '^RESULT' || true)
  [ -z "$cheap" ] && echo "  attention kept (NOVA_REMAT=cheap): no plan"
  [ -n "$cheap" ] && awk -v a="$n_tps" -v b="$(field "$cheap" tokens_per_s)" -v c="$n_mem" -v d="$(field "$cheap" step_mib)" \
      -v e="$(field "$(echo "$nova" | grep '^RESULT')" arena_mib)" -v f="$(field "$cheap" arena_mib)" 'function t(x) { return int(x * 1000) / 1000 } BEGIN {
    printf "  attention recomputed / kept (NOVA_REMAT=cheap): tokens/s %.3fx, step memory %.3fx, planned arena %.1f / %.1f MiB\n", t(a / b), t(c / d), e, f }'
  best_tps=0 best="" least_mem=0 least=""
  for p in $peers; do
    out=$(run_peer "$p" "$config") || { echo "  $p: failed"; continue; }
    echo "$out" | grep -E '^(peer|torch)' | sed "s/^/  [$p] /"
    t=$(field "$(echo "$out" | grep '^RESULT')" tokens_per_s)
    m=$(field "$(echo "$out" | grep '^RESULT')" step_mib)
    awk -v a="$n_tps" -v b="$t" -v c="$n_mem" -v d="$m" -v p="$p" 'function t(x) { return int(x * 1000) / 1000 } BEGIN {
      printf "  nova / %-15s tokens/s %.3fx   step memory %.3fx\n", p, t(a / b), t(c / d) }'
    if awk -v t="$t" -v b="$best_tps" 'BEGIN { exit !(t > b) }'; then best_tps=$t; best=$p; fi
    if [ -z "$least" ] || awk -v m="$m" -v l="$least_mem" 'BEGIN { exit !(m < l) }'; then least_mem=$m; least=$p; fi
  done
  [ -n "$best" ] && awk -v a="$n_tps" -v b="$best_tps" -v p="$best" 'function t(x) { return int(x * 1000) / 1000 } BEGIN {
    printf "  => nova / best peer (%s): %.3fx tokens/s (above 1: Nova faster)\n", p, t(a / b) }'
  [ -n "$least" ] && awk -v a="$n_mem" -v b="$least_mem" -v p="$least" 'function t(x) { return int(x * 1000) / 1000 } BEGIN {
    printf "  => nova / smallest peer step memory (%s): %.3fx (%.1f vs %.1f MiB; the target is 0.6x or less)\n", p, t(a / b), a, b }'
done
