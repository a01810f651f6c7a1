#!/bin/sh
# gpt_resume.sh GPT_TRAIN WORKDIR
# An interrupted and resumed run reproduces the uninterrupted run bit for
# bit (loss curve and final checkpoint); a truncated checkpoint is refused
# with a clear error and never crashes.
set -eu
bin=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
"$bin" --short --steps 8 --out "$dir/straight" > /dev/null
"$bin" --short --steps 8 --stop-at 4 --out "$dir/resumed" > /dev/null
"$bin" --short --steps 8 --out "$dir/resumed" --resume "$dir/resumed/ckpt.safetensors" > /dev/null
cut -d, -f1,2 "$dir/straight/loss.csv" > "$dir/a.txt"
cut -d, -f1,2 "$dir/resumed/loss.csv" > "$dir/b.txt"
if ! cmp -s "$dir/a.txt" "$dir/b.txt"; then
  echo "FAIL: the resumed loss curve differs"; diff "$dir/a.txt" "$dir/b.txt"; exit 1
fi
cmp "$dir/straight/ckpt.safetensors" "$dir/resumed/ckpt.safetensors" || { echo "FAIL: checkpoints differ"; exit 1; }

# A truncated checkpoint: a named error (exit 1), not a crash (exit > 128).
head -c 5000 "$dir/straight/ckpt.safetensors" > "$dir/broken.safetensors"
set +e
"$bin" --short --steps 8 --out "$dir/broken" --resume "$dir/broken.safetensors" > "$dir/err.txt" 2>&1
rc=$?
set -e
if [ "$rc" -ne 1 ] || ! grep -q "broken.safetensors" "$dir/err.txt"; then
  echo "FAIL: a truncated checkpoint gave exit $rc:"; cat "$dir/err.txt"; exit 1
fi
echo "ok: resume is exact; a truncated checkpoint is refused ($(head -c 120 "$dir/err.txt"))"
