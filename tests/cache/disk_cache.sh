#!/bin/sh
# disk_cache.sh PROBE WORKDIR - the on-disk cache across processes.
#
#   1. A second process running the same step loads it: 0 compiles, 1 disk hit.
#   2. The stable key is equal in two processes and differs for two step
#      types of equal shapes.
#   3. Eight processes started together on an empty cache: one compiles, the
#      others load what it published; all eight compute the same result.
#   4. Compiling writes nothing outside the cache directory (TMPDIR and HOME
#      stay empty).
set -eu
probe=$1
work=$2
rm -rf "$work"
mkdir -p "$work/tmp" "$work/home"
export TMPDIR="$work/tmp" HOME="$work/home" NOVA_CACHE_DIR="$work/cache"
unset NOVA_CACHE XDG_CACHE_HOME || true
field() { echo "$1" | sed -n "s/.*$2=\([^ ]*\).*/\1/p"; }
fail() { echo "FAIL: $*"; exit 1; }

first=$("$probe" run)
second=$("$probe" run)
echo "first:  $first"
echo "second: $second"
[ "$(field "$first" compiles)" = 1 ] || fail "the first process did not compile"
[ "$(field "$second" compiles)" = 0 ] || fail "the second process compiled"
[ "$(field "$second" disk_hits)" = 1 ] || fail "the second process did not load from disk"
[ "$(field "$first" checksum)" = "$(field "$second" checksum)" ] || fail "results differ"

k1=$("$probe" keys)
k2=$("$probe" keys)
echo "keys: $k1 / $k2"
[ "$k1" = "$k2" ] || fail "stable keys differ between two processes"
set -- $k1
[ "$2" != "$3" ] || fail "two step types with equal shapes have one stable key"

rm -rf "$NOVA_CACHE_DIR"
i=0
while [ $i -lt 8 ]; do
  "$probe" run > "$work/racer.$i" 2>&1 &
  i=$((i + 1))
done
wait
compiles=0
i=0
while [ $i -lt 8 ]; do
  line=$(grep '^PROBE' "$work/racer.$i") || fail "racer $i: $(cat "$work/racer.$i")"
  [ "$(field "$line" checksum)" = "$(field "$first" checksum)" ] || fail "racer $i computed another result: $line"
  compiles=$((compiles + $(field "$line" compiles)))
  i=$((i + 1))
done
echo "8 racers: $compiles compile(s) in all"
[ "$compiles" = 1 ] || fail "8 processes on one key compiled $compiles times"
[ -z "$(ls -A "$work/tmp")" ] || fail "files left in TMPDIR: $(ls -A "$work/tmp")"
[ -z "$(ls -A "$work/home")" ] || fail "files left in HOME: $(ls -A "$work/home")"
echo "OK"
