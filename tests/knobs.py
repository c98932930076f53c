"""The tests' knobs, as a pytest plugin of their own (`-p tests.knobs`, or `-ptests.knobs` in PYTEST_ADDOPTS): a
run that loads it runs its workers as the testing worker (tests/knobs_worker.py), which adds the knobs to
phasebench's worker, and records what it changed in machine_info, so that such a run never passes as a real one.

- PHASEBENCH_TEST_SLOW_PHASE=[IMPL/]PHASE:DURATION slows one phase on purpose, to prove that the gates fail
  (docs/gating.md#baselines-and-ci-gating); where it slows a C++ implementation, the workers load the testing build
  of the library (phasebench/worker/build.py's variant "testing"), which holds the knob.
- PHASEBENCH_TEST_FAULT=[IMPL[@RANK]/]PHASE:KIND[,...] makes a worker die or hang on the phases named
  (docs/faults.md#faults-and-bad-input); the testing worker also answers a `fault` request.
- PHASEBENCH_TEST_FAIL_CHECK=[IMPL/]PHASE:WHEN[,...] fails the named cases after their timing, as a check of
  what the rounds did would: WHEN `call` fails the test's body once it returned, `teardown` its teardown. Such a
  case is no result (phasebench/plugin/__init__.py's pytest_runtest_makereport).

All are read and checked here, once, before the first test: a typo is a usage error, not a run that slows nothing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import pytest

SLOW_PHASE_ENV = "PHASEBENCH_TEST_SLOW_PHASE"
FAULT_ENV = "PHASEBENCH_TEST_FAULT"
FAIL_CHECK_ENV = "PHASEBENCH_TEST_FAIL_CHECK"
FAIL_CHECK_WHEN = ("call", "teardown")
WORKER_MODULE = "tests.knobs_worker"
FAULT_KINDS = ("segfault", "abort", "kill", "hang")
_NS_PER_UNIT = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_SLOW_PHASE = re.compile(r"^(?:(?P<impl>[\w-]+)/)?(?P<phase>\w+):(?P<amount>\d+(?:\.\d+)?)(?P<unit>ns|us|ms|s|%|work)$")
_FAULT = re.compile(r"^(?:(?P<impl>[\w-]*)(?:@(?P<rank>\d+))?/)?(?P<phase>\w+):(?P<kind>\w+)$")


@dataclass(frozen=True)
class SlowPhase:
    """PHASEBENCH_TEST_SLOW_PHASE=[IMPL/]PHASE:DURATION: the phase busy-waits DURATION inside its timed body;
    with a percentage (forward:20%), that share of the time its body just took, round by round; with `work`
    (forward:40000work) that many iterations of a fixed loop, no clock read: the same added instructions every round,
    the instruction-count gate's injected regression (docs/instruction-counts.md)."""

    text: str
    phase: str
    ns: int
    impl: str | None  # None: every implementation
    fraction: float = 0.0  # a percentage over 100; ns is then 0
    work: int = 0  # iterations of deterministic work; ns is then 0

    def trainer_options(self, impl: str | None) -> dict:
        """The knob for a worker of `impl` as the testing worker applies it (tests/knobs_worker.py's slow_down);
        {} where it does not apply."""
        if self.impl is not None and self.impl != impl:
            return {}
        if self.work:
            return {"slow_phase": self.phase, "slow_work": self.work}
        if self.fraction:
            return {"slow_phase": self.phase, "slow_fraction": self.fraction}
        return {"slow_phase": self.phase, "slow_ns": self.ns}


def parse_slow_phase(text: str, phases, impls) -> SlowPhase:
    match = _SLOW_PHASE.match(text.strip())
    if not match:
        raise ValueError(f"{SLOW_PHASE_ENV}={text!r}: expected [IMPL/]PHASE:DURATION, e.g. forward:5ms, "
                         f"python/loss:20ms python/forward:20% or cpp/backward:40000work (units ns, us, ms, s, % of the body's time, "
                         f"or work: iterations of a fixed loop)")
    impl, phase = match["impl"], match["phase"]
    if impl is not None and impl not in impls:
        raise ValueError(f"{SLOW_PHASE_ENV}={text!r}: unknown implementation '{impl}' ({', '.join(impls)})")
    if phase not in phases:
        raise ValueError(f"{SLOW_PHASE_ENV}={text!r}: unknown phase '{phase}' ({', '.join(phases)})")
    if match["unit"] == "work":
        return SlowPhase(text.strip(), phase, 0, impl, work=int(float(match["amount"])))
    if match["unit"] == "%":
        return SlowPhase(text.strip(), phase, 0, impl, float(match["amount"]) / 100)
    ns = round(float(match["amount"]) * _NS_PER_UNIT[match["unit"]])
    return SlowPhase(text.strip(), phase, ns, impl)


