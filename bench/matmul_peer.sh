#!/usr/bin/env bash
# matmul_peer.sh [shape ...] - matmul GFLOP/s of Nova (bench/matmul_bench)
# beside the BLAS peers at their best, in one run, with ratios; fp32, or
# with NOVA_MATMUL_PRECISION=bf16 Nova's bf16 products beside torch's on
# bfloat16 tensors (oneDNN's implementation named as it reports it):
#   mkl       torch.matmul in PyTorch 2 from PyPI (MKL)
#   openblas  torch.matmul in Debian's PyTorch on OpenBLAS-on-OpenMP
#   numpy     numpy.matmul in Debian's numpy, same OpenBLAS set-up
# (bench/peer_env.sh makes and describes them). Shapes as matmul_bench takes
# them; none: its defaults (square 256..2048 and the small GPT's shapes).
# Also prints each against the machine's measured FMA peak.
# NOVA_BENCH_PEERS="mkl openblas numpy" picks peers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${NOVA_BUILD:-$here/../build}
peers=${NOVA_BENCH_PEERS:-mkl openblas numpy}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
. "$here/peer_env.sh"
peer_setup $([[ " $peers " == *" mkl "* ]] && echo torch2) $([[ " $peers " == *" openblas "* || " $peers " == *" numpy "* ]] && echo debian)

NOVA_CACHE_DIR="$scratch/cache" "$build/bench/matmul_bench" "$@" > "$scratch/nova" || { cat "$scratch/nova"; echo "matmul_bench failed"; exit 1; }
grep -v '^RESULT' "$scratch/nova" | sed 's/^/  /'
shapes=$(sed -n 's/^RESULT nova shape=\([^ ]*\) .*/\1/p' "$scratch/nova")
for p in $peers; do
  case "$p" in
    mkl) run_torch2 "$here/matmul_peer.py" torch $shapes ;;
    openblas) run_debian "$here/matmul_peer.py" torch $shapes ;;
    numpy) run_debian "$here/matmul_peer.py" numpy $shapes ;;
  esac > "$scratch/$p" 2>&1 || { echo "  $p: failed"; sed 's/^/    /' "$scratch/$p"; : > "$scratch/$p"; }
  grep '^peer' "$scratch/$p" | sed "s/^/  [$p] /" || true
  # oneDNN's own word for what ran (bf16): "brg_matmul:avx512_core_bf16" ...
  grep '^onednn_verbose,primitive,exec' "$scratch/$p" | awk -F, '{print $5 " " $6}' | sort | uniq -c |
    sed "s/^ */  [$p] oneDNN ran: /" || true
done

# One table: shape, Nova, each peer, Nova / best peer, best peer's name.
awk -v peers="$peers" -v dir="$scratch" -v precision="${NOVA_MATMUL_PRECISION:-fp32}" '
  function field(line, key,   m) { return match(line, key "=[^ ]*") ? substr(line, RSTART + length(key) + 1, RLENGTH - length(key) - 1) : "" }
  BEGIN {
    n = split(peers, P, " ")
    while ((getline line < (dir "/nova")) > 0) {
      if (line ~ /^RESULT peak/) peak = field(line, "gflops")
      else if (line ~ /^RESULT nova/) { s = field(line, "shape"); order[++count] = s; nova[s] = field(line, "gflops") }
    }
    for (i = 1; i <= n; ++i)
      while ((getline line < (dir "/" P[i])) > 0)
        if (line ~ /^RESULT/) got[P[i], field(line, "shape")] = field(line, "gflops")
    printf "\n  GFLOP/s, %s; f32 FMA peak %s measured\n  %-20s %8s", precision, peak, "shape", "nova"
    for (i = 1; i <= n; ++i) printf " %8s", P[i]
    printf " %11s %10s\n", "nova/best", "nova/peak"
    for (c = 1; c <= count; ++c) {
      s = order[c]; best = 0; bname = "-"
      printf "  %-20s %8.1f", s, nova[s]
      for (i = 1; i <= n; ++i) {
        g = got[P[i], s]
        if (g == "") { printf " %8s", "-"; continue }
        printf " %8.1f", g
        if (g + 0 > best) { best = g + 0; bname = P[i] }
      }
      if (best > 0) printf " %6.2fx %-4s", nova[s] / best, bname; else printf " %11s", "-"
      printf " %9.1f%%\n", (peak > 0 ? 100 * nova[s] / peak : 0)
    }
  }'
