#!/bin/bash
# The default run on a loaded machine: N default runs of a clean tree beside BUSY shell loops that each spin on a core,
# each run's load average before and after in its .time file.
#   TREE=<clean tree> OUT=<folder> N=3 BUSY=2 lab/studies/paired/loaded.sh
set -u
TREE=${TREE:?}; OUT=${OUT:?}; N=${N:-3}; BUSY=${BUSY:-2}
mkdir -p "$OUT"
pids=()
for _ in $(seq "$BUSY"); do (while :; do :; done) & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
sleep 30  # the load average climbs to the busy loops' before the first run
for i in $(seq "$N"); do
  start=$(date +%s.%N)
  echo "before: $(cat /proc/loadavg)" > "$OUT/loaded-$i.time"
  (cd "$TREE" && PYTHONPATH="$TREE" .venv/bin/python -m pytest -p no:cacheprovider --benchmark-only \
    --benchmark-json="$OUT/loaded-$i.json" > "$OUT/loaded-$i.log" 2>&1)
  echo "after: $(cat /proc/loadavg); $(echo "$(date +%s.%N) - $start" | bc) s" >> "$OUT/loaded-$i.time"
done
echo done > "$OUT/DONE"
