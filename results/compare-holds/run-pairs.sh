#!/usr/bin/env bash
# Pairs of unchanged runs through docs/recipes.md "Save and compare a baseline", as written but for a scratch storage
# of each pair's own (--benchmark-storage) and the pytest options given after OUT; then, unless PLANTED is empty, one
# more pair whose `after` run has one phase slowed by the tests' knob (tests/knobs.py). Each run's exit status and
# log lie in OUT/pair-N/; summarize.py writes the summary.
#
#   results/compare-holds/run-pairs.sh OUT [PYTEST OPTIONS...]      (from the repository's root; PAIRS=10 unless set)
set -u
out=${1:?usage: run-pairs.sh OUT [PYTEST OPTIONS...]}
shift
pairs=${PAIRS:-10}
planted=${PLANTED-python/forward:100%}
python=.venv/bin/python
before=(--benchmark-only --device cpu --benchmark-save=before)
after=(--benchmark-only --device cpu --benchmark-save=after --benchmark-compare --benchmark-compare-fail=median:30%
       --phase-ratio-fail=10%)

run_pair() {  # run_pair NAME [ENV FOR THE AFTER RUN...]
    local dir=$out/$1
    shift
    mkdir -p "$dir"
    echo "$(date -u +%FT%TZ) $dir: before" >&2
    "$python" -m pytest "${before[@]}" --benchmark-storage="$dir/storage" "$@" >"$dir/before.log" 2>&1
    echo $? >"$dir/before.rc"
    echo "$(date -u +%FT%TZ) $dir: after" >&2
    env "${after_env[@]}" "$python" -m pytest "${after[@]}" --benchmark-storage="$dir/storage" "$@" \
        >"$dir/after.log" 2>&1
    echo $? >"$dir/after.rc"
}

after_env=()
for i in $(seq 1 "$pairs"); do
    run_pair "pair-$i" "$@"
done
if [ -n "$planted" ]; then
    # The knob is the tests' plugin; the baseline is an ordinary run, as a regression's would be.
    after_env=(PHASEBENCH_TEST_SLOW_PHASE="$planted" PYTEST_ADDOPTS=-ptests.knobs)
    run_pair planted "$@"
fi
