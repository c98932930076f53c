"""--count instructions (docs/instruction-counts.md): every worker runs under Valgrind's callgrind and each counted
round's body is bracketed with the same client requests in its own language; pytest-benchmark's statistics then
hold instructions, not seconds (the worker clock advances by the count, read as 1e-9 per instruction), and the
terminal says so. What the mode cannot count it refuses in one line: a missing valgrind or <valgrind/callgrind.h>,
anything on cuda, the python-workers loader's child process. --count-i1/--count-d1/--count-ll add callgrind's cache
simulation of the geometry they give (all three, none from the virtual CPU), --count-branches its branch simulation
(docs/instruction-counts.md#simulated-caches-and-branches)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from phasebench import registry
from phasebench.worker import build, counting

CHOICES = ("instructions",)


def pytest_addoption(parser):
    group = parser.getgroup("phasebench")
    group.addoption("--count", default=None, choices=CHOICES,
                    help="count instructions under Valgrind's callgrind instead of reading a clock: one intra-op "
                         "thread, the instruction set pinned to AVX2, 1 warm-up and 3 counted rounds unless "
                         "--warmup-rounds/--rounds say otherwise (default: not given: a clock is read; "
                         "docs/instruction-counts.md)")
    for cache, option in counting.CACHES.items():
        others = " and ".join(other for other in counting.CACHES.values() if other != option)
        group.addoption(option, default=None, metavar="SIZE,ASSOC,LINE",
                        help=f"with --count instructions: simulate the {cache} cache of this geometry (bytes, ways, "
                             f"bytes) under callgrind, given with {others}; the instruction counts are unchanged "
                             f"(default: not simulated; docs/instruction-counts.md#simulated-caches-and-branches)")
    group.addoption(counting.BRANCHES_OPTION, action="store_true", default=False,
                    help="with --count instructions: simulate branch prediction under callgrind as well "
                         "(docs/instruction-counts.md#simulated-caches-and-branches)")


def simulation(option) -> dict:
    """The cache and branch simulations the options ask for (phasebench.worker.counting.simulation), from
    config.getoption; ValueError in one line for what cannot be simulated as asked."""
    def dest(name: str) -> str:
        return name.removeprefix("--").replace("-", "_")

    given = {name: option(dest(name)) for name in counting.CACHES.values()}
    return counting.simulation(option("count"), given, option(dest(counting.BRANCHES_OPTION)))


def refusal(devices: str | None, impls: tuple[str, ...], processes: int) -> str | None:
    """Why --count instructions cannot run as asked (--device's text, the parsed --impl, --processes), in one line,
    or None. Checked by the session before anything else looks at the options."""
    if counting.valgrind_version() is None:
        return "--count instructions needs valgrind on PATH (apt-get install valgrind; .ci/run installs it)"
    compiler = os.environ.get("CXX", "g++")
    if build.toolchain_missing() or build.callgrind_header(compiler) is None:
        return ("--count instructions needs the C++ library built with <valgrind/callgrind.h> (the count bracket of "
                "both languages): install g++, make and valgrind")
    if "cuda" in (devices or ""):
        return "--count instructions counts on cpu only: Valgrind cannot see a GPU's work (drop cuda from --device)"
    workers = [impl for impl in impls if registry.get(impl).loader == "workers"]
    if workers:
        return (f"--count instructions cannot count {', '.join(workers)}: its loader's child process does the work "
                f"outside the counted worker")
    if processes > 1:
        return "--count instructions counts in the long-lived worker of each case: --processes must be 1"
    return None


def pinned_capability() -> str | None:
    """torch.backends.cpu.get_cpu_capability() in a process under the pins (what the workers dispatch to)."""
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                          capture_output=True, text=True, env=os.environ | counting.PINS, timeout=300)
    return done.stdout.strip() or None


def machine_info(prefix: list[str], probed: bool, simulated: dict | None = None) -> dict:
    """What the mode adds to machine_info["phasebench"]: the metric and how it was counted. Without `probed` (a
    collection) the pinned CPU capability is not asked for. `simulated` (simulation()): the simulated caches'
    geometry ("caches": {"I1": [size, assoc, line], "D1", "LL"}) and "branch_sim", recorded only where asked for."""
    simulated = simulated or {}
    count = {"bracket": counting.BRACKET, "valgrind": counting.valgrind_version(),
             "glibc": counting.glibc_version(),
             "valgrind_options": [*counting.VALGRIND_OPTIONS,
                                  *counting.simulation_options(simulated.get("caches"), simulated.get("branches"))],
             "pins": dict(counting.PINS),
             "aslr_off": bool(prefix), "cpu_capability": pinned_capability() if probed else None,
             "not_pinned": "glibc's ifunc choices (memcpy, strlen: Valgrind's CPUID, not the machine's) and "
                           "vendor paths chosen at run time outside ATen, oneDNN and MKL's ISA switches"}
    if simulated.get("caches"):
        count["caches"] = {cache: list(simulated["caches"][cache]) for cache in counting.CACHES}
    if simulated.get("branches"):
        count["branch_sim"] = True
    return {"threads": 1, "metric": counting.METRIC, "unit": counting.UNIT, "count": count}


def counting_run(config) -> bool:
    return bool(getattr(config, "phasebench", None) and config.phasebench.count)


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's own, whatever order the plugins were loaded in
def pytest_benchmark_scale_unit(config, unit, benchmarks, best, worst, sort):
    """Under --count the statistics are instructions (1e-9 per instruction): the tables say M instructions."""
    if not counting_run(config):
        return None
    return ("M instruction", 1e3) if unit == "seconds" else ("", 1.0)


@pytest.hookimpl(wrapper=True)
def pytest_report_header(config):
    lines = yield
    if counting_run(config):
        settings = config.phasebench
        count = settings.machine["count"]
        lines = [[f"phasebench: COUNTING instructions under {count['valgrind']} (callgrind), not reading a clock: "
                  f"{settings.rounds} counted rounds after {settings.warmup_rounds} warm-up, 1 thread, pins "
                  f"{' '.join(f'{k}={v}' for k, v in count['pins'].items())}, CPU capability "
                  f"{count['cpu_capability']}, ASLR {'off' if count['aslr_off'] else 'on'}"
                  f"{simulated_text(count)}; the tables' 'time' columns are M instructions"]] + list(lines)
    return lines


def simulated_text(count: dict) -> str:
    """The header's words for the simulations a count ran with (machine_info's count object), or nothing."""
    parts = []
    if count.get("caches"):
        parts.append(f"caches simulated {counting.geometry_label(count['caches'])}")
    if count.get("branch_sim"):
        parts.append("branches simulated")
    return "".join(f", {part}" for part in parts)
