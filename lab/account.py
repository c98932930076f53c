"""The account (docs/results.md#the-account-where-the-gap-between-time-and-instructions-goes),
`python -m lab.account COUNTED --beside TIMED --interventions STUDY`: the report of a counted result beside a timed
one (python -m phasebench.report COUNTED --beside TIMED) followed, per phase, by the Python/C++ time ratio of the timed
result beside the instruction ratio of the counted one, each intervention's effect on
the time ratio with its interval (an intervention study's file, lab.study), and the remainder, labelled
unexplained.

How the remainder is computed, on the log scale (ratios multiply, so causes that act independently add there):
- the gap: g = ln T − ln I, T the timed result's python/cpp ratio of medians, I the counted result's ratio of
  instruction medians: what the time ratio holds beyond Python executing more instructions;
- an intervention k's part of it: c_k = −w_k · ln(1 + e_k), e_k its effect (the change of the ratio from its switch's
  baseline to its switched side; −5 % is −0.05), w_k its weight in the study's file (1: the switch takes the cause
  away; ½: it reverses it, as the order does; 0: a control);
- counted: an effect with w_k > 0, not `within` another switch, of at least MIN_PAIRS pairs, whose interval excludes 0;
  every other effect is shown, and left out of the sum (an interval that holds 0 has not shown a cause);
- the remainder: R = g − Σ counted c_k = ln T − ln I + Σ w_k · ln(1 + e_k), the time ratio with each counted switch
  applied, over the instruction ratio. Printed as exp(R) − 1 (+12.9 %: relative to C++, Python takes 12.9 % longer
  than its instructions and the counted causes say) and as R / g, its share of the gap;
- its interval: R ± √((z·s_T)² + Σ (w_k·h_k)²), z the normal quantile of the study's confidence, h_k the half width of
  effect k's interval on the log scale, (ln(1 + high) − ln(1 + low)) / 2, read as z standard errors (the bootstrap's
  percentile interval, made symmetric), s_T the spread of one run's ratio between fresh processes (the study's control,
  its ratio_spread_log) over √(the timed result's processes): T is one run, and which processes it drew moves it as
  much as a cause does. The terms are taken as independent (each intervention's pairs are runs of their own). The
  counts' own spread (tenths of a percent, docs/instruction-counts.md) is left out. Without a control the interval
  holds the effects' uncertainty alone, and says so; with neither, there is none. A control counts, as an effect
  does, from MIN_PAIRS pairs.

The effects are measured one at a time, each from its own baseline (pins from one thread, the threads switch's
switched side), and need not add: two causes can overlap or interact, which the sum does not see. They are changes of
the study's ratio, applied to the timed result's: the account holds for a timed run under the study's baselines
(the default run's threads, checks on, OpenMP's default wait policy), which its notes name.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from lab.closing import closing_table
from lab.study import Effect, Study, read
from phasebench import schema
from phasebench.report import cli
from phasebench.report.cases import PHASES
from phasebench.report.counts import median_count
from phasebench.report.tables import Table
from phasebench.results import find_result, switched, switched_text
from phasebench.saved import SavedResult

PROG = "lab.account"
MIN_PAIRS = 10  # below it a percentile bootstrap interval runs too narrow to trust (lab/studies/interventions.py)


# Whether a timed run already stands where a switch's switched side puts it: its cause is absent from that run, and
# the switch's effect is no part of its gap (the study's names for the switches, lab/studies/interventions.py).
ALREADY_SWITCHED = {
    "checks": lambda machine: machine.round_checks == "off",
    "threads": lambda machine: machine.threads == 1,
    "wait-policy": lambda machine: machine.omp_wait_policy == "passive",
    "pins": lambda machine: bool(machine.pins),
}


def absent_causes(machine: schema.MachineInfo) -> frozenset[str]:
    """The study's switches whose switched side the timed run already has."""
    return frozenset(name for name, test in ALREADY_SWITCHED.items() if test(machine))


def status(effect: Effect, absent: frozenset[str] = frozenset()) -> str:
    """Whether an effect enters the account, and if not why, in a few words."""
    if effect.intervention in absent:
        return "the timed run has it switched already: shown, not added"
    if effect.weight == 0:
        return "a control: switches no cause"
    if effect.within:
        return f"within {effect.within}: shown, not added"
    if effect.change is None:
        return f"not measured ({effect.pairs} pair{'s' * (effect.pairs != 1)})"
    if effect.pairs < MIN_PAIRS:
        return f"left out: {effect.pairs} pairs, its interval needs {MIN_PAIRS}"
    if not effect.excludes_zero:
        return "left out: its interval holds 0"
    return "counted" if effect.weight == 1 else f"counted, weight {effect.weight:g}"


