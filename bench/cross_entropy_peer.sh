#!/usr/bin/env bash
# cross_entropy_peer.sh [tokens vocab ...] - Nova's fused cross-entropy (loss
# and gradient), the same math composed of the ops it replaced, and
# PyTorch's F.cross_entropy + backward on the same cases, one after the
# other in one run, and the ratios.
#
# The peer: Debian's torch (/usr/bin/python3) as peer_env.sh sets it up
# (tcmalloc, OpenBLAS on OpenMP, all cores: cross-entropy uses no BLAS);
# PyTorch 2 from PyPI where its virtual environment already exists
# (peer_env.sh; not made here: it is gigabytes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${NOVA_BUILD:-$here/../build}
. "$here/peer_env.sh"
peer_setup debian
nova_out=$("$build/bench/cross_entropy_bench" "$@")
echo "$nova_out"
peers=(debian)
[ -x "$venv/bin/python" ] && peers+=(torch2)
for p in "${peers[@]}"; do
  out=$(run_$p "$here/cross_entropy_peer.py" "$@")
  echo "# $p: $(echo "$out" | head -1)"
  # tokens vocab fused_ms from Nova's table, torch ms from the peer's lines.
  echo "$nova_out" | awk -v peer="$p" -v torch_lines="$(echo "$out" | grep '^RESULT')" '
    BEGIN { n = split(torch_lines, lines, "\n"); for (i = 1; i <= n; ++i) { split(lines[i], f, " "); t[f[3] " " f[4]] = f[5] } }
    $1 ~ /^[0-9]+$/ && ($1 " " $2) in t {
      printf "  %s %s x %s: nova fused %.3f ms, torch %.3f ms, nova/torch time %.3fx (below 1: Nova faster)\n",
             peer, $1, $2, $3, t[$1 " " $2], $3 / t[$1 " " $2] }'
done
