"""The pull request's workflows, read with a YAML parser (.github/workflows/, docs/gating.md#on-a-pull-request): the
gates run base's checkout's scripts against head's checkout; a maintainer's label accepts a change and runs them
again; the pull request's run uploads data only; the comment is rendered and posted by the default branch's code,
one run at a time per pull request."""

from __future__ import annotations

import shlex

import pytest

from phasebench.repository import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
BASE_REF = "${{ github.event.pull_request.base.sha }}"


def workflow(name: str) -> dict:
    try:
        import yaml
    except ImportError:
        pytest.fail("PyYAML is not installed: pip install -r requirements.txt pins it")
    held = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf8"))
    held["on"] = held.pop(True, held.get("on"))  # YAML 1.1 reads the key `on` as true
    return held


def steps(held: dict) -> list[dict]:
    return [step for job in held["jobs"].values() for step in job.get("steps", [])]


def checkouts(held: dict) -> dict[str, str | None]:
    """{the folder a checkout step fills: the ref it checks out (None: the event's own commit)}."""
    return {(step.get("with") or {}).get("path", "."): (step.get("with") or {}).get("ref")
            for step in steps(held) if str(step.get("uses", "")).startswith("actions/checkout@")}


def test_the_gates_run_base_checkouts_scripts_against_heads_checkout():
    """A pull request that changes the gates' scripts or decision code is still judged by base's: each gate's step
    runs the script from the checkout of the base commit, with base's tree first and head's second, and no step
    runs anything from head's checkout."""
    compare = workflow("benchmark-compare.yml")
    trees = checkouts(compare)
    (base,) = [path for path, ref in trees.items() if ref == BASE_REF]
    (head,) = [path for path, ref in trees.items() if ref is None]
    gates = {}
    for step in steps(compare):
        words = shlex.split(step.get("run", ""))
        for at, word in enumerate(words):
            if word.endswith((".ci/bench-pr", ".ci/bench-pr-count")):
                gates[word.rpartition("/")[2]] = (word, words[at + 1:at + 3])
        assert not [word for word in words if word.startswith(f"{head}/")], step
    assert gates == {"bench-pr": (f"{base}/.ci/bench-pr", [base, head]),
                     "bench-pr-count": (f"{base}/.ci/bench-pr-count", [base, head])}


def test_a_maintainers_label_accepts_a_change_and_runs_the_gates_again():
    from phasebench.gate.decide import ACCEPT_LABEL

    benchmark = workflow("benchmark.yml")
    assert {"opened", "synchronize", "reopened", "labeled", "unlabeled"} <= set(
        benchmark["on"]["pull_request"]["types"])
    accept = workflow("benchmark-compare.yml")["jobs"]["compare"]["env"]["GATE_ACCEPT_CHANGE"]
    assert f"contains(github.event.pull_request.labels.*.name, '{ACCEPT_LABEL}')" in accept
    assert accept.startswith("${{") and accept.endswith("}}")


def test_the_pull_requests_run_uploads_data_only():
    """No job of the pull request's run renders the comment or checks out code to write it: the gates upload their
    verdict files, and one job with no permissions the pull request's number and head."""
    benchmark = workflow("benchmark.yml")
    for job in benchmark["jobs"].values():
        for step in job.get("steps", []):
            assert "phasebench.gate.comment" not in step.get("run", "") and "body.md" not in step.get("run", "")
    data = benchmark["jobs"]["pull-request"]
    assert data["permissions"] == {} and not [s for s in data["steps"] if "actions/checkout" in s.get("uses", "")]
    upload = next(s for s in data["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "pr-data"
    compare = workflow("benchmark-compare.yml")
    gates = next(s for s in steps(compare) if (s.get("with") or {}).get("name") == "gate-${{ inputs.device }}")
    assert gates["with"]["path"].splitlines() == ["${{ runner.temp }}/benchmark/gate.json",
                                             "${{ runner.temp }}/benchmark-count/gate.json"]


def test_the_comment_is_rendered_and_posted_by_the_default_branchs_code():
    post = workflow("benchmark-comment.yml")
    assert post["on"] == {"workflow_run": {"workflows": ["benchmark"], "types": ["completed"]}}
    assert post["permissions"] == {}
    assert post["concurrency"]["cancel-in-progress"] is False
    group = post["concurrency"]["group"].replace(" ", "")
    assert "github.event.workflow_run.head_repository.full_name" in group and "workflow_run.head_branch" in group
    (job,) = post["jobs"].values()
    assert job["permissions"] == {"actions": "read", "contents": "read", "pull-requests": "write"}
    assert checkouts(post) == {".": "${{ github.event.repository.default_branch }}"}
    downloads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert {s["with"].get("name") or s["with"].get("pattern") for s in downloads} == {"pr-data", "gate-*"}
    assert all(s["with"]["path"].startswith("${{ runner.temp }}/") for s in downloads)  # never into the checkout
    (poster,) = [s for s in job["steps"] if "run" in s]
    words = shlex.split(poster["run"])
    assert words[:3] == ["python", "-m", "phasebench.gate.post"]
    assert poster["env"]["RUN_SHA"] == "${{ github.event.workflow_run.head_sha }}"
    assert "|" not in poster["run"]  # no pipe that can fail on its reader's early exit