def counted(effect: Effect, absent: frozenset[str] = frozenset()) -> bool:
    return status(effect, absent).startswith("counted")


def part(effect: Effect) -> float:
    """c_k: the part of the gap (log scale) an effect's cause makes of a run at its baseline."""
    return -effect.weight * math.log1p(effect.change)


def half_width(effect: Effect) -> float:
    return (math.log1p(effect.high) - math.log1p(effect.low)) / 2


@dataclass
class Account:
    phase: str
    time_ratio: float
    instruction_ratio: float
    effects: list[Effect]
    remainder: float  # R, log scale
    half: float | None  # the remainder's interval's half width, log scale; None where none can be formed
    spread_log: float | None  # s_T, where the study has a control
    absent: frozenset[str] = frozenset()  # switches the timed run already has switched (absent_causes)

    @property
    def gap(self) -> float:
        return math.log(self.time_ratio / self.instruction_ratio)

    @property
    def accounted(self) -> float:
        return self.gap - self.remainder

    @property
    def share(self) -> float | None:
        return self.remainder / self.gap if self.gap else None

    def bounds(self) -> tuple[float | None, float | None]:
        if self.half is None:
            return None, None
        return math.expm1(self.remainder - self.half), math.expm1(self.remainder + self.half)


def account_of(phase: str, time_ratio: float, instruction_ratio: float, effects: list[Effect],
               confidence: float = 0.95, processes: int = 1, absent: frozenset[str] = frozenset()) -> Account:
    """The account of one phase (the module's docstring defines each figure); `absent`: the switches whose switched
    side the timed run already has (absent_causes), whose effects are shown and not added."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    kept = [effect for effect in effects if counted(effect, absent)]
    remainder = math.log(time_ratio / instruction_ratio) - sum(part(effect) for effect in kept)
    spreads = [effect.ratio_spread_log for effect in effects
               if effect.weight == 0 and effect.ratio_spread_log and effect.pairs >= MIN_PAIRS]
    spread = spreads[0] / math.sqrt(max(processes, 1)) if spreads else None
    terms = [(effect.weight * half_width(effect)) ** 2 for effect in kept] + ([(z * spread) ** 2] if spread else [])
    return Account(phase, time_ratio, instruction_ratio, effects, remainder, math.sqrt(sum(terms)) if terms else None,
                   spread, absent)


def time_ratio(cases: dict, phase: str, device: str, pair: tuple[str, str]) -> float | None:
    medians = [case.median if case else None for case in (cases.get((phase, impl, device, "")) for impl in pair)]
    return medians[0] / medians[1] if None not in medians and medians[1] else None


def instruction_ratio(cases: dict, phase: str, device: str, pair: tuple[str, str]) -> float | None:
    counts = [median_count(cases, phase, impl, device) for impl in pair]
    return counts[0] / counts[1] if None not in counts and counts[1] else None


def accounts(counted_cases: dict, timed: SavedResult, study: Study, device: str) -> list[Account]:
    """The account of every phase the three inputs all hold, in the suite's phase order."""
    timed_cases, machine = timed.cases, timed.machine
    processes, absent = machine.processes or 1, absent_causes(machine)
    found = []
    for phase in PHASES:
        effects = study.effects.get(phase.name)
        ratios = (time_ratio(timed_cases, phase.name, device, study.pair),
                  instruction_ratio(counted_cases, phase.name, device, study.pair))
        if device == study.device and effects and None not in ratios:
            found.append(account_of(phase.name, *ratios, effects, study.confidence, processes, absent))
    return found