def parse_faults(text: str, impls) -> list[tuple[str, str | None, str, str]]:
    """PHASEBENCH_TEST_FAULT's items as (implementation or "", rank or None, phase, kind); ValueError says what is
    wrong with one. The phase is not checked: a fault on a phase a worker never runs is never triggered."""
    faults = []
    for item in filter(None, text.split(",")):
        match = _FAULT.match(item.strip())
        if not match:
            raise ValueError(f"{FAULT_ENV}={text!r}: '{item}': expected [IMPL[@RANK]/]PHASE:KIND, e.g. cpp/loss:abort "
                             f"or python@1/grad_sync:kill")
        if match["kind"] not in FAULT_KINDS:
            raise ValueError(f"{FAULT_ENV}={text!r}: unknown fault '{match['kind']}' ({', '.join(FAULT_KINDS)})")
        if match["impl"] and match["impl"] not in impls:
            raise ValueError(f"{FAULT_ENV}={text!r}: unknown implementation '{match['impl']}' ({', '.join(impls)})")
        faults.append((match["impl"] or "", match["rank"], match["phase"], match["kind"]))
    return faults


def faults_for(text: str, impl: str, rank: int | None = None) -> dict[str, str]:
    """PHASEBENCH_TEST_FAULT as {phase: kind} for a worker of `impl` (and, once it joined a process group, of that
    rank): lets one suite run show what a faulty case does to the others."""
    faults = {}
    for item in filter(None, text.split(",")):
        target, _, kind = item.partition(":")
        only, _, phase = target.rpartition("/")
        only_impl, at, only_rank = only.partition("@")
        if only_impl in ("", impl) and (not at or (rank is not None and only_rank == str(rank))):
            faults[phase] = kind
    return faults


def parse_fail_checks(text: str, phases, impls) -> list[tuple[str | None, str, str]]:
    """PHASEBENCH_TEST_FAIL_CHECK's items as (implementation or None, phase, when); ValueError says what is wrong
    with one."""
    checks = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        target, _, when = item.rpartition(":")
        impl, _, phase = target.rpartition("/")
        if not phase or when not in FAIL_CHECK_WHEN:
            raise ValueError(f"{FAIL_CHECK_ENV}={text!r}: '{item}': expected [IMPL/]PHASE:WHEN, WHEN "
                             f"{' or '.join(FAIL_CHECK_WHEN)}, e.g. cpp/forward:call")
        if impl and impl not in impls:
            raise ValueError(f"{FAIL_CHECK_ENV}={text!r}: unknown implementation '{impl}' ({', '.join(impls)})")
        if phase not in phases:
            raise ValueError(f"{FAIL_CHECK_ENV}={text!r}: unknown phase '{phase}' ({', '.join(phases)})")
        checks.append((impl or None, phase, when))
    return checks


_FAIL_CHECKS = pytest.StashKey[list]()


def _fail_check(item, when: str) -> None:
    """The knob's failure for a case it names, once the case's benchmark recorded its phase: after the timing."""
    benchmark = (getattr(item, "funcargs", None) or {}).get("benchmark")
    info = getattr(benchmark, "extra_info", None) or {}
    for impl, phase, at in item.config.stash.get(_FAIL_CHECKS, []):
        if at == when and info.get("phase") == phase and impl in (None, info.get("implementation")):
            raise AssertionError(f"{FAIL_CHECK_ENV}: {info.get('implementation')}/{phase} fails its check after the "
                                 f"timing ({when})")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    _fail_check(item, "call")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    result = yield
    _fail_check(item, "teardown")
    return result


@pytest.hookimpl(trylast=True)  # after phasebench's plugin made config.phasebench
def pytest_configure(config):
    settings = getattr(config, "phasebench", None)
    from phasebench.registry import NAMES
    from phasebench.spec import TRAINING_PHASES

    slow, fault = os.environ.get(SLOW_PHASE_ENV) or None, os.environ.get(FAULT_ENV) or None
    fail_check = os.environ.get(FAIL_CHECK_ENV) or None
    try:
        knob = parse_slow_phase(slow, TRAINING_PHASES, NAMES) if slow else None
        parse_faults(fault or "", NAMES)
        config.stash[_FAIL_CHECKS] = parse_fail_checks(fail_check or "", TRAINING_PHASES, NAMES)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    if settings is None:  # --help, --version: no session
        return
    settings.worker_module = WORKER_MODULE
    # The testing build holds the C++ slow knob; without one for a C++ implementation, the production library.
    from phasebench import registry

    slows_cpp = knob is not None and (knob.impl is None or registry.get(knob.impl).language == "cpp")
    settings.library_variant = "testing" if slows_cpp else "production"
    settings.testing = {"slow_phase": knob.text if knob else None, "fault": fault} | (
        {"fail_check": fail_check} if fail_check else {})
