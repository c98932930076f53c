"""The programs the suite trains, each declared once here: its name, its phases (in the order a step runs them, named
as the program's own steps), their labels, and its trainers. Importable without torch, as phasebench/spec.py is.

A program's trainers are named by import path ("module:Class"), so that this bottom layer imports none of them; a new
program adds its entry here and its trainers (docs/architecture.md#programs).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from phasebench.spec import LABELS, PHASE_LABELS, TRAINING_PHASES

LANGUAGES = ("python", "cpp")


@dataclass(frozen=True)
class Program:
    name: str
    phases: tuple[str, ...]  # in the order a training step runs them
    labels: dict[str, str]  # each phase's row label in the report
    # language -> "module:Class": a trainer built as Class(device=..., seed=...) with run_phase(name, checks),
    # train_steps(n) and parameters() (phasebench/worker/program_steps.py drives them). Empty where the program's
    # trainers are built otherwise: the seed's MNIST trainers take the data's folder and a workload, and the worker
    # (phasebench/worker/server.py) builds them.
    step_trainers: dict[str, str] = field(default_factory=dict)
    source: str = ""  # the pytorch/examples program(s) it is written after

    def __post_init__(self):
        if not self.phases or len(set(self.phases)) != len(self.phases):
            raise ValueError(f"program '{self.name}': its phases must be named once each, got {self.phases}")
        unlabelled = [phase for phase in self.phases if phase not in self.labels]
        if unlabelled:
            raise ValueError(f"program '{self.name}': no label for {', '.join(unlabelled)}")
        unknown = self.step_trainers.keys() - set(LANGUAGES)
        if unknown:
            raise ValueError(f"program '{self.name}': trainers for unknown languages {sorted(unknown)}")

    def label(self, phase: str) -> str:
        return self.labels[phase]

    def step_trainer(self, language: str) -> type:
        """The class of the program's trainer in `language` (imported here, on demand)."""
        if language not in LANGUAGES:
            raise ValueError(f"unknown language '{language}': {', '.join(LANGUAGES)}")
        path = self.step_trainers.get(language)
        if path is None:
            raise ValueError(f"program '{self.name}' has no {language} trainer that runs steps by itself")
        module, _, name = path.partition(":")
        return getattr(importlib.import_module(module), name)


PROGRAMS = {program.name: program for program in (
    # The seed's program: pytorch/examples' MNIST (cpp/mnist/mnist.cpp and its Python counterpart).
    Program("mnist", TRAINING_PHASES, PHASE_LABELS, source="cpp/mnist/mnist.cpp, mnist/main.py"),
    # pytorch/examples' polynomial fit (docs/method.md#the-regression-program).
    Program("regression", ("get_batch", "zero_grad", "forward_loss", "loss_item", "backward", "update"),
            {"get_batch": "Get Batch", "zero_grad": "Zero Grad", "forward_loss": "Forward And Loss",
             "loss_item": LABELS["loss_item"], "backward": LABELS["backward"], "update": "Parameter Update"},
            step_trainers={"python": "phasebench.train.regression:RegressionTrainer",
                           "cpp": "phasebench.worker.cpp_lib:CppRegressionTrainer"},
            source="cpp/regression/regression.cpp, regression/main.py"),
)}
DEFAULT_PROGRAM = "mnist"


def program(name: str) -> Program:
    """The program of that name; a clear error naming the known ones otherwise."""
    if name not in PROGRAMS:
        raise ValueError(f"unknown program '{name}': {', '.join(PROGRAMS)}")
    return PROGRAMS[name]