def _pct(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def account_tables(counted_cases: dict, timed: SavedResult, study: Study, device: str) -> list[Table]:
    """The account per phase, each intervention's effect, and what each setting does to each language (what closes
    the gap); empty where the study did not time on `device`."""
    if device != study.device:
        return []
    level = f"{study.confidence * 100:g} %"
    name = "/".join(study.pair)
    found = accounts(counted_cases, timed, study, device)
    summary = Table(f"The account on {device}: {name} in time beside instructions, what of the gap the "
                    f"interventions account for ({study.path.name if study.path else 'the study'}), and what remains",
                    [("Phase", ""), ("time", ".3f"), ("instructions", ".3f"), ("gap: time / instructions (%)", "+.1f"),
                     ("accounted for (%)", "+.1f"), ("unexplained (%)", "+.1f"), (f"unexplained {level} low (%)", "+.1f"),
                     (f"unexplained {level} high (%)", "+.1f"), ("unexplained share of the gap (%)", ".0f")])
    each = Table(f"Each intervention's effect on the {name} time ratio on {device}, measured one at a time "
                 f"({level} intervals)",
                 [("Phase", ""), ("intervention", ""), ("switch", ""), ("pairs", "d"), ("effect (%)", "+.1f"),
                  ("low (%)", "+.1f"), ("high (%)", "+.1f"), ("its part of the gap (%)", "+.1f"),
                  ("in the account", "")])
    for account in found:
        low, high = account.bounds()
        summary.rows.append([account.phase, account.time_ratio, account.instruction_ratio, _pct(math.expm1(account.gap)),
                             _pct(math.expm1(account.accounted)), _pct(math.expm1(account.remainder)), _pct(low),
                             _pct(high), _pct(account.share)])
        for effect in account.effects:
            each.rows.append([account.phase, effect.intervention, effect.switch, effect.pairs, _pct(effect.change),
                              _pct(effect.low), _pct(effect.high),
                              _pct(math.expm1(part(effect))) if counted(effect, account.absent) else None,
                              status(effect, account.absent)])
    summary.notes = _notes(found, study, timed, device)
    return [summary, each, closing_table(study)]


def _notes(found: list[Account], study: Study, timed: SavedResult, device: str) -> list[str]:
    if not found:
        return [f"No phase is in all three inputs: the study measured {', '.join(study.phases)} on {study.device}, "
                f"and the timed and the counted result must each hold both of {' and '.join(study.pair)} there"]
    notes = ["unexplained: the time ratio with each counted switch applied, over the instruction ratio; on the log "
             "scale ln(time) − ln(instructions) + Σ weight · ln(1 + effect) over the counted effects, so that "
             "(1 + gap) = (1 + accounted for) · (1 + unexplained) (lab/account.py). The effects are "
             "measured one at a time, each from its own baseline, and need not add"]
    without = [account.phase for account in found if account.spread_log is None]
    with_spread = [f"{account.phase} {account.spread_log * 100:.1f} %" for account in found if account.spread_log]
    if with_spread:
        notes.append("The unexplained part's interval combines the counted effects' intervals with the spread of the "
                     "timed ratio between fresh processes (the study's control: " + ", ".join(with_spread) + ")")
    if without:
        notes.append(f"{', '.join(without)}: the interval holds the counted effects' uncertainty alone (the study has "
                     f"no control of {MIN_PAIRS} pairs or more measuring the spread between processes); with no "
                     f"counted effect there is none")
    machine = timed.machine
    notes.append(f"The effects are changes from each switch's baseline; the timed result ran with "
                 f"{machine.threads if machine.threads is not None else '?'} intra-op thread(s) and "
                 f"{switched_text(switched(machine))}")
    study_cpu = (study.machine or {}).get("cpu")
    if study_cpu and machine.cpu and study_cpu != machine.cpu:
        notes.append(f"The study timed on {study_cpu}, the timed result on {machine.cpu}: the effects are the "
                     f"study's machine's")
    return notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.account", description=__doc__.split("\n\n")[0])
    parser.add_argument("counted", metavar="COUNTED",
                        help="a counted result (--count instructions): a saved JSON file, a run number or a name in "
                             "--storage, as python -m phasebench.report takes it")
    parser.add_argument("--beside", metavar="TIMED", required=True,
                        help="a timed result of the same tree, whose python/cpp time ratios are set beside the "
                             "instruction ratios")
    parser.add_argument("--interventions", metavar="STUDY", type=Path, required=True,
                        help="an intervention study's interventions.json (python -m lab.studies.interventions): each "
                             "intervention's effect, and what of each phase's gap remains unexplained")
    cli.add_output_options(parser)
    args = parser.parse_args(argv)
    beside = SavedResult.read(find_result(args.beside, args.storage, PROG), PROG)
    if beside.counted:
        raise SystemExit(f"lab.account: {args.beside}: holds instruction counts; --beside takes a timed result")
    path = find_result(args.counted, args.storage, PROG)
    result = SavedResult.read(path, PROG)
    if not result.counted:
        raise SystemExit(f"lab.account: {path}: holds times; COUNTED is a counted result (--count instructions) and "
                         f"--beside the timed one")
    study = read(args.interventions)
    text, notes = cli.render(path, result, args.format, beside,
                             lambda every, timed, device: account_tables(every, timed, study, device))
    cli.write_outputs(path, result, text, notes, args.out, args.format, PROG)
    return 0


if __name__ == "__main__":
    sys.exit(main())
