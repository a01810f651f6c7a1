#!/bin/sh
# gpt_data_parallel.sh GPT_TRAIN COMPARE WORKDIR - the GPT example under
# mpirun: 2 ranks follow one process on the same global batch (loss curve
# and final parameters, float32 bounds), only rank 0 writes, and a run
# stopped on 2 ranks resumes on 1.
set -eu
bin=$1 compare=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir"
mpirun="timeout 600 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x NOVA_CACHE_DIR"
export NOVA_NUM_THREADS=1
"$bin" --short --steps 6 --eval-every 1000 --out "$dir/one" > "$dir/one.log"
$mpirun -x NOVA_NUM_THREADS -np 2 "$bin" --short --steps 6 --eval-every 1000 --out "$dir/two" > "$dir/two.log" 2>&1 || {
  echo "FAIL: 2 ranks exited $?"; cat "$dir/two.log"; exit 1; }
grep -q "data parallel: 2 ranks, 4 sequences each" "$dir/two.log" || { echo "FAIL: not data parallel"; cat "$dir/two.log"; exit 1; }
[ "$(grep -c "training step" "$dir/two.log")" -eq 1 ] || { echo "FAIL: more than rank 0 printed"; exit 1; }

# Loss curves: column 2 of loss.csv, relative 1e-5.
python3 - "$dir/one/loss.csv" "$dir/two/loss.csv" <<'PY'
import sys
a = [float(l.split(",")[1]) for l in open(sys.argv[1]).read().split("\n")[1:] if l]
b = [float(l.split(",")[1]) for l in open(sys.argv[2]).read().split("\n")[1:] if l]
assert len(a) == len(b) == 6, (a, b)
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print("loss curves, 1 rank vs 2: worst relative difference %.3e" % worst)
sys.exit(0 if worst <= 1e-5 else 1)
PY
"$compare" compare "$dir/two/ckpt.safetensors" "$dir/one/ckpt.safetensors" 1e-4

# Stopped on 2 ranks at step 3, resumed on 1: the same run.
$mpirun -x NOVA_NUM_THREADS -np 2 "$bin" --short --steps 6 --stop-at 3 --eval-every 1000 --out "$dir/switch" > "$dir/switch.log" 2>&1 || {
  echo "FAIL: 2 ranks with --stop-at exited $?"; cat "$dir/switch.log"; exit 1; }
"$bin" --short --steps 6 --eval-every 1000 --out "$dir/switch" --resume "$dir/switch/ckpt.safetensors" > "$dir/resume.log"
"$compare" compare "$dir/switch/ckpt.safetensors" "$dir/one/ckpt.safetensors" 1e-4
echo "ok: 2 ranks follow 1 process; a 2-rank checkpoint resumes on 1 rank"
