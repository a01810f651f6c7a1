#!/usr/bin/env bash
# gpt_step_peer.sh [steps] - Nova and PyTorch on the same GPT training step,
# both configs, side by side in one run, with ratios.
#
# The peer runs at its best: Debian's /usr/bin/python3 with python3-torch,
# OpenBLAS (libopenblas0-openmp), all cores, and OPENBLAS_CORETYPE /
# OPENBLAS_L2_SIZE unset for its run alone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${NOVA_BUILD:-$here/../build}
steps=${1:-5}
for config in small medium; do
  echo "== $config"
  nova=$("$build/bench/gpt_step" "$config" "$steps")
  echo "$nova" | grep -v '^RESULT'
  peer=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 "$here/gpt_step_peer.py" "$config" "$steps")
  echo "$peer" | grep -v '^RESULT'
  n_tps=$(echo "$nova" | sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')
  n_mem=$(echo "$nova" | sed -n 's/.*step_mib=\([-0-9.]*\).*/\1/p')
  t_tps=$(echo "$peer" | sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')
  t_mem=$(echo "$peer" | sed -n 's/.*step_mib=\([-0-9.]*\).*/\1/p')
  awk -v a="$n_tps" -v b="$t_tps" -v c="$n_mem" -v d="$t_mem" 'BEGIN {
    printf "  ratio tokens/s nova/torch: %.2fx (above 1: Nova faster)\n", a / b;
    printf "  ratio step memory nova/torch: %.2fx (below 1: Nova smaller)\n", c / d }'
done
