#!/bin/bash
# Paired timing against the unpaired runs before it (issue: one answer, the same every run): default runs of two
# clean trees alternated (old, new, new, old, …), each with the same number of training-run rounds per language, each
# run's load average before and after in its .time file.
#   OLD=<clean tree of the unpaired commit> NEW=<clean tree of the paired one> OUT=<folder> N=<runs each> \
#     lab/studies/paired/before_after.sh
# Each tree needs .venv, its C++ library built (python -m phasebench.worker.build) and the data.
set -u
OLD=${OLD:?}; NEW=${NEW:?}; OUT=${OUT:?}; N=${N:-10}; PAIRS=${PAIRS:-6}
mkdir -p "$OUT"
run() {  # TREE NAME
  local start; start=$(date +%s.%N)
  echo "before: $(cat /proc/loadavg)" > "$OUT/$2.time"
  (cd "$1" && PYTHONPATH="$1" .venv/bin/python -m pytest -p no:cacheprovider --benchmark-only --run-rounds "$PAIRS" \
    --benchmark-json="$OUT/$2.json" > "$OUT/$2.log" 2>&1)
  echo "after: $(cat /proc/loadavg); $(echo "$(date +%s.%N) - $start" | bc) s" >> "$OUT/$2.time"
}
for i in $(seq "$N"); do
  if (( i % 2 )); then run "$OLD" "old-$i"; run "$NEW" "new-$i"; else run "$NEW" "new-$i"; run "$OLD" "old-$i"; fi
done
echo done > "$OUT/DONE"
