"""Run a program's trainers step by step, outside any worker, and print what they did as one JSON line: the
equivalence tests' subprocess (tests/test_regression_equivalence.py, tests/test_dcgan_equivalence.py), since the pytest process never imports torch.

    python -m phasebench.worker.program_steps regression --steps 60 --run python --run cpp --run python:update=sgd

Each --run is a language, optionally with trainer options (`python:update=sgd`) and two of its own (`steps=N`
instead of --steps, `phases=0` for no --phases); every run builds its trainer afresh from the seed, in this process,
one after another. Every value that could differ by a bit is written exactly: the
parameters after the first step as the base64 of their float32 bytes, the initial and final ones as the SHA-256 of
those bytes (a model's million parameters three times a run would be tens of megabytes), the losses as float.hex
(float32 values, exact in a double), each step's batch as the SHA-256 of its float32 values (`batch()`'s two lists).
--phases runs one round of each named phase on another fresh trainer and records its product, or the error a phase
the program lacks gives.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import struct
import sys

from phasebench.programs import LANGUAGES, PROGRAMS, program
from phasebench.worker import build, cpp_lib


def parse_run(text: str) -> tuple[str, dict]:
    """'python:update=sgd,threads=1' -> ('python', {'update': 'sgd', 'threads': 1})."""
    language, _, rest = text.partition(":")
    if language not in LANGUAGES:
        raise ValueError(f"--run {text!r}: unknown language '{language}' ({', '.join(LANGUAGES)})")
    options = {}
    for pair in filter(None, rest.split(",")):
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise ValueError(f"--run {text!r}: options are key=value, comma-separated")
        options[key] = int(value) if value.lstrip("-").isdigit() else value
    return language, options


def exact(values) -> list[str]:
    return [float(value).hex() for value in values]


def packed(values) -> str:
    """float32 values as the base64 of their little-endian bytes: exact, and compact for a model's million
    parameters."""
    values = list(values)
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def float32_digest(values) -> str:
    """SHA-256 of float32 values' little-endian bytes."""
    values = list(values)
    return hashlib.sha256(struct.pack(f"<{len(values)}f", *values)).hexdigest()


def batch_digest(features, targets) -> str:
    """SHA-256 of a batch's float32 features, then targets."""
    return float32_digest(list(features) + list(targets))


def make_trainer(name: str, language: str, options: dict, library=None):
    """A fresh trainer of the program in that language; a C++ one takes the loaded library first."""
    trainer_class = program(name).step_trainer(language)
    return trainer_class(library, **options) if language == "cpp" else trainer_class(**options)


def record_run(name: str, language: str, options: dict, steps: int, phases: list[str], library=None) -> dict:
    trainer = make_trainer(name, language, options, library)
    initial, losses, batches, after_first = trainer.parameters(), [], [], None
    for step in range(steps):
        losses += trainer.train_steps(1)
        batches.append(batch_digest(*trainer.batch()))
        if step == 0:
            after_first = trainer.parameters()
    run = {"language": language, "options": options, "phase_names": trainer.phase_names(), "initial": float32_digest(initial),
           "after_first": packed(after_first or []), "losses": exact(losses), "batches": batches,
           "final": float32_digest(trainer.parameters()), "last_loss": trainer.last_loss()}
    if phases:
        fresh, products = make_trainer(name, language, options, library), {}
        for phase in phases:
            try:
                products[phase] = fresh.run_phase(phase).product
            except (ValueError, cpp_lib.CppError) as error:
                products[phase] = {"error": str(error)}
        run["phases"] = products
    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("program", choices=[name for name, known in PROGRAMS.items() if known.step_trainers])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--run", action="append", default=[], metavar="LANGUAGE[:KEY=VALUE,...]",
                        help="a trainer to run (repeatable; default: one of each language)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--library", help="the C++ library to load (default: the production build, built if need be)")
    parser.add_argument("--phases", default="", help="comma-separated phases to run one round of each, on a fresh "
                                                     "trainer of each run")
    args = parser.parse_args(argv)
    if args.steps < 0:
        parser.error(f"--steps {args.steps}: 0 or more")
    try:
        runs = [parse_run(text) for text in args.run or LANGUAGES]
    except ValueError as error:
        parser.error(str(error))
    library = None
    if any(language == "cpp" for language, _ in runs):
        library = cpp_lib.load(args.library or str(build.library_path()))
    phases = [phase for phase in args.phases.split(",") if phase]
    result = {"program": args.program, "steps": args.steps, "runs": {}}
    for text, (language, options) in zip(args.run or LANGUAGES, runs):
        options = {"seed": args.seed, "device": args.device} | options
        # A run's own step count and phases (steps=N, phases=0 for none), this module's options, not its trainer's.
        steps, own_phases = options.pop("steps", args.steps), phases if options.pop("phases", 1) else []
        result["runs"][text] = record_run(args.program, language, options, steps, own_phases, library)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
