#!/bin/bash
# The fail-closed tests on 0ae8fbe (the head's tests/ laid over it) and on the head: each should fail on the first.
#   OLD=<folder for a worktree> OUT=<folder> lab/studies/fail_closed/before_after.sh   (from the head's tree)
# Each tree needs .venv, the data and the build folder: linked from the head's.
set -u
HEAD_TREE=$(git rev-parse --show-toplevel); OLD=${OLD:?a folder for the worktree of 0ae8fbe}; OUT=${OUT:?a folder for the outputs}
mkdir -p "$OUT"
if [ ! -d "$OLD" ]; then
  git -C "$HEAD_TREE" worktree add -q --detach "$OLD" 0ae8fbe
  ln -s "$HEAD_TREE/.venv" "$OLD/.venv"; ln -s "$HEAD_TREE/data" "$OLD/data"; ln -s "$HEAD_TREE/build" "$OLD/build"
fi
rm -rf "$OLD/tests"; cp -r "$HEAD_TREE/tests" "$OLD/tests"
TESTS=(
  "tests/test_faulty_suite_run.py::test_a_case_that_fails_after_its_timing_is_no_result_and_the_summary_names_it"
  "tests/long_failed_case.py::test_a_failed_case_is_judged_by_no_gate"
  "tests/test_gate.py::test_an_error_benchmark_leaves_pytest_benchmarks_session_before_it_compares"
  "tests/test_paired.py::test_base_and_head_that_cannot_be_compared_fail_unless_the_change_is_accepted"
  "tests/test_count_gate.py::test_base_and_head_that_cannot_be_compared_fail_unless_the_change_is_accepted"
  "tests/test_count_gate.py::test_the_count_gate_is_decided_by_bases_code"
  "tests/test_gate_workflows.py::test_the_gates_run_base_checkouts_scripts_against_heads_checkout"
  "tests/test_gate_workflows.py::test_a_maintainers_label_accepts_a_change_and_runs_the_gates_again"
  "tests/test_count_gate.py::test_calls_per_round_that_differ_are_not_comparable_and_name_the_case"
  "tests/test_paired.py::test_runs_that_differ_within_a_side_cannot_be_compared_either"
  "tests/test_history.py::test_series_of_different_calls_per_round_are_kept_apart"
  "tests/test_saved.py::test_two_benchmarks_of_one_case_are_refused_naming_both"
  "tests/test_faulty_suite_run.py::test_a_case_on_a_replaced_worker_records_and_prints_it"
  "tests/test_worker_faults.py::test_a_world_that_replaces_a_broken_one_says_what_it_replaced"
  "tests/test_gate_post.py"
  "tests/test_gate_workflows.py::test_the_pull_requests_run_uploads_data_only"
  "tests/test_gate_workflows.py::test_the_comment_is_rendered_and_posted_by_the_default_branchs_code"
  "tests/test_gate_comment.py::test_every_verdict_file_the_docs_cite_renders"
  "tests/test_cuda_contract.py::test_the_fake_nccl_tells_a_rank_bound_to_the_wrong_gpu"
  "tests/test_cuda_contract.py::test_the_cuda_resolution_entry_point_refuses_bad_calls"
  "tests/test_one_reader.py::test_the_lab_reads_saved_results_through_saved_result"
  "tests/test_one_reader.py::test_the_ci_scripts_parse_no_json_by_hand"
  "tests/test_history.py::test_a_step_where_the_count_bracket_changed_is_a_change_of_measurement_apart_from_code"
  "tests/test_history.py::test_the_spread_beside_a_change_is_labelled_descriptive_not_a_confidence_interval"
  "tests/test_history.py::test_the_page_and_the_terminal_say_each_series_newest_commit_its_date_and_its_method"
)
for tree in old head; do
  dir=$OLD; [ $tree = head ] && dir=$HEAD_TREE
  (cd "$dir" && PYTHONPATH="$dir" .venv/bin/python -m phasebench.worker.build --all >/dev/null 2>&1;
   PYTHONPATH="$dir" .venv/bin/python -m pytest -p no:cacheprovider --benchmark-disable -n 2 --dist loadgroup -q -rA \
     --tb=line "${TESTS[@]}" > "$OUT/$tree.txt" 2>&1; echo "exit $?" >> "$OUT/$tree.txt")
done
