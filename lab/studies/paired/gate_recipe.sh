#!/bin/bash
# The ratio gate of docs/recipes.md's baseline recipe, N times on one clean tree: a baseline saved, then compared with
# it (--phase-ratio-fail=LIMIT) a run of the same code and a run with Python's forward slowed by SLOW (the tests' knob,
# tests/knobs.py), each run's exit status in its .rc file and its load average before and after in its .time file.
# EXTRA: options every run of the recipe adds (the recipe's --rounds, say), the same for baseline and compared runs.
#   TREE=<clean tree> OUT=<folder> N=10 SELECT="test_phase and forward" LIMIT=10 SLOW=20% EXTRA="--rounds 1000" \
#     lab/studies/paired/gate_recipe.sh
# then python -m lab.studies.paired.gate_verdicts --recipe OUT.
set -u
TREE=${TREE:?}; OUT=${OUT:?}; N=${N:-10}; SELECT=${SELECT:-test_phase and forward}; LIMIT=${LIMIT:-10}
SLOW=${SLOW:-20%}; read -r -a EXTRA <<< "${EXTRA:-}"
mkdir -p "$OUT"
run() {  # NAME ENV... -- OPTIONS...
  local name=$1 start; shift
  local env=()
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  start=$(date +%s.%N)
  echo "before: $(cat /proc/loadavg)" > "$OUT/$name.time"
  (cd "$TREE" && env PYTHONPATH="$TREE" "${env[@]}" .venv/bin/python -m pytest -p no:cacheprovider --benchmark-only \
    --device cpu -k "$SELECT" --benchmark-storage="file://$OUT/storage" --benchmark-json="$OUT/$name.json" "${EXTRA[@]}" "$@" \
    > "$OUT/$name.log" 2>&1; echo $? > "$OUT/$name.rc")
  echo "after: $(cat /proc/loadavg); $(echo "$(date +%s.%N) - $start" | bc) s" >> "$OUT/$name.time"
}
for i in $(seq -f %02g "$N"); do
  run "base-$i" -- --benchmark-save="base-$i"
  # The recipe's compare: the newest saved run (base-$i), both gates.
  compare=(--benchmark-compare --benchmark-compare-fail=median:30% "--phase-ratio-fail=$LIMIT%")
  run "unchanged-$i" -- "${compare[@]}"
  run "planted-$i" PYTEST_ADDOPTS=-ptests.knobs "PHASEBENCH_TEST_SLOW_PHASE=python/forward:$SLOW" -- "${compare[@]}"
done
echo done > "$OUT/DONE"
