"""--count instructions end to end on a tiny case (docs/instruction-counts.md): one phase, one round, each language,
under Valgrind. A long check: a worker under Valgrind takes half a minute of a core to start, so the module is named
outside test_*.py and the README's test command does not collect it; the job `recipe` of
.github/workflows/recipes.yml runs it on every push and pull request (`.venv/bin/python -m pytest
tests/long_count_mode.py ...`), and tests/test_docs_recipes.py checks that it does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from phasebench.repository import ROOT
from tests.test_count_mode import needs_valgrind


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
