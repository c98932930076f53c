"""The intervention study (docs/method.md#switches-for-the-intervention-study): how much of each network
phase's Python/C++ time ratio each suspected cause accounts for, measured by switching that cause alone.

    python -m lab.studies.interventions OUT_DIR [--pairs N] [--phases forward,backward] [--interventions …]
                                            [--rounds R] [--warmup-rounds W] [--seed S] [--dry-run] [-- PYTEST_ARGS]

Each intervention is N pairs of runs, "baseline" against "switched", each run a child
`pytest -p lab.plugin bench/test_phases.py --benchmark-only --benchmark-json=… -k PHASES --impl python,cpp --device cpu`
(the lab's plugin for the switches --omp-wait-policy and --pins) that
times the phases of the published pair (python, cpp) on cpu in fresh worker processes (one per case: a run's median
is one process's). The two runs of a pair run one after the other, in an order drawn per pair (recorded), and the
pairs of every intervention are interleaved: pair 1 of each intervention, in a shuffled order, then pair 2, and so on,
so that a drift of the machine falls on all of them alike. Both runs of a pair share one --order-seed (the cases'
order inside a run, drawn per pair and recorded), except where the order is the intervention.

The interventions, baseline → switched:
- processes: the same run twice (no switch): the change must be 0, and its spread is the spread of a ratio between
  fresh processes; from it and each language's per-process medians, how many processes a ±3 % interval takes;
- order: each phase's C++ case first → its Python case first (--order-seed values chosen so);
- threads: --threads 2 → --threads 1;
- wait-policy: --omp-wait-policy default → passive (OpenMP's idle threads spin before they sleep, or sleep at once);
- checks: --round-checks on → off (both languages' workers leave the per-round checks out, the C++ library through
  pb_set_round_checks; each run records what each case's worker did, extra_info round_checks);
- pins: --threads 1 → --pins count (the count mode's conditions, which hold one thread too: the change is the pins'
  beyond the thread count, which the threads intervention measures).

What is computed, per intervention and phase: the Python/C++ ratio of medians in every run; the paired change
d_i = ln(ratio switched_i / ratio baseline_i); the effect exp(mean d) − 1 with a 95 % percentile bootstrap interval
over the pairs (the pairs resampled with replacement, RESAMPLES times, seeded). The bootstrap, not Student's t nor
an exact rank interval: a pair's d is the log of a ratio of four per-process medians, whose between-process spread is
heavy-tailed (up to 30 % between fresh processes of one language), and with the tens of pairs the study runs the
percentile interval needs no normality; an exact sign-test interval on the median would be wider and answers
another question (the median of d, not its mean). The percentile interval runs a little short: on synthetic pairs
(40, normal noise) it held the true change in 92 % of 400 studies, and with fewer than about 10 pairs it is too narrow
to trust; the Markdown says how many pairs each interval stands on.

Processes: at a spread s between fresh processes (the log's standard deviation) in each language, a ratio of two
languages' means over n processes each has a standard error of s·√(2/n): a ±h interval at 95 % takes
n = (1.96·√2·s/h)² processes per language (processes_needed): 86 at s = 10 % and h = 3 %. The
default run has one process per language and phase.

Cost: each run starts two workers (torch's import, a few seconds each) and times 2 phases × 2 languages for
--warmup-rounds + --rounds rounds (forward and backward take a few ms a round on 2 cores): expect about 15–30 s a run
on a quiet 2-core machine. The study is interventions × 2 × N runs: the six at N = 80 are 960 runs, about 4–8 hours.
It needs a quiet machine: nothing else running, since the ratio's spread is what it measures. OUT_DIR keeps each
run's result (runs/), its output (logs/) and the schedule (schedule.json): run the same command again and it goes on
from the first run missing; interventions.json and interventions.md are written at the end (and by --summarize alone).
interventions.json is of the format lab/study.py names and checks ("phasebench-interventions",
version 1), which `python -m phasebench.report COUNTED --beside TIMED --interventions OUT_DIR/interventions.json`
reads for its account of each phase's gap between time and instructions (ACCOUNT: how each effect enters it).
Imports no torch.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lab import study as study_format
from lab.paired_stats import CONFIDENCE, RESAMPLES
from lab.studies.intervention_stats import PAIR, markdown, processes_needed, summarize
from phasebench import provenance, schema
from phasebench.repository import ROOT
from phasebench.saved import SavedResult

DEFAULT_PHASES = ("forward", "backward")

# name -> (what it switches, the baseline run's options, the switched run's options); "order" chooses its seeds.
INTERVENTIONS = {
    "processes": ("the same run twice: the spread between fresh processes", [], []),
    "order": ("each phase's C++ case first → its Python case first", [], []),
    "threads": ("--threads 2 → 1", ["--threads", "2"], ["--threads", "1"]),
    "wait-policy": ("OMP_WAIT_POLICY unset (OpenMP's default) → PASSIVE",
                    ["--omp-wait-policy", "default"], ["--omp-wait-policy", "passive"]),
    "checks": ("the per-round checks on → off", ["--round-checks", "on"], ["--round-checks", "off"]),
    "pins": ("one thread without → with the count mode's pins", ["--threads", "1"], ["--pins", "count"]),
}
ORDER_FIRST = {"baseline": "cpp", "switched": "python"}  # the order intervention: which language runs first
# How each effect enters phasebench.report's account (lab/study.py, `account`): name -> (weight, within).
# processes switches nothing (a control: its spread is the timed ratio's own); the order's switch reverses the order
# rather than removing it, and a randomized order's ratio lies midway (½); the wait policy acts on the idle second
# thread, which the threads switch removes too, so its effect is held in the threads switch's (shown, never added
# where the study ran both); the others take their cause away (pins beyond one thread, from the threads switch's
# switched side).
ACCOUNT = {"processes": (0.0, None), "order": (0.5, None), "threads": (1.0, None), "wait-policy": (1.0, "threads"),
           "checks": (1.0, None), "pins": (1.0, None)}


# -- the schedule and the commands ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Planned:
    """One run of the study."""

    intervention: str
    pair: int  # from 1
    arm: str  # "baseline" or "switched"
    position: int  # 0: it ran first of its pair
    order_seed: int

    @property
    def name(self) -> str:
        return f"{self.intervention}-{self.pair:03d}-{self.arm}"


def first_seed(start: int, phases: tuple[str, ...], first: str | None) -> int:
    """The first --order-seed from `start` under which every phase's `first` language runs first (any seed where
    `first` is None): phasebench.plugin.cases.run_order, on cpu and the published workload."""
    if first is None:
        return start
    from phasebench.plugin.cases import run_order

    for seed in range(start, start + 10_000):
        if all(run_order(seed, phase, "cpu", "", list(PAIR), PAIR)[0] == first for phase in phases):
            return seed
    raise ValueError(f"no order seed from {start} puts {first} first in {', '.join(phases)}")


def schedule(interventions: list[str], pairs: int, phases: tuple[str, ...], seed: int) -> list[Planned]:
    """Every run, in the order they run: pair after pair, each pair's interventions in a shuffled order, each pair's
    two runs in a drawn order; a pair's runs share an order seed (the order intervention's are chosen per arm)."""
    rng = random.Random(seed)
    planned = []
    for pair in range(1, pairs + 1):
        for name in rng.sample(interventions, len(interventions)):
            arms = rng.sample(["baseline", "switched"], 2)
            shared = rng.randrange(2**31)
            for position, arm in enumerate(arms):
                order_seed = first_seed(shared, phases, ORDER_FIRST[arm]) if name == "order" else shared
                planned.append(Planned(name, pair, arm, position, order_seed))
    return planned


def keyword(phases: tuple[str, ...]) -> str:
    """pytest's -k for the phases' cases."""
    return " or ".join(phases)


def command(run: Planned, phases: tuple[str, ...], out: Path, rounds: int, warmup_rounds: int,
            pytest_args: list[str] = (), python: str = sys.executable) -> list[str]:
    """The child pytest of one run."""
    baseline, switched = INTERVENTIONS[run.intervention][1:]
    return [python, "-m", "pytest", "bench/test_phases.py", "--benchmark-only", f"--benchmark-json={out}",
            "-k", keyword(phases), "--impl", ",".join(PAIR), "--device", "cpu", "--rounds", str(rounds),
            "--warmup-rounds", str(warmup_rounds), "--order-seed", str(run.order_seed), "-p", "no:cacheprovider",
            "-p", "lab.plugin", *(baseline if run.arm == "baseline" else switched), *pytest_args]


# -- reading the runs ----------------------------------------------------------------------------------------------

def run_medians(result: SavedResult, phases: tuple[str, ...]) -> dict:
    """{phase: {"median": {language: s}, "order": {language: place}, "round_checks": {language: …}, "threads": n}} of
    one run's saved result, read through the project's reader (phasebench.saved)."""
    found: dict[str, dict] = {}
    for case in result.benchmarks:
        info = case.info
        if case.key is None or not isinstance(info, schema.PhaseInfo):
            continue
        phase, impl, device, workload = case.key
        if phase not in phases or impl not in PAIR or device != "cpu" or workload:
            continue
        entry = found.setdefault(phase, {"median": {}, "order": {}, "round_checks": {}, "threads": info.threads})
        entry["median"][impl] = case.median
        entry["order"][impl] = info.order
        entry["round_checks"][impl] = info.round_checks
    return found


# -- the study -----------------------------------------------------------------------------------------------------

def machine() -> dict:
    from phasebench.plugin import machine as facts

    return {"cpu": facts.cpu_model(), "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "torch": facts.torch_build()["torch"]}


def commit() -> str | None:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lab.studies.interventions", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0] + "\n\nEach run is a child pytest of bench/test_phases.py; see the module's "
                    "docstring for the statistics and the cost.",
        epilog="Processes: at a 10 % spread between fresh processes of a language, a ±3 % interval on a ratio takes "
               f"about {processes_needed(0.10)} processes per language (n = (1.96·√2·s/h)²); the processes "
               "intervention measures s. Arguments after -- go to every child pytest (e.g. --mnist-root=PATH).")
    parser.add_argument("out", type=Path, help="the study's folder (runs/, logs/, schedule.json, interventions.json "
                                               "and .md)")
    parser.add_argument("--pairs", type=int, default=80,
                        help="pairs of runs per intervention (default: 80, one process per language and arm each: "
                             "a ±3 %% interval at a 10 %% spread between processes needs about that many)")
    parser.add_argument("--phases", default=",".join(DEFAULT_PHASES), help="phases, comma-separated (default: "
                                                                            "forward,backward)")
    parser.add_argument("--interventions", default=",".join(INTERVENTIONS),
                        help=f"which, comma-separated (default: all: {', '.join(INTERVENTIONS)})")
    parser.add_argument("--rounds", type=int, default=100, help="counted rounds per case (default: 100)")
    parser.add_argument("--warmup-rounds", type=int, default=10, help="warm-up rounds per case (default: 10)")
    parser.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: drawn, recorded)")
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help=f"bootstrap resamples (default: {RESAMPLES})")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a run may take (default: 1800)")
    parser.add_argument("--dry-run", action="store_true", help="print the schedule's commands; run nothing")
    parser.add_argument("--summarize", action="store_true", help="only summarize the runs OUT has")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to every child pytest")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.phases = tuple(p.strip() for p in args.phases.split(",") if p.strip())
    args.interventions = [name.strip() for name in args.interventions.split(",") if name.strip()]
    unknown = [name for name in args.interventions if name not in INTERVENTIONS]
    if unknown or not args.interventions:
        parser.error(f"--interventions: unknown {', '.join(unknown) or '(none given)'}; "
                     f"valid: {', '.join(INTERVENTIONS)}")
    from phasebench.spec import TRAINING_PHASES

    bad = [phase for phase in args.phases if phase not in TRAINING_PHASES]
    if bad or not args.phases:
        parser.error(f"--phases: unknown {', '.join(bad) or '(none given)'}; valid: {', '.join(TRAINING_PHASES)}")
    if args.pairs < 1 or args.rounds < 1 or args.warmup_rounds < 0:
        parser.error("--pairs and --rounds must be at least 1, --warmup-rounds at least 0")
    return args


def settings_of(args: argparse.Namespace) -> dict:
    """What the schedule depends on: a folder's schedule is reused only under the same."""
    return {"pairs": args.pairs, "phases": list(args.phases), "interventions": args.interventions,
            "rounds": args.rounds, "warmup_rounds": args.warmup_rounds, "pytest_args": list(args.pytest_args)}


