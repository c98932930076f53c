#!/usr/bin/env bash
# The republished measurements (results/republish/README.md), one after another on a quiet machine, from a clean,
# committed tree: each result is written under $OUT and copied into results/republish/ afterwards.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/phasebench-republish}
mkdir -p "$OUT"
test -z "$(git status --porcelain)" || { echo "the tree is not clean" >&2; exit 1; }
py=.venv/bin/python
run() { local name=$1; shift; local start; start=$(date +%s)
  echo "== $name: $* ($(date +%T))"
  "$py" -m pytest -p no:cacheprovider --benchmark-json="$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1 || echo "$name exited $?"
  echo "$name: $(( $(date +%s) - start )) s" | tee -a "$OUT/times.txt"; }
"$py" -m phasebench.worker.build > /dev/null 2>&1  # built before the first clock
# The README's benchmark command, as before (the variants study's default-run.json, at commit ab71975).
run default-run --benchmark-only
# The suite's trainers against plain programs of their language: three interleaved pairs.
start=$(date +%s); "$py" -m phasebench.plain --pairs 3 --out "$OUT/plain-pairs.json" > "$OUT/plain-pairs.log" 2>&1
echo "plain-pairs: $(( $(date +%s) - start )) s" | tee -a "$OUT/times.txt"
# The data-loading split (design against language) and the batched pair, at the published workload.
run variants --benchmark-only --device cpu --impl python,python-tensor,cpp,python-batched,cpp-batched \
  -k "data_loading or train_step" --rounds 20 --warmup-rounds 2
# The first concurrent job of a run against the same job alone: two more runs of the jobs, three alone.
run jobs-2 --benchmark-only -k test_concurrent_jobs
run jobs-3 --benchmark-only -k test_concurrent_jobs
for i in 1 2 3; do run "job-alone-$i" --benchmark-only -k "test_concurrent_jobs and python-cpu-1"; done
# The published ten epochs, once per language.
run ten-epochs --benchmark-only --device cpu -k test_training_run --epochs 10 --run-rounds 1
