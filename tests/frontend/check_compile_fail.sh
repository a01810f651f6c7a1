#!/bin/sh
# check_compile_fail.sh CXX INCLUDE_DIR SOURCE
# SOURCE must fail to compile with the text of its "// EXPECT: " line in the
# compiler's output, and must compile with -DNOVA_TWIN.
set -u
cxx=$1 inc=$2 src=$3
expect=$(sed -n 's|^// EXPECT: ||p' "$src")
[ -n "$expect" ] || { echo "no EXPECT line in $src"; exit 1; }
out=$(mktemp)
if "$cxx" -std=c++20 -fsyntax-only -I"$inc" "$src" >"$out" 2>&1; then
  echo "FAIL: $src compiled but must not"; rm -f "$out"; exit 1
fi
if ! grep -qF -- "$expect" "$out"; then
  echo "FAIL: expected message not found: $expect"; cat "$out"; rm -f "$out"; exit 1
fi
if ! "$cxx" -std=c++20 -fsyntax-only -DNOVA_TWIN -I"$inc" "$src" >"$out" 2>&1; then
  echo "FAIL: the twin (-DNOVA_TWIN) of $src does not compile"; cat "$out"; rm -f "$out"; exit 1
fi
rm -f "$out"
echo "ok: $src"
