#!/bin/bash
# Each selection the default run leaves out, alone, with its time (docs/usage.md#what-the-default-run-leaves-out).
cd "${TREE:?a clean clone of the commit to measure}"
OUT=${OUT:-/tmp/phasebench-answer}
while [ ! -f $OUT/DONE ]; do sleep 10; done
for sel in "jobs:--extra jobs -k test_concurrent_jobs" "ensembles:--extra ensembles -k test_ensemble" "free-running:--free-running -k test_training_run" "worker-overhead:--extra worker-overhead -k test_worker_overhead" "loss-item:--extra loss-item -k test_loss_item"; do
  name=${sel%%:*}; opts=${sel#*:}
  start=$(date +%s)
  .venv/bin/python -m pytest -p no:cacheprovider --benchmark-only $opts --benchmark-json=$OUT/extra-$name.json > $OUT/extra-$name.log 2>&1
  echo "$(( $(date +%s) - start )) s; $(uptime)" > $OUT/extra-$name.time
done
echo done > $OUT/EXTRA_DONE
