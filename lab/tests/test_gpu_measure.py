""".ci/gpu-measure --dry-run (docs/gpu.md#running-it): every step of the full run and of the smoke run collected with
its own options, the cpu step run, on a machine without a GPU, so that the script cannot rot between two GPUs; and
a dry run whose pytest refuses every command fails, step by step."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from phasebench.repository import ROOT
from phasebench.worker import build
from tests.child_runs import child_process

SCRIPT = ROOT / ".ci" / "gpu-measure"
TIMEOUT_S = 240  # about 30 s here; far above, a hang


def dry_run(pytestconfig, out, env: dict | None = None) -> subprocess.CompletedProcess:
    """The dry run into `out`, on this run's data, with this interpreter; the library it builds is this run's
    production build (cached by its hash), so the dry run rebuilds nothing. PYTEST_ADDOPTS emptied: the dry run's own
    pytest commands are the ones under test."""
    try:
        build.library_path(variant="production")
    except build.BuildUnavailable as error:
        pytest.skip(str(error))
    env = {"OUT": str(out), "PYTHON": sys.executable, "PHASEBENCH_MNIST_ROOT": str(pytestconfig.getoption("mnist_root")),
           "PYTEST_ADDOPTS": ""} | (env or {})
    with child_process(["bash", str(SCRIPT), "--dry-run"], env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True) as child:
        stdout, _ = child.communicate(timeout=TIMEOUT_S)
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, None)


def script_steps() -> list[str]:
    """The names of the steps the script defines (`step NAME CAP SOURCE ...` in full_steps and smoke_steps)."""
    return re.findall(r"^\s+step (\S+) \d+ (?:measured|estimate) ", SCRIPT.read_text(), flags=re.MULTILINE)


def script_caps() -> dict[str, list[int]]:
    """Each run's caps as the script declares them: {"full": [...], "smoke": [...]}."""
    text = SCRIPT.read_text()
    return {run: [int(cap) for cap in re.findall(r"^\s+step \S+ (\d+) (?:measured|estimate) ",
                                                text.split(f"{run}_steps() {{")[1].split("\n}")[0], flags=re.MULTILINE)]
            for run in ("full", "smoke")}


def step_lines(out) -> dict[str, str]:
    """steps.txt's step lines, by step name."""
    lines = (out / "steps.txt").read_text().splitlines()
    return dict(re.match(r"step (\S+): (.*)", line).groups() for line in lines if line.startswith("step "))


def test_the_dry_run_collects_every_step_and_runs_the_cpu_step(pytestconfig, tmp_path):
    run = dry_run(pytestconfig, tmp_path)
    steps = step_lines(tmp_path)
    names = script_steps()
    assert len(names) >= 10 and any(name.startswith("smoke-") for name in names), names
    assert set(steps) == set(names) | {"cpu-data-loading-run"}, run.stdout
    failed = {name: line for name, line in steps.items() if not line.startswith("passed")}
    assert not failed and run.returncode == 0, run.stdout
    for name, line in steps.items():
        if name.endswith("-run"):  # run on cpu: its JSON holds the benchmark it ran
            assert '"benchmarks": [' in (tmp_path / f"{name}.json").read_text(), line
        else:  # each step's cap printed with its source
            assert re.match(r"passed, collected [1-9]\d* case\(s\) on cuda, not run, \d+ s; cap \d+ s "
                            r"\((measured|estimate)\)$", line), (name, line)
    text = (tmp_path / "steps.txt").read_text()
    caps = script_caps()
    for run, budget in (("full", 440), ("smoke", 220)):
        assert f"{run} run: its caps add up to {sum(caps[run])} s, within its budget of {budget} s" in text, text
    assert "not reached: the cuda branches (CUDA graphs, torch.compile on cuda, NCCL, NVML)" in text
    assert text.splitlines()[-1] == "no step failed"


def test_a_dry_run_fails_when_the_caps_exceed_a_budget(tmp_path):
    """A run whose caps outgrow its budget fails the dry run, before any GPU time is spent on it: the script with one
    cap raised past the full run's budget, its collection stopped at once (PYTHON is `false`)."""
    script = tmp_path / "gpu-measure"
    text = SCRIPT.read_text()
    script.write_text(re.sub(r"(step 1-\S+ )\d+", r"\g<1>999", text, count=1))
    copy = tmp_path / "repo" / ".ci"
    copy.mkdir(parents=True)
    (copy / "gpu-measure").write_text(script.read_text())
    done = subprocess.run(["bash", str(copy / "gpu-measure"), "--dry-run", "0000000", "0"], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), "PYTHON": "false"},
                          timeout=60)
    lines = (tmp_path / "out" / "steps.txt").read_text()
    assert done.returncode == 1 and re.search(r"full run: FAILED, its caps add up to \d+ s, over its budget of 440 s",
                                              lines), lines


def test_a_dry_run_whose_commands_pytest_refuses_fails_every_step(pytestconfig, tmp_path):
    """An option pytest does not know (as a renamed option would be) fails each step with pytest's usage error."""
    run = dry_run(pytestconfig, tmp_path, env={"PYTEST_ADDOPTS": "--no-such-option"})
    steps = step_lines(tmp_path)
    assert run.returncode == 1 and set(steps) >= set(script_steps()), run.stdout
    assert all(line.startswith("FAILED, exit status 4") for line in steps.values()), steps
    assert (tmp_path / "steps.txt").read_text().splitlines()[-1] == "a step FAILED"
