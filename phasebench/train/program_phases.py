"""What the Python trainers of the programs beside the seed's share (phasebench/programs.py): a program's table of
phases, found by name (the empty body beside them), and one timed round of a phase. Their C++ twins share
cpp/src/program_phases.h."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from phasebench import determinism
from phasebench.devices import with_index
from phasebench.phase_round import PhaseRound
from phasebench.programs import program
from phasebench.train.products import NOOP, empty_product
from phasebench.train.timing import FLOOR_ROUNDS, page_faults, timer_floor


@dataclass(frozen=True)
class Phase:
    name: str
    body: Callable  # timed: body(trainer)
    product: Callable[..., dict]  # after the body, with the checks on: product(trainer)
    check_before: Callable | None = None  # untimed, before the body, with the checks on


# The empty body, with nothing before it: the count mode's floor (phasebench/train/products.py NOOP).
EMPTY = Phase(NOOP, lambda trainer: None, lambda trainer: empty_product())


class PhaseTable:
    """A program's phases in the order a step runs them, as phasebench/programs.py declares them."""

    def __init__(self, name: str, phases: tuple[Phase, ...]):
        declared = program(name).phases
        if tuple(phase.name for phase in phases) != declared:
            raise ValueError(f"the {name} program's trainer has phases {[phase.name for phase in phases]}, its "
                             f"declaration {list(declared)}")
        self.name, self.phases = name, phases
        self.index = {phase.name: index for index, phase in enumerate(phases)}

    def names(self) -> list[str]:
        return [phase.name for phase in self.phases]

    def named(self, name: str) -> tuple[Phase, int]:
        """The phase of that name and its place in the step (the empty body's: 0, nothing before it); ValueError
        naming the program's phases otherwise."""
        if name == NOOP:
            return EMPTY, 0
        index = self.index.get(name)
        if index is None:
            raise ValueError(f"unknown phase '{name}' of the {self.name} program: {', '.join(self.index)}")
        return self.phases[index], index

    def run_round(self, trainer, name: str, checks: bool = True,
                  prepare: Callable[[object, str], None] | None = None) -> PhaseRound:
        """Release what the trainer's last round left, prepare(trainer, name) where given, run the step's phases
        before this one untimed, then time its body on the trainer's clock (trainer.timed); with `checks`, take what
        the product is checked against before the body and make the product after it, else the product is
        {"checks": "off"}. The page faults are read just outside the clock."""
        phase, index = self.named(name)
        trainer.release()
        if prepare:
            prepare(trainer, phase.name)
        for earlier in self.phases[:index]:
            earlier.body(trainer)
        if checks and phase.check_before:
            phase.check_before(trainer)
        before = page_faults()
        timing = trainer.timed(phase.body, trainer)
        after = page_faults()
        made = phase.product(trainer) if checks else {"checks": "off"}
        return PhaseRound(timing.ns, timing.cpu_ns, timing.thread_cpu_ns, made, after[0] - before[0],
                          after[1] - before[1], timing.host_cpu_ns, timing.gpu_ns)


class ProgramTrainer:
    """What every program trainer does alike; a subclass sets `table` (its PhaseTable, made after the class, whose
    methods its phases name) and `timed` (its clock), and may set `prepare` (run_round's)."""

    table: PhaseTable
    prepare: Callable[[object, str], None] | None = None

    def set_up(self, device: str, threads: int, batch_size: int) -> None:
        """The options every program trainer takes, checked, and its device and threads set, before its draws."""
        if batch_size < 1:
            raise ValueError(f"batch size must be at least 1, got {batch_size}")
        if threads < 0:
            raise ValueError(f"threads {threads}: 0 or more")
        self.device = with_index(device)  # a bare "cuda" is the current device, with its index
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # so that the cheapest synchronization is the right one
        if threads > 0:
            torch.set_num_threads(threads)
        self.batch_size = batch_size

    def run_phase(self, name: str, checks: bool = True) -> PhaseRound:
        """One round of `name` (PhaseTable.run_round)."""
        return self.table.run_round(self, name, checks, self.prepare)

    def phase_names(self) -> list[str]:
        return self.table.names()

    def timer_floor(self, rounds: int = FLOOR_ROUNDS) -> int:
        return timer_floor(self.timed, lambda trainer: None, self, rounds)

    def threads(self) -> int:
        return torch.get_num_threads()

    def flags(self) -> dict:
        """The numerics flags in effect in this process (phasebench/determinism.py)."""
        return determinism.read()
