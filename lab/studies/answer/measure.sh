#!/bin/bash
# The README's figures: the default run with three training-run rounds, from a clean clone.
cd "${TREE:?a clean clone of the commit to measure, with .venv and data/}"
OUT=${OUT:-/tmp/phasebench-answer}; mkdir -p "$OUT"
uptime > $OUT/load-before.txt
.venv/bin/python -m phasebench.worker.build > $OUT/build.log 2>&1
start=$(date +%s)
.venv/bin/python -m pytest -p no:cacheprovider --benchmark-only --run-rounds 3 --benchmark-json=$OUT/default-run-3.json > $OUT/default-run-3.log 2>&1
echo "$(( $(date +%s) - start )) s" > $OUT/default-run-3.time
uptime > $OUT/load-after.txt
for i in 1 2 3; do
  start=$(date +%s)
  .venv/bin/python -m pytest -p no:cacheprovider --benchmark-only --benchmark-json=$OUT/default-$i.json > $OUT/default-$i.log 2>&1
  echo "$(( $(date +%s) - start )) s; $(uptime)" > $OUT/default-$i.time
done
echo done > $OUT/DONE
