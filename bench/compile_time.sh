#!/usr/bin/env bash
# compile_time.sh [steps] - the GPT training step's first call, cold and warm,
# and its speed, side by side in one run.
#
# For each (config, layers): a fresh cache directory; process 1 traces and
# compiles (cold compile), process 2 traces and loads what process 1 stored
# (warm start). Both time the call from its start until the executable is
# ready (bench/compile_time.cpp); process 2 then runs `steps` steps.
# Targets (issue 7): cold < 2 s small, < 3 s medium, nearly flat in layers;
# warm < 100 ms.
#
# NOVA_BASELINE_BUILD=<dir>: a build of an earlier commit (its bench/gpt_step)
# run beside, for "before" numbers from the same machine in the same run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${NOVA_BUILD:-$here/../build}
steps=${1:-3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
field() { echo "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p"; }

printf "%-7s %6s %10s %10s %12s %9s %8s\n" config layers "cold s" "warm ms" "tokens/s" launches kernels
for c in "small 4" "medium 8" "small 2" "small 8" "small 16"; do
  set -- $c
  dir="$scratch/cache-$1-$2"
  cold=$(NOVA_CACHE_DIR="$dir" "$build/bench/compile_time" "$1" "$2" 0 | grep '^RESULT')
  s=0; [ "$1 $2" = "small 4" ] || [ "$1 $2" = "medium 8" ] && s=$steps
  warm=$(NOVA_CACHE_DIR="$dir" "$build/bench/compile_time" "$1" "$2" "$s" | grep '^RESULT')
  [ "$(field "$cold" compiled)" = 1 ] || echo "  (cold run did not compile: $cold)"
  [ "$(field "$warm" loaded)" = 1 ] || echo "  (warm run did not load from disk: $warm)"
  awk -v c="$1" -v l="$2" -v a="$(field "$cold" first_call_s)" -v b="$(field "$warm" first_call_s)" \
      -v t="$(field "$warm" tokens_per_s)" \
      -v n="$(field "$cold" launches)" -v k="$(field "$cold" kernels)" 'BEGIN {
    printf "%-7s %6s %10.2f %10.1f %12s %9s %8s\n", c, l, a, b * 1000, (t > 0 ? t : "-"), n, k }'
done
if [ -n "${NOVA_BASELINE_BUILD:-}" ]; then
  echo "== this build and the baseline ($NOVA_BASELINE_BUILD) on bench/gpt_step, cold:"
  echo "   first step = trace + compile + one run, in one process"
  first() { echo "$1" | sed -n 's/.*first step (compile+run) \([0-9.]*\) s.*/\1/p'; }
  for c in small medium; do
    now=$(NOVA_CACHE_DIR="$scratch/gpt-$c" "$build/bench/gpt_step" "$c" "$steps" | grep -v '^RESULT')
    old=$("$NOVA_BASELINE_BUILD/bench/gpt_step" "$c" "$steps" | grep -v '^RESULT')
    echo "  now:      $now"
    echo "  baseline: $old"
    awk -v a="$(first "$now")" -v b="$(first "$old")" \
        -v t="$(echo "$now" | sed -n 's/.* \([0-9]*\) tokens\/s.*/\1/p')" \
        -v u="$(echo "$old" | sed -n 's/.* \([0-9]*\) tokens\/s.*/\1/p')" \
        'BEGIN { printf "  %s: first step %.2fx faster, tokens/s %.2fx\n", "'$c'", b / a, t / u }'
  done
fi
