#!/usr/bin/env bash
# mlp_forward_peer.sh [B IN HIDDEN OUT] - Nova and PyTorch on the same MLP
# forward, one after the other in one run, and their ratio.
#
# The peer gets its best set-up: Debian's /usr/bin/python3 (which sees
# python3-torch), OpenBLAS with OpenMP (libopenblas0-openmp), all cores, and
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset for its run alone (these
# machines set them, which slows OpenBLAS).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${NOVA_BUILD:-$here/../build}
shape=("${@:-}")
[ -n "${shape[0]}" ] || shape=(256 784 512 10)

nova_out=$("$build/bench/mlp_forward_bench" "${shape[@]}")
echo "$nova_out"
nova_ms=$(echo "$nova_out" | awk '/compiled step, median/ {print $4}')
peer=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 "$here/mlp_forward_peer.py" "${shape[@]}")
torch_ms=$(echo "$peer" | awk '{print $2}')
echo "  pytorch ($peer)"
awk -v n="$nova_ms" -v t="$torch_ms" 'BEGIN { printf "  ratio nova/torch time: %.2fx (below 1 means Nova is faster)\n", n / t }'
