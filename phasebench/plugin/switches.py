"""The switches of a timed run's conditions (docs/method.md#switches-for-the-intervention-study): each changes one
condition of the timed rounds, alike in both languages' workers, and every saved result records where each stood
(machine_info["phasebench"]: round_checks, omp_wait_policy, pins), so that results of different settings are never
compared unknowingly (phasebench/results.py's mismatch refuses them; a time series is keyed on a switch that is not
at its default, phasebench/history/points.py).

- --round-checks on|off: whether each test_phase round computes, in its worker, what proves its work (the product,
  what it is checked against, the leftovers' weak references) and pytest checks it. The test command
  (--benchmark-disable) and the count mode always check; a timed run does not unless asked (on), since the checks
  run between the clocks and change the Python/C++ ratio they sit between (docs/method.md#the-per-round-checks).
  Off leaves them out of both languages' rounds (the C++ worker turns its session's checks off through
  pb_set_round_checks) and nothing is checked; each case records what its worker did (extra_info round_checks).
- --omp-wait-policy passive|active|default: OMP_WAIT_POLICY in the workers' environment (default: none there,
  OpenMP's own policy); not given, the workers inherit the pytest process's (the test command sets PASSIVE).
- --pins none|count: count times under the instruction-count mode's conditions (PINS_APPLIED; NOT_APPLIED says
  what of that mode a timed run cannot have).

The product's commands use --round-checks, which this plugin adds; --omp-wait-policy and --pins exist for the
intervention study alone, and the lab's plugin adds them (`-p lab.plugin`, lab/plugin.py). This module resolves and
records all three, each at its default where its option is not there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from phasebench.worker import counting
from phasebench.worker.client import Conditions

ROUND_CHECKS = ("on", "off")
OMP_WAIT_POLICIES = ("passive", "active", "default")
PINS = ("none", "count")
OMP_ENV = "OMP_WAIT_POLICY"
# What --pins count gives the timed workers, as the count mode gives its own (phasebench/worker/counting.py PINS,
# phasebench/worker/count_server.py).
PINS_APPLIED = {
    "threads": "one intra-op thread (--threads 1), as the count mode runs",
    "gc": "Python's cyclic GC collected, frozen and disabled once the trainer is built, a collection before each "
          "round (both workers: the C++ worker's host interpreter too)",
    "type_cache": "the Python worker's type attribute cache emptied just before each timed body, outside its clock",
}
NOT_APPLIED = ("Valgrind's own machine: its synthetic CPU (glibc's ifunc choices such as memcpy's follow its CPUID, "
               "not the machine's), its one-thread-at-a-time scheduling, its instrumentation; the count bracket in "
               "place of the clock; the mode's own rounds (1 warm-up, 3 counted)")


def pytest_addoption(parser):
    group = parser.getgroup("phasebench")
    group.addoption("--round-checks", default=None, metavar="on|off",
                    help="whether each test_phase round computes and checks what proves its work, between its clocks "
                         "(default: off in a timed run, on under --benchmark-disable and --count, where off is "
                         "refused; docs/method.md#the-per-round-checks)")


@dataclass(frozen=True)
class Switches:
    """What the switches resolved to; the defaults are a run without them."""

    round_checks: str = "on"  # parse() gives a timed run "off"
    omp_wait_policy: str | None = None  # None: not given, the workers inherit the environment's
    pins: str = "none"

    @property
    def checks(self) -> bool:
        return self.round_checks == "on"

    @property
    def pinned(self) -> bool:
        return self.pins == "count"


def _choice(value: str | None, option: str, valid: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if value not in valid:
        raise ValueError(f"{option} {value!r}: valid values are {', '.join(valid)}")
    return value


def default_checks(count: str | None = None, disabled: bool = False) -> str:
    """A run's round checks when --round-checks is not given: on where a run checks (the test command, the count
    mode), off where it times."""
    return "on" if disabled or count else "off"


def _given(option, name: str) -> str | None:
    """An option's value, None where the option is not there (the lab's switches without `-p lab.plugin`)."""
    try:
        return option(name)
    except ValueError:  # config.getoption's "no option named"
        return None


def parse(option, threads: int = 0, count: str | None = None, disabled: bool = False) -> Switches:
    """The switches from config.getoption (`option`); ValueError in one line for a malformed value or a combination
    that cannot mean what it says: `threads` (--threads as given, 0 for none), `count` (--count), `disabled`
    (--benchmark-disable, the test command)."""
    checks = _choice(option("round_checks"), "--round-checks", ROUND_CHECKS) or default_checks(count, disabled)
    policy = _choice(_given(option, "omp_wait_policy"), "--omp-wait-policy", OMP_WAIT_POLICIES)
    pins = _choice(_given(option, "pins"), "--pins", PINS) or "none"
    if checks == "off" and disabled:
        raise ValueError("--round-checks off is for timed runs: under --benchmark-disable (the test command) every "
                         "case runs to check its rounds")
    if checks == "off" and count:
        raise ValueError("--round-checks off is for timed runs: the count mode's rounds keep their checks")
    if pins == "count" and count:
        raise ValueError("--pins count times under the count mode's conditions: --count instructions has them "
                         "already")
    if pins == "count" and threads not in (0, 1):
        raise ValueError(f"--pins count times on the count mode's one intra-op thread: leave out --threads {threads} "
                         f"or give 1")
    return Switches(checks, policy, pins)


def conditions(switches: Switches, aslr_prefix: list[str] | tuple = ()) -> Conditions | None:
    """What the timed workers run under (phasebench.worker.client.Conditions), or None where no switch asks for
    anything: the environment's pins and OMP_WAIT_POLICY, ASLR off (`aslr_prefix`, counting.aslr_off()'s) and the
    worker's own part of --pins count."""
    environment = dict(counting.PINS) if switches.pinned else {}
    if switches.omp_wait_policy is not None:
        environment[OMP_ENV] = None if switches.omp_wait_policy == "default" else switches.omp_wait_policy.upper()
    if not environment and not switches.pinned:
        return None
    return Conditions(environment, tuple(aslr_prefix) if switches.pinned else (), "count" if switches.pinned else None)


