"""The pull-request gate's harness end to end (.ci/bench-pr over fake trees whose pytest writes saved runs): the verdict
after the confirming rerun first, every run after base's first compared with it, the decision made by base's code
whatever head changed, and a head of another method failing unless accepted. A long check: it runs in CI's recipe
job (.github/workflows/recipes.yml), not in the test command; the fake trees and their pytest are
tests/test_gate_headlines.py's."""

from __future__ import annotations

import json

from tests.test_gate_headlines import bench_pr, first_line, runs_of


def test_bench_pr_opens_gate_md_with_the_verdict_after_its_rerun(tmp_path):
    """The verdict after the confirming rerun comes first; and like with like: every run of the gate after base's
    first, of both sides and of the confirming rerun, takes --benchmark-compare of that run, and so its order seed
    and each case's calls per round."""
    status, gate_md, log = bench_pr(tmp_path / "cleared", "first")
    assert "running them again alone to confirm" in log, log
    assert status == 0, log
    assert first_line(gate_md).startswith("**Gate: passed** (cleared by the rerun: 2 regressed in the first runs"), gate_md
    (first,) = (tmp_path / "cleared" / "out" / "storage").glob("*/0001_first-base-1.json")
    base, head = runs_of(tmp_path / "cleared" / "base"), runs_of(tmp_path / "cleared" / "head")
    assert len(base) == len(head) == 4  # two pairs, then two pairs of the rerun
    assert not [arg for arg in base[0] if arg.startswith("--benchmark-compare")]
    for arguments in base[1:] + head:
        assert f"--benchmark-compare={first}" in arguments, arguments
    saved = [json.loads(path.read_text()) for path in (tmp_path / "cleared" / "out" / "storage").rglob("*.json")]
    assert len({held["machine_info"]["phasebench"]["order_seed"] for held in saved}) == 1

    status, gate_md, log = bench_pr(tmp_path / "confirmed", "first,confirm")
    assert status == 1, log
    assert first_line(gate_md).startswith("**Gate: FAILED, 2 regressed** (confirmed: "), gate_md
    assert "### The first runs (2 regressed; their cases were run again alone, above)" in gate_md



def test_the_decision_is_bases_whatever_head_changed_in_it(tmp_path):
    """Head's tree provides the code under test, not the judge: a head whose own phasebench.gate.paired passes
    everything is judged by base's, and its 50 % slowdown fails the gate."""
    shadow = tmp_path / "head" / "phasebench" / "gate"
    shadow.mkdir(parents=True)
    (shadow.parent / "__init__.py").touch()
    (shadow / "__init__.py").touch()
    (shadow / "paired.py").write_text("import sys\nprint('**Gate: passed** (head judged itself)')\n"
                                      "for flag in ('--markdown', '--json'):\n"
                                      "    if flag in sys.argv:\n"
                                      "        open(sys.argv[sys.argv.index(flag) + 1], 'w').write('**Gate: passed**\\n')\n")
    status, gate_md, log = bench_pr(tmp_path, "first,confirm")
    assert status == 1, log
    assert first_line(gate_md).startswith("**Gate: FAILED, 2 regressed** (confirmed: "), gate_md


def test_a_head_of_another_method_fails_the_gate_unless_accepted(tmp_path):
    """Head's plugin refuses base's first run as its baseline (another method): its runs take base's run order alone,
    and the gate fails naming the methods, or passes saying so where a maintainer accepted the change."""
    from phasebench.method import METHOD_VERSION

    status, gate_md, log = bench_pr(tmp_path / "refused", "", head_method=METHOD_VERSION - 1)
    assert status == 1, log
    assert first_line(gate_md).startswith(f"**Gate: FAILED, not comparable** (method: base {METHOD_VERSION}, head "
                                          f"{METHOD_VERSION - 1} "), gate_md
    assert "head refused base's first run as its baseline" in log
    status, gate_md, log = bench_pr(tmp_path / "accepted", "", head_method=METHOD_VERSION - 1,
                                    GATE_ACCEPT_CHANGE="the label, by a maintainer")
    assert status == 0, log
    assert first_line(gate_md).startswith("**Gate: passed, change accepted** (base and head cannot be compared: "
                                          f"method: base {METHOD_VERSION}, head {METHOD_VERSION - 1} "), gate_md
