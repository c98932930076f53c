#!/bin/bash
# How these runs were made (docs/gating.md#baselines-and-ci-gating): TREE is a clean clone of the measured commit
# with its venv; five interleaved pairs of runs per experiment, nothing else running on the machine.
#   lab/studies/gate-rounds-and-threads/run.sh TREE OUT_DIR
set -euo pipefail
tree=$(realpath "$1") out=$(realpath -m "$2")
mkdir -p "$out/threads" "$out/rounds"
cd "$tree"
one() {  # FILE OPTIONS...: one run of the compute phases and loss, saved as FILE
  local file=$1
  shift
  .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-only --device cpu \
    -k "test_phase and (forward or backward or train_step or loss)" --warmup-rounds 3 "$@" \
    --benchmark-json="$file" > "${file%.json}.log" 2>&1
  echo "$(basename "$file") load $(cut -d' ' -f1 /proc/loadavg)"
}
for i in 1 2 3 4 5; do
  one "$out/threads/t2-$i.json" --rounds 20 --threads 0   # torch's default here: 2
  one "$out/threads/t1-$i.json" --rounds 20 --threads 1
done
for i in 1 2 3 4 5; do
  one "$out/rounds/r20-$i.json" --rounds 20
  one "$out/rounds/r200-$i.json" --rounds 200
done
