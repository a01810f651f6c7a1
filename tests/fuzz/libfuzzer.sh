#!/usr/bin/env bash
# libfuzzer.sh - the readers under libFuzzer: coverage-guided, ASan + UBSan.
#
#   tests/fuzz/libfuzzer.sh OUT_DIR [SECONDS]
#
# Builds tests/fuzz/reader_fuzz.cpp (-DNOVA_LIBFUZZER) and the runtime's
# sources with Debian's clang (-fsanitize=fuzzer,address,undefined; clang 14
# gets std::source_location from clang14_source_location.hpp) into OUT_DIR,
# then runs each reader SECONDS seconds (default 20) from its corpus in
# tests/fuzz/corpus (new inputs go to OUT_DIR/corpus-READER, findings to
# OUT_DIR/crash-*). Writes OUT_DIR/libfuzzer-READER.json (runs, coverage,
# corpus size) for reliability.json. Fails on any finding.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
seconds=${2:-20}
cxx=${NOVA_FUZZ_CXX:-clang++}

flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=all -include "$src/tests/fuzz/clang14_source_location.hpp"
       -I"$src/include" -I"$src/src/runtime" -DNOVA_LIBFUZZER)
mkdir -p "$out/obj"
# Library sources get coverage without libFuzzer's main; one compile per core.
ls "$src"/src/runtime/*.cpp | xargs -P "$(nproc)" -I{} sh -c \
  'f={}; exec "$0" "$@" -fsanitize=fuzzer-no-link -c "$f" -o "'"$out"'/obj/$(basename "$f" .cpp).o"' \
  "$cxx" "${flags[@]}"
"$cxx" "${flags[@]}" -fsanitize=fuzzer "$src/tests/fuzz/reader_fuzz.cpp" "$out"/obj/*.o \
  -lxxhash -lpthread -ldl -o "$out/reader_libfuzzer"

status=0
for reader in safetensors tokens executable; do
  mkdir -p "$out/corpus-$reader"
  log="$out/libfuzzer-$reader.log"
  echo "== libFuzzer: $reader, ${seconds}s"
  if NOVA_FUZZ_READER=$reader ASAN_OPTIONS=detect_leaks=1 "$out/reader_libfuzzer" \
       -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$out/crash-$reader-" \
       "$out/corpus-$reader" "$src/tests/fuzz/corpus/$reader" >"$log" 2>&1; then
    failed=0
  else
    failed=1; status=1
    tail -40 "$log"
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  corpus=$(ls "$out/corpus-$reader" | wc -l)
  printf '{"reader": "%s", "engine": "libFuzzer (%s), ASan + UBSan", "seconds": %s, "runs": %s, "edges_covered": %s, "new_corpus_inputs": %s, "findings": %s}\n' \
    "$reader" "$("$cxx" --version | head -1)" "$seconds" "${runs:-0}" "${cov:-0}" "$corpus" "$failed" \
    >"$out/libfuzzer-$reader.json"
  cat "$out/libfuzzer-$reader.json"
done
rm -f /tmp/nova-reader-fuzz-*
exit $status
