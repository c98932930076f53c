#!/usr/bin/env bash
# The study beside the pairs: pairs of unchanged runs (run-pairs.sh, one pair each) made alternately by a tree that
# calibrates its calls per round and by a tree that times one call a round, so that both meet the same load; then
# the planted pair in the calibrating tree.
#
#   results/compare-holds/alternate.sh CALIBRATING_TREE ONE_CALL_TREE OUT PAIRS [PYTEST OPTIONS...]
set -u
calibrating=${1:?}; one_call=${2:?}; out=${3:?}; pairs=${4:?}
shift 4
pairs_script=$(cd "$(dirname "$0")" && pwd)/run-pairs.sh  # run in each tree's root, with that tree's code
for i in $(seq 1 "$pairs"); do
    if [ $((i % 2)) = 1 ]; then tree=$calibrating label=calibrated; else tree=$one_call label=one-call; fi
    (cd "$tree" && PYTHONPATH=$tree PAIRS=1 PLANTED= "$pairs_script" "$out/$label-$i" "$@")
done
(cd "$calibrating" && PYTHONPATH=$calibrating PAIRS=0 "$pairs_script" "$out/planted" "$@")
