"""What the gates' options take: a percentage (--phase-ratio-fail, --threshold), and the test-only knob that
slows one phase on purpose to prove that the gates fail (PHASEBENCH_TEST_SLOW_PHASE; docs/gating.md#baselines-and-ci-gating)."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

SLOW_PHASE_ENV = "PHASEBENCH_TEST_SLOW_PHASE"
_NS_PER_UNIT = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_SLOW_PHASE = re.compile(r"^(?:(?P<impl>[\w-]+)/)?(?P<phase>\w+):(?P<amount>\d+(?:\.\d+)?)(?P<unit>ns|us|ms|s|%|work)$")


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
        """The trainer options that carry the knob (Trainer kwargs, pb_options) for a worker of `impl`."""
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


def parse_percent(text: str) -> int:
    """--phase-ratio-fail's and --threshold's value: a whole percentage, as pytest-benchmark's median:X% takes it."""
    match = re.fullmatch(r"(\d+)%", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 20%, got {text!r}")
    return int(match[1])
