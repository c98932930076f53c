"""The first line of every gate's output is its final verdict (docs/gating.md): one run a side says "no verdict",
a regression "FAILED", and a regression that the confirming rerun cleared "passed", as the exit status does, in
python -m phasebench.gate, .gate.paired, .gate.counts and .ci/bench-pr's gate.md."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

from phasebench.gate import cli as gate_cli
from phasebench.gate import counts, paired
from phasebench.repository import ROOT
from tests.test_count_gate import BASE, counted_json
from tests.test_paired import save_run

SLOWED = {"test_phase[forward-cpp-cpu]": 0.5}


def first_line(text: str) -> str:
    return text.splitlines()[0]


def test_one_run_a_side_says_no_verdict_first(tmp_path, capsys):
    base, head = (save_run(tmp_path / f"{side}.json", random.Random(1), 0.0, slow)
                  for side, slow in (("base", None), ("head", SLOWED)))
    assert gate_cli.main([base, head]) == 0
    assert first_line(capsys.readouterr().out).startswith("**Gate: no verdict** (one run a side: ")
    assert paired.main(["--base", base, "--head", head]) == 0
    assert first_line(capsys.readouterr().out).startswith("**Gate: no verdict** (one run a side: ")


def paired_runs(folder: Path, side: str, slow=None, seed: int = 0) -> list[str]:
    folder.mkdir(exist_ok=True)
    rng = random.Random(seed)
    return [save_run(folder / f"{side}-{i}.json", rng, 0.02, slow) for i in range(3)]


def test_the_verdict_after_the_confirming_rerun_comes_first(tmp_path, capsys):
    """A regression in the first runs that the rerun clears: "passed" first, exit 0; one the rerun confirms:
    "FAILED" first, exit 1; the first runs' table follows the rerun's, under its own heading."""
    first = ["--base", *paired_runs(tmp_path / "first", "base"),
             "--head", *paired_runs(tmp_path / "first", "head", SLOWED, seed=1)]
    assert paired.main(first) == 1
    assert first_line(capsys.readouterr().out).startswith("**Gate: FAILED, 2 regressed** (3 paired runs; ")

    cleared = ["--confirm-base", *paired_runs(tmp_path / "cleared", "base", seed=2),
               "--confirm-head", *paired_runs(tmp_path / "cleared", "head", seed=3)]
    gate_md = tmp_path / "gate.md"
    assert paired.main([*first, *cleared, "--markdown", str(gate_md), "--failing", str(tmp_path / "failing")]) == 0
    out = capsys.readouterr().out
    assert first_line(out).startswith("**Gate: passed** (cleared by the rerun: 2 regressed in the first runs, none "
                                      "when their cases ran again alone; 3 paired runs; ")
    assert gate_md.read_text() == out and (tmp_path / "failing").read_text() == ""
    rerun, first_runs = out.split("### The failing cases run again alone (the verdict)")[1].split("### The first runs")
    assert "**regressed**" not in rerun and "**regressed**" in first_runs

    confirmed = ["--confirm-base", *paired_runs(tmp_path / "confirmed", "base", seed=4),
                 "--confirm-head", *paired_runs(tmp_path / "confirmed", "head", SLOWED, seed=5)]
    assert paired.main([*first, *confirmed]) == 1
    assert first_line(capsys.readouterr().out).startswith("**Gate: FAILED, 2 regressed** (confirmed: 2 regressed "
                                                          "again when the first runs' failing cases ran again alone")


def test_the_count_gate_says_its_verdict_first(tmp_path, capsys):
    base, slower, other = tmp_path / "base.json", tmp_path / "slower.json", tmp_path / "other.json"
    base.write_text(json.dumps(counted_json(BASE)))
    slower.write_text(json.dumps(counted_json(BASE | {"forward-python-cpu": [37_281_000] * 3})))
    other.write_text(json.dumps(counted_json(BASE, bracket="another bracket")))
    for base_file, head_file, status, verdict in ((base, slower, 1, "FAILED, 1 regressed"), (base, base, 0, "passed")):
        assert counts.main(["--base", str(base_file), "--head", str(head_file)]) == status
        assert first_line(capsys.readouterr().out) == (f"## Instruction-count gate: {verdict} "
                                                       "(base vs head, `--count instructions`)")
    assert counts.main(["--base", str(other), "--head", str(base)]) == 1
    assert first_line(capsys.readouterr().out).startswith("## Instruction-count gate: FAILED, not comparable (the count "
                                                          "bracket changed (base 'another bracket'")


# -- .ci/bench-pr's gate.md, its shell composition run for real over trees whose pytest saves made-up runs ------------

FAKE_PYTEST = textwrap.dedent('''
    """A tree's pytest for .ci/bench-pr: saves a run of CASES (those named, in a rerun) as --benchmark-save names it;
    head's runs of the stages in FAKE_SLOW_STAGES have forward-cpp-cpu 50 % slower. Like the plugin, it takes the
    order seed and each case's calls per round of the run --benchmark-compare names (an --order-seed given wins),
    else draws its own, and refuses a baseline of another method (a usage error); each run's arguments are appended
    to the tree's runs.log."""
    import json, os, random, sys
    from pathlib import Path
    from pytest_benchmark.utils import get_machine_id
    sys.path.insert(0, {root!r})
    from tests.test_paired import CASES

    with open(Path(__file__).with_name("runs.log"), "a") as log:
        log.write(json.dumps(sys.argv[1:]) + "\\n")
    options = dict(arg[2:].split("=", 1) for arg in sys.argv[1:] if arg.startswith("--") and "=" in arg)
    named = [arg.rpartition("::")[2] for arg in sys.argv[1:] if "::" in arg]
    name = options["benchmark-save"]
    stage, side, index = name.rsplit("-", 2)
    slow = side == "head" and stage in os.environ.get("FAKE_SLOW_STAGES", "").split(",")
    rng, drawn = random.Random(name), random.Random(name + "-order")
    seed, calls = drawn.randrange(1 << 16), {{case: drawn.randrange(1, 100) for case in CASES}}
    if "benchmark-compare" in options:
        baseline = json.loads(Path(options["benchmark-compare"]).read_text())
        if baseline["machine_info"]["phasebench"]["method"] != {method}:
            print("ERROR: --benchmark-compare: measured by another method", file=sys.stderr)
            sys.exit(4)  # pytest's usage error, as the plugin's refusal
        seed = baseline["machine_info"]["phasebench"]["order_seed"]
        calls = {{bench["name"]: bench["stats"]["iterations"] for bench in baseline["benchmarks"]}}
    seed = int(options.get("order-seed", seed))
    folder = Path(options["benchmark-storage"].removeprefix("file://")) / get_machine_id()
    folder.mkdir(parents=True, exist_ok=True)
    benchmarks = []
    for case, (phase, impl, median, floor) in CASES.items():
        if named and case not in named:
            continue
        value = median * (1 + rng.gauss(0, 0.01)) * (1.5 if slow and case == "test_phase[forward-cpp-cpu]" else 1)
        benchmarks.append({{"fullname": f"bench/test_phases.py::{{case}}", "name": case, "group": phase,
                           "stats": {{"median": value, "iqr": 0.0, "q1": value, "q3": value, "rounds": 5,
                                     "iterations": calls[case]}},
                           "extra_info": {{"phase": phase, "implementation": impl, "device": "cpu",
                                          "timer_floor_s": floor}}}})
    number = len(list(folder.glob("*.json"))) + 1
    (folder / f"{{number:04}}_{{name}}.json").write_text(json.dumps({{
        "machine_info": {{"phasebench": {{"method": {method}, "dataset": "synthetic", "order_seed": seed}}}},
        "benchmarks": benchmarks}}))
