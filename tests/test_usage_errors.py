"""Bad option values and what the suite cannot do are usage errors (docs/usage.md#run-skip-or-deselect): an unknown
value, a bad count, a separate path outside the repository, asking only for what cannot run here, and a pytest-benchmark
option that a run timed inside workers cannot honour; each names the option and what would work."""

from __future__ import annotations

import types

import pytest

from phasebench import registry
from phasebench.plugin import guards
from phasebench.repository import ROOT
from tests.child_runs import run_suite


@pytest.mark.parametrize("option, value, valid", [
    ("--impl", "rust", ", ".join(registry.NAMES)),
    ("--device", "tpu", "cpu, cuda"),
    ("--dataset", "imagenet", "auto, mnist, fashion-mnist, synthetic"),
    ("--round-checks", "maybe", "on, off"),
])
def test_an_unknown_option_value_is_a_usage_error(option, value, valid):
    run = run_suite(option, value)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert f"{option} '{value}': valid values are {valid}" in run.stderr


@pytest.mark.parametrize("option, value", [("--batch-size", "64,x"), ("--jobs", "2,0"), ("--models", "four")])
def test_a_bad_count_is_a_usage_error(option, value):
    run = run_suite(option, value)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert f"{option} '{value}': expected positive whole numbers, comma-separated" in run.stderr


def test_a_separate_path_outside_the_repository_stops_with_the_equals_form(tmp_path):
    """pytest picks its root directory before any plugin declares --mnist-root, and takes a separate existing path
    for a test path: outside the repository it would run without pytest.ini
    (docs/usage.md#a-path-outside-the-repository)."""
    separate = run_suite("--collect-only", "-q", "--mnist-root", str(tmp_path))
    assert separate.returncode == pytest.ExitCode.USAGE_ERROR, separate.stdout + separate.stderr
    [line] = [line for line in separate.stderr.splitlines() if line.startswith("ERROR:")]
    assert line.endswith(f"write --mnist-root={tmp_path}") and f"--mnist-root {tmp_path}: pytest took" in line
    for works in ([f"--mnist-root={tmp_path}"], ["--mnist-root", str(ROOT / "data")]):  # the = form; inside the repository
        run = run_suite("--collect-only", "-q", *works)
        assert run.returncode == pytest.ExitCode.OK, run.stdout + run.stderr
        assert "bench/test_phases.py::test_phase[forward-cpp-cpu]" in run.stdout  # pytest.ini's testpaths


@pytest.mark.parametrize("options, env, error", [
    (["--device", "cuda"], {"CUDA_VISIBLE_DEVICES": ""},
     "ERROR: --device cuda: no usable GPU: "),
    (["--impl", "cpp"], {"CXX": "no-such-compiler"},
     "ERROR: --impl cpp: no C++ toolchain: 'no-such-compiler' not found on PATH (install g++ and make)"),
], ids=["cuda-without-gpu", "cpp-without-compiler"])
def test_asking_only_for_what_cannot_run_is_a_usage_error(options, env, error):
    """A GPU runner that lost its GPU must not pass green with every case skipped
    (docs/usage.md#run-skip-or-deselect)."""
    run = run_suite("--benchmark-only", *options, env=env)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].startswith(error), run.stderr  # why no GPU depends on the machine


def test_a_pytest_benchmark_option_it_cannot_honour_is_refused():
    run = run_suite("--benchmark-only", "--benchmark-min-rounds=5")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert [line for line in run.stderr.splitlines() if line.startswith("ERROR:")] == [
        "ERROR: --benchmark-min-rounds is not supported: phasebench times each phase inside its worker process for "
        "a fixed number of rounds: use --rounds N"], run.stderr


@pytest.mark.parametrize("option", sorted(guards.REFUSED_BENCHMARK_OPTIONS))
def test_every_refused_option_is_found_wherever_it_is_given(option, monkeypatch):
    def config(args=(), addopts=()):
        return types.SimpleNamespace(invocation_params=types.SimpleNamespace(args=tuple(args)),
                                     getini=lambda name: list(addopts))

    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    assert guards.refused_option(config(["--rounds", "5"])) is None
    for given in (config([f"{option}=1"]), config([option, "1"]), config(addopts=[option])):
        assert guards.refused_option(given).startswith(f"{option} is not supported: ")
    assert guards.refused_option(config(["--", option])) is None  # past --: not an option
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{option}=1")
    assert guards.refused_option(config()).startswith(f"{option} is not supported: ")
