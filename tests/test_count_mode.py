"""--count instructions end to end on a tiny case (docs/instruction-counts.md): one phase, one round, each language,
where valgrind is installed; and the one-line refusals of what the mode cannot count."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from phasebench.repository import ROOT

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")


def pytest_run(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=timeout)


def counted_runs(config, folder) -> dict:
    """One pytest per language under --count instructions on the tiniest case (copy_to_device, one round), side by
    side: a count does not depend on its neighbours. {language: (its result file, its ended process)}."""
    runs = {}
    for impl in ("python", "cpp"):
        out, log = folder / f"{impl}.json", open(folder / f"{impl}.log", "w")
        with log:
            runs[impl] = (out, subprocess.Popen(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "bench/test_phases.py", "--count",
                 "instructions", "--impl", impl, "-k", "copy_to_device", "--rounds", "1", "--warmup-rounds", "0",
                 "--benchmark-json", str(out),
                 # The data this run resolved: two children resolving a fresh clone's data/ at once can race.
                 f"--dataset={config.getoption('dataset')}", f"--mnist-root={config.getoption('mnist_root')}"],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True))
    try:
        for _, process in runs.values():
            process.wait(timeout=600)
    finally:
        for _, process in runs.values():
            if process.poll() is None:
                process.kill()
    return runs


@needs_valgrind
def test_one_phase_is_counted_in_both_languages(pytestconfig, cpp_library, tmp_path):
    """The mode end to end on its tiniest case: copy_to_device, one round, each language (cpp_library: both
    languages' count bracket is in the C++ library, built first). Why it cannot be cheaper (about 60 s of two
    cores): a worker under Valgrind starts slowly (torch or LibTorch translated and their symbols read), and only a
    real run shows that both brackets count and that the result saves counts, not times."""
    runs = counted_runs(pytestconfig, tmp_path)
    cases = {}
    for out, process in runs.values():
        output = out.with_suffix(".log").read_text()
        assert process.returncode == 0, output[-4000:]
        assert "COUNTING instructions under valgrind" in output
        assert "Name (time in M instructions)" in output and "instructions counted on cpu" in output
        saved = json.loads(out.read_text())
        machine = saved["machine_info"]["phasebench"]
        assert machine["metric"] == "instructions" and machine["count"]["pins"]["ATEN_CPU_CAPABILITY"] == "avx2"
        assert machine["count"]["cpu_capability"] == "AVX2" and machine["count"]["valgrind"].startswith("valgrind-")
        assert machine["count"]["glibc"] == os.confstr("CS_GNU_LIBC_VERSION").split()[1]
        [bench] = saved["benchmarks"]
        cases[bench["extra_info"]["language"]] = bench
    assert set(cases) == {"python", "cpp"}
    for language, bench in cases.items():
        info = bench["extra_info"]
        [count] = info["instructions"]
        assert info["unit"] == "instructions" and info["count_labels"][0].startswith(f"{info['implementation']}/")
        assert 0 < info["count_floor"] < count, (language, info["count_floor"], count)
        assert sum(info["split"].values()) == count  # every instruction placed somewhere
        assert bench["stats"]["median"] == pytest.approx(count * 1e-9)  # the statistics are the counts
    # The interpreter runs Python's phase, not C++'s.
    assert cases["python"]["extra_info"]["split"]["interpreter"] > 0 == cases["cpp"]["extra_info"]["split"]["interpreter"]


def test_what_cannot_be_counted_is_refused_in_one_line(tmp_path):
    args = ("bench/test_phases.py", "--collect-only", "-q", "--count", "instructions")
    cuda = pytest_run(*args, "--device", "cuda")
    workers = pytest_run(*args, "--impl", "python-workers")
    no_valgrind = pytest_run(*args, env=os.environ | {"PATH": str(tmp_path)})
    assert cuda.returncode == 4 and "--count instructions counts on cpu only" in cuda.stderr, cuda.stderr
    assert workers.returncode == 4 and "cannot count python-workers" in workers.stderr, workers.stderr
    assert no_valgrind.returncode == 4 and "--count instructions needs valgrind" in no_valgrind.stderr


@needs_valgrind
def test_rounds_given_anywhere_reach_the_count_mode():
    """--rounds in PYTEST_ADDOPTS is the command's as much as on its line: the count mode keeps it, and its own
    3 counted rounds stand only where nothing names the rounds (the header says which)."""
    args = ("bench/test_phases.py", "--collect-only", "--count", "instructions", "--impl", "python")
    unset = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}
    given = pytest_run(*args, env=unset | {"PYTEST_ADDOPTS": "--rounds 7"})
    default = pytest_run(*args, env=unset)
    assert given.returncode == 0 and " 7 counted rounds after 1 warm-up" in given.stdout, given.stdout + given.stderr
    assert default.returncode == 0 and " 3 counted rounds after 1 warm-up" in default.stdout, default.stderr


def test_the_heap_pad_leaves_another_heap_for_each_n(monkeypatch):
    """The count study's C-heap perturbation (PHASEBENCH_TEST_HEAP_PAD) keeps every other block of its N and does
    nothing without N."""
    from tests import knobs_worker as count_server

    monkeypatch.setattr(count_server, "_KEPT", [])
    monkeypatch.delenv("PHASEBENCH_TEST_HEAP_PAD", raising=False)
    count_server.perturb_heap()
    assert count_server._KEPT == []
    for n, kept in ((1, 8), (3, 24 + 8)):
        monkeypatch.setenv("PHASEBENCH_TEST_HEAP_PAD", str(n))
        count_server.perturb_heap()
        assert len(count_server._KEPT) == kept and all(count_server._KEPT)
