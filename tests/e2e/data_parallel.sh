#!/bin/sh
# data_parallel.sh BIN WORKDIR - data-parallel training across MPI processes.
#  1. 2 and 4 ranks (compiled) and 2 ranks (interpreted) end 3 steps with the
#     parameters one process reaches on the whole batch (float64: 1e-10),
#     every rank with the same bits; the 2-rank run is repeated 3 times and
#     never hangs (each run is bounded by `timeout`).
#  2. A rank that hangs makes the other fail with a DistError within
#     NOVA_DIST_TIMEOUT_S; a rank that dies ends the run in bounded time.
set -eu
bin=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
mpirun="timeout 300 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x NOVA_NUM_THREADS=1 -x NOVA_CACHE_DIR"
NOVA_NUM_THREADS=1 "$bin" whole "$dir/whole.safetensors" 3 > /dev/null

check_ranks() { # N NAME [interpret]
  n=$1 name=$2
  $mpirun -np "$n" "$bin" ranks "$dir/$name" 3 ${3:-} > "$dir/$name.log" 2>&1 || {
    echo "FAIL: $n ranks ($name) exited $?"; cat "$dir/$name.log"; exit 1; }
  "$bin" compare "$dir/$name.rank0" "$dir/whole.safetensors" 1e-10
  r=1
  while [ "$r" -lt "$n" ]; do
    cmp "$dir/$name.rank0" "$dir/$name.rank$r" || { echo "FAIL: rank $r's parameters differ from rank 0's"; exit 1; }
    r=$((r + 1))
  done
}
for run in 1 2 3; do check_ranks 2 two-$run; done
check_ranks 4 four
check_ranks 2 interpreted interpret

# run_failing MODE TIMEOUT: 2 ranks, rank 1 misbehaving; sets rc and took.
run_failing() {
  start=$(date +%s)
  set +e
  NOVA_DIST_TIMEOUT_S=$2 $mpirun -x NOVA_DIST_TIMEOUT_S -np 2 "$bin" "$1" "$dir/$1" 3 > "$dir/$1.log" 2>&1
  rc=$?
  set -e
  took=$(( $(date +%s) - start ))
}
# A hung rank: rank 0 fails with the collective named, in about 3 s.
run_failing hang 3
hung_took=$took
if [ "$rc" -eq 0 ] || ! grep -q "not every rank took part within 3" "$dir/hang.log" || [ "$took" -gt 60 ]; then
  echo "FAIL: a hung rank gave exit $rc after $took s:"; cat "$dir/hang.log"; exit 1
fi
# A dead rank: the run ends (mpirun ends the survivors), not hangs.
run_failing die 10
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$took" -gt 60 ]; then
  echo "FAIL: a dead rank gave exit $rc after $took s:"; cat "$dir/die.log"; exit 1
fi
echo "ok: 2 ranks (3 runs), 4 ranks and 2 interpreted ranks equal one process on the whole batch;"
echo "    a hung rank failed the other in $hung_took s or less: $(grep -m1 "not every rank" "$dir/hang.log" | head -c 160)"
