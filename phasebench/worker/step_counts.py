"""Arithmetic and operations per training step, counted in both languages for every program: the axis on which a
program's Python/C++ ratio is read
(docs/results.md#the-programs-from-all-overhead-to-all-arithmetic).

    python -m phasebench.worker.step_counts [--program NAME,...] [--steps 10] [--json FILE]

Each program's trainer of each language trains WARMUP_STEPS steps, then `--steps` steps counted by two of torch's
dispatch modes at once, in this process (the C++ library loaded through ctypes dispatches into the same torch, so
the modes see its operations as they see Python's):
- FLOPs: torch.utils.flop_counter.FlopCounterMode, which counts the matrix multiplications and convolutions (forward
  and backward), the arithmetic that grows with a model; elementwise operations count zero there;
- dispatched operations: every call that reaches torch's kernels below autograd, as a TorchDispatchMode sees it
  (views, detach and reading a scalar included), each by its operator.
Each count is divided by the steps. A whole step is counted, its data included, as the training run times it.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

from phasebench.programs import LANGUAGES, PROGRAMS, parse
from phasebench.worker import build, cpp_lib, program_steps

WARMUP_STEPS = 3  # a trainer's first steps allocate what later steps reuse; none is counted


def make_trainer(program, language: str, options: dict, library, mnist_root: str):
    """A fresh trainer of `program` in `language`: a program's step trainer, or the seed program's trainers as the
    worker builds them (phasebench/worker/server.py)."""
    if program.step_trainers:
        return program_steps.make_trainer(program.name, language, options, library)
    if language == "cpp":
        return cpp_lib.CppTrainer(library, mnist_root, **options)
    from phasebench.train.trainer import Trainer

    return Trainer(mnist_root, **options)


def counted_steps(trainer, steps: int) -> dict:
    """FLOPs and dispatched operations per step over `steps` steps of `trainer`, after its warm-up."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class DispatchedOperations(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    trainer.train_steps(WARMUP_STEPS)
    with FlopCounterMode(display=False) as flops, DispatchedOperations() as operations:
        trainer.train_steps(steps)
    return {"flops_per_step": flops.get_total_flops() / steps,
            "operations_per_step": sum(operations.calls.values()) / steps,
            "operations_by_name": {name: count / steps for name, count in sorted(operations.calls.items())}}


def count(names: tuple[str, ...], steps: int, mnist_root: str, library=None) -> dict:
    """{program: {language: counted_steps}} on cpu, one intra-op thread, seed 1."""
    import torch

    torch.set_num_threads(1)
    counted = {}
    for name in names:
        program = PROGRAMS[name]
        counted[name] = {}
        for language in LANGUAGES:
            options = {"device": "cpu", "seed": 1, "threads": 1}
            options |= {"data_root": mnist_root} if "data_root" in program.settings else {}
            trainer = make_trainer(program, language, options, library, mnist_root)
            try:
                counted[name][language] = counted_steps(trainer, steps)
            finally:
                if hasattr(trainer, "close"):
                    trainer.close()
    return counted


def table(counted: dict) -> str:
    lines = ["| program | language | FLOPs per step | dispatched operations per step | FLOPs per operation |",
             "|---|---|---:|---:|---:|"]
    for name, languages in counted.items():
        for language, figures in languages.items():
            flops, operations = figures["flops_per_step"], figures["operations_per_step"]
            lines.append(f"| {name} | {language} | {flops:,.0f} | {operations:,.1f} | "
                         f"{flops / operations if operations else 0:,.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phasebench.worker.step_counts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--program", default=",".join(PROGRAMS), help="comma-separated (default: every program)")
    parser.add_argument("--steps", type=int, default=10, help="steps counted per trainer, after its warm-up")
    parser.add_argument("--mnist-root", default="data", help="the MNIST data folder (holds MNIST/raw) of the programs "
                                                             "that read it")
    parser.add_argument("--library", help="the C++ library to load (default: the production build, built if need be)")
    parser.add_argument("--json", help="also write the counts, by operator too, to this file")
    args = parser.parse_args(argv)
    try:
        names = parse(args.program)
    except ValueError as error:
        parser.error(str(error))
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: 1 or more")
    library = cpp_lib.load(args.library or str(build.library_path()))
    counted = count(names, args.steps, args.mnist_root, library)
    print(table(counted))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"steps": args.steps, "warmup_steps": WARMUP_STEPS, "programs": counted}, out, indent=1)
            out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
