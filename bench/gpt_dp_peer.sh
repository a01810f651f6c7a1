#!/usr/bin/env bash
# gpt_dp_peer.sh [steps] [configs] - the GPT training step data-parallel on
# 2 ranks of this machine against 1, Nova (MPI, gradients bucketed and
# summed inside the compiled step) beside PyTorch DDP (gloo; PyTorch 2 from
# PyPI, see peer_env.sh), the same model and global batch, side by side in
# one run, as ratios; and Nova's buckets against its backward's launches
# (how much of the communication the backward hides).
# NOVA_DIST_BUCKET_MB (Nova) and NOVA_BENCH_BUCKET_MB (DDP's bucket_cap_mb)
# default to 25, both sides' default.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${NOVA_BUILD:-$here/../build}
steps=${1:-5}
configs=${2:-small medium}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
. "$here/peer_env.sh"
peer_setup torch2
cores=$(nproc)
mpirun="mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x NOVA_CACHE_DIR"
[ -n "${NOVA_DIST_BUCKET_MB:-}" ] && mpirun="$mpirun -x NOVA_DIST_BUCKET_MB"
export NOVA_CACHE_DIR="$scratch/cache"
field() { echo "$1" | sed -n "s/.*$2=\([-0-9.]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", int(a / b * 1000) / 1000 }'; }
echo "== machine: $(lscpu | sed -n 's/^Model name: *//p'), $cores cores"

for config in $configs; do
  echo "== $config (global batch: small 16, medium 8 sequences; buckets: Nova ${NOVA_DIST_BUCKET_MB:-25} MiB, DDP ${NOVA_BENCH_BUCKET_MB:-25} MiB)"
  one=$(NOVA_NUM_THREADS=$cores "$build/bench/gpt_dp_step" "$config" "$steps")
  echo "$one" | grep -v '^RESULT' | sed 's/^/  /'
  two=$($mpirun -np 2 "$build/bench/gpt_dp_step" "$config" "$steps")
  echo "$two" | grep -v '^RESULT' | sed 's/^/  /'
  t_one=$(run_torch2 "$here/gpt_dp_peer.py" "$config" "$steps")
  echo "$t_one" | grep -v '^RESULT' | sed 's/^/  /'
  port=$((29500 + RANDOM % 1000))
  for r in 1 0; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      run_torch2 "$here/gpt_dp_peer.py" "$config" "$steps" > "$scratch/ddp.$r" 2>&1 &
  done
  wait
  t_two=$(cat "$scratch/ddp.0")
  echo "$t_two" | grep -v '^RESULT' | sed 's/^/  /'
  n1=$(field "$(echo "$one" | grep '^RESULT')" tokens_per_s)
  n2=$(field "$(echo "$two" | grep '^RESULT')" tokens_per_s)
  p1=$(field "$(echo "$t_one" | grep '^RESULT')" tokens_per_s)
  p2=$(field "$(echo "$t_two" | grep '^RESULT')" tokens_per_s)
  echo "  tokens/s, 2 ranks / 1: nova $(ratio "$n2" "$n1")x, torch DDP $(ratio "$p2" "$p1")x"
  echo "  nova / torch: 1 rank $(ratio "$n1" "$p1")x, 2 ranks $(ratio "$n2" "$p2")x"
done