def wait_policy(switches: Switches, environ=None) -> str:
    """The OMP_WAIT_POLICY the timed workers run with, lower case: the switch's, else the environment's, "default"
    where none is set."""
    if switches.omp_wait_policy is not None:
        return switches.omp_wait_policy
    value = (os.environ if environ is None else environ).get(OMP_ENV)
    return value.strip().lower() if value and value.strip() else "default"


def machine_info(switches: Switches, aslr_prefix: list[str] | tuple = (), capability: str | None = None,
                 environ=None) -> dict:
    """What machine_info["phasebench"] records of the switches (phasebench/schema.py MachineInfo): round_checks,
    omp_wait_policy, and pins (None without --pins count; with it, what the workers ran under and what they could
    not have). `capability`: the CPU capability a process under the pins dispatches to, where it was asked."""
    pins = None
    if switches.pinned:
        pins = {"conditions": "count", "env": dict(counting.PINS), "aslr_off": bool(aslr_prefix)} | PINS_APPLIED | {
            "cpu_capability": capability, "not_applied": NOT_APPLIED}
    return {"round_checks": switches.round_checks, "omp_wait_policy": wait_policy(switches, environ), "pins": pins}


def header(switches: Switches, environ=None, count: str | None = None, disabled: bool = False) -> str | None:
    """The header's line for the switches a run changed from its mode's defaults (default_checks), or None for a
    run that changed none."""
    parts = []
    if switches.round_checks != default_checks(count, disabled):
        parts.append("round checks on (each round's work is proven between its clocks)" if switches.checks
                     else "round checks off (no round's work is proven)")
    if switches.omp_wait_policy is not None:
        parts.append(f"OMP_WAIT_POLICY {wait_policy(switches, environ)} in the workers")
    if switches.pinned:
        parts.append("timed under the count mode's pins (--pins count)")
    return f"phasebench: switches: {'; '.join(parts)}" if parts else None