''')


def fake_tree(path: Path, method: int) -> Path:
    """A tree whose .venv/bin/python runs FAKE_PYTEST for `-m pytest`, skips the report (its charts take seconds, and
    the report is no verdict), and runs this interpreter for everything else (the gate: phasebench as installed)."""
    (path / ".venv" / "bin").mkdir(parents=True)
    (path / "fake_pytest.py").write_text(FAKE_PYTEST.format(root=str(ROOT), method=method))
    python = path / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1 $2" = "-m pytest" ]; then shift 2; exec {sys.executable} '
                      f'{path / "fake_pytest.py"} "$@"; fi\nif [ "$1 $2" = "-m phasebench.report" ]; then exit 0; fi\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return path


def bench_pr(tmp_path: Path, slow_stages: str, head_method: int | None = None, **env) -> tuple[int, str, str]:
    from phasebench.method import METHOD_VERSION

    trees = [fake_tree(tmp_path / side, method) for side, method in (("base", METHOD_VERSION),
                                                                    ("head", head_method or METHOD_VERSION))]
    env = os.environ | {"PHASEBENCH_NO_INSTALL": "1", "GATE_PAIRS": "2",
                        "HEAD_ENV": f"FAKE_SLOW_STAGES={slow_stages}"} | env
    done = subprocess.run(["bash", str(ROOT / ".ci" / "bench-pr"), *map(str, trees), str(tmp_path / "out"),
                           "--device", "cpu"], env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, (tmp_path / "out" / "gate.md").read_text(), done.stderr


def runs_of(tree: Path) -> list[list[str]]:
    """The arguments of each run of a fake tree's pytest, in order."""
    return [json.loads(line) for line in (tree / "runs.log").read_text().splitlines()]
