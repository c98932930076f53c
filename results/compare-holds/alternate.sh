#!/usr/bin/env bash
# The study beside the pairs: pairs of unchanged runs (run-pairs.sh, one pair each) made alternately by two trees,
# so that both meet the same load; then the planted pair in the first tree. LABELS names the two trees in OUT
# (default "calibrated one-call": a tree that calibrates its calls per round and one that times one call a round).
#
#   results/compare-holds/alternate.sh FIRST_TREE SECOND_TREE OUT PAIRS [PYTEST OPTIONS...]
set -u
first=${1:?}; second=${2:?}; out=${3:?}; pairs=${4:?}
shift 4
read -r first_label second_label <<<"${LABELS:-calibrated one-call}"
pairs_script=$(cd "$(dirname "$0")" && pwd)/run-pairs.sh  # run in each tree's root, with that tree's code
for i in $(seq 1 "$pairs"); do
    if [ $((i % 2)) = 1 ]; then tree=$first label=$first_label; else tree=$second label=$second_label; fi
    (cd "$tree" && PYTHONPATH=$tree PAIRS=1 PLANTED= "$pairs_script" "$out/$label-$i" "$@")
done
(cd "$first" && PYTHONPATH=$first PAIRS=0 "$pairs_script" "$out/planted" "$@")