def load_schedule(out: Path, args: argparse.Namespace, save: bool = True) -> tuple[int, list[Planned]]:
    """OUT/schedule.json's schedule where it was made under these settings (a study going on), else a new one, saved
    there unless `save` is off (a dry run)."""
    path = out / "schedule.json"
    if path.exists():
        saved = json.loads(path.read_text(encoding="utf8"))
        if saved["settings"] != settings_of(args) or (args.seed is not None and saved["seed"] != args.seed):
            raise SystemExit(f"{path} was made with other settings ({saved['settings']}, seed {saved['seed']}): use "
                             f"another folder, or the same settings to go on")
        return saved["seed"], [Planned(**run) for run in saved["runs"]]
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    planned = schedule(args.interventions, args.pairs, args.phases, seed)
    if not save:
        return seed, planned
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"settings": settings_of(args), "seed": seed,
                                "runs": [asdict(run) for run in planned]}, indent=1) + "\n", encoding="utf8")
    return seed, planned


def logged(out: Path) -> dict[str, dict]:
    """OUT/runs.jsonl: each run's command, exit status and seconds as it ran (the last line of a name counts)."""
    path = out / "runs.jsonl"
    lines = path.read_text(encoding="utf8").splitlines() if path.exists() else []
    return {entry["name"]: entry for entry in map(json.loads, filter(None, lines))}


