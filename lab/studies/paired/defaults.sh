#!/bin/bash
# Which intra-op threads and OpenMP wait policy the default run should use (docs/method.md#a-machine-unfit-to-measure):
# forward, backward and train_step paired in both languages under each setting, on the machine as it is ("quiet")
# and beside BUSY processes that each spin on a core ("loaded"), settings interleaved, ROUNDS rounds each.
# OUT: the folder for the saved runs and their logs; each run's load average before and after is in its .time file.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:?a folder for the runs}; REPEATS=${REPEATS:-2}; BUSY=${BUSY:-2}
mkdir -p "$OUT"
run() {  # NAME [env's arguments ...] -- [PYTEST OPTIONS ...]
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local start; start=$(date +%s.%N)
  echo "before: $(cat /proc/loadavg)" > "$OUT/$name.time"
  env "${envs[@]}" .venv/bin/python -m pytest -p no:cacheprovider bench/test_phases.py --benchmark-only --device cpu \
    -k "test_phase and (forward or backward or train_step)" --benchmark-json="$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "after: $(cat /proc/loadavg); $(echo "$(date +%s.%N) - $start" | bc) s" >> "$OUT/$name.time"
}
settings() {  # STATE REPEAT
  run "$1-default-$2" -u OMP_WAIT_POLICY -- --threads 2
  run "$1-passive-$2" OMP_WAIT_POLICY=PASSIVE -- --threads 2
  run "$1-threads1-$2" -u OMP_WAIT_POLICY -- --threads 1
}
for repeat in $(seq "$REPEATS"); do
  settings quiet "$repeat"
  pids=()
  for _ in $(seq "$BUSY"); do (while :; do :; done) & pids+=($!); done
  settings loaded "$repeat"
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
done
echo done > "$OUT/DONE"