def record(run: Planned, out: Path, phases: tuple[str, ...], log: dict) -> dict:
    """A run as the study's JSON holds it: its plan, how it ran, and its medians (None: no result)."""
    path = out / "runs" / f"{run.name}.json"
    medians = run_medians(SavedResult.read(path, "lab.studies.interventions"), phases) if path.exists() else None
    ran = {key: log.get(key) for key in ("command", "exit", "seconds")}
    return asdict(run) | ran | {"result": str(path.relative_to(out)), "medians": medians}


def main(argv=None) -> int:
    args = parse_args(argv)
    out = args.out.resolve()
    seed, planned = load_schedule(out, args, save=not args.dry_run)
    if args.dry_run:
        for run in planned:
            print(f"{run.name} (position {run.position}): "
                  + shlex.join(command(run, args.phases, out / "runs" / f"{run.name}.json", args.rounds,
                                       args.warmup_rounds, args.pytest_args)))
        return 0
    if not args.summarize:
        run_all(out, args, planned)
    log = logged(out)
    return finish(out, args, seed, [record(run, out, args.phases, log.get(run.name, {})) for run in planned])


def run_all(out: Path, args: argparse.Namespace, planned: list[Planned]) -> None:
    """Every planned run that has no result yet, in order, each logged to OUT/runs.jsonl as it ends."""
    from phasebench.plugin import machine as facts

    facts.probe()  # once: its answer goes to every child in the environment (PHASEBENCH_PROBE)
    (out / "runs").mkdir(exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    todo = [run for run in planned if not (out / "runs" / f"{run.name}.json").exists()]
    started = time.monotonic()
    for index, run in enumerate(todo):
        path = out / "runs" / f"{run.name}.json"
        argv_run = command(run, args.phases, path, args.rounds, args.warmup_rounds, args.pytest_args)
        began = time.monotonic()
        with open(out / "logs" / f"{run.name}.log", "w", encoding="utf8") as log:
            try:
                status = subprocess.run(argv_run, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                        timeout=args.timeout).returncode
            except subprocess.TimeoutExpired:
                status = "timeout"
        seconds = round(time.monotonic() - began, 1)
        if status != 0 and path.exists():
            path.unlink()  # a failed run's partial result is no result
        with open(out / "runs.jsonl", "a", encoding="utf8") as lines:
            lines.write(json.dumps({"name": run.name, "command": shlex.join(argv_run), "exit": status,
                                    "seconds": seconds}) + "\n")
        eta = (time.monotonic() - started) / (index + 1) * (len(todo) - index - 1)
        print(f"[{index + 1}/{len(todo)}] {run.name}: exit {status}, {seconds} s; about {eta / 3600:.1f} h left",
              flush=True)


def account_of(names: list[str]) -> dict[str, dict]:
    """The file's `account` for the interventions run: a `within` names only a switch the study ran."""
    return {name: {"weight": ACCOUNT[name][0], "within": ACCOUNT[name][1] if ACCOUNT[name][1] in names else None}
            for name in names}


def finish(out: Path, args: argparse.Namespace, seed: int, runs: list[dict]) -> int:
    state = provenance.tree_state(ROOT)
    study = study_format.study_file(
        device="cpu", pair=list(PAIR), phases=list(args.phases), confidence=CONFIDENCE,
        interventions=args.interventions, switches={name: INTERVENTIONS[name][0] for name in args.interventions},
        account=account_of(args.interventions), effects=summarize(runs, args.phases, args.resamples),
        commit=commit(), dirty=state["dirty"], sources_hash=state["sources_hash"], machine=machine(),
        command=shlex.join([sys.executable, "-m", "lab.studies.interventions", *args.argv]), seed=seed, pairs=args.pairs,
        rounds=args.rounds, warmup_rounds=args.warmup_rounds, resamples=args.resamples,
        statistic="per pair d = ln(ratio switched / ratio baseline); exp(mean d) - 1 with a 95 % percentile "
                  "bootstrap interval over the pairs", runs=runs)
    study_format.write(out / "interventions.json", study)
    text = markdown(study)
    (out / "interventions.md").write_text(text, encoding="utf8")
    print(text, end="")
    return 1 if any(run["medians"] is None for run in runs) else 0  # a run with no result


if __name__ == "__main__":
    raise SystemExit(main())
