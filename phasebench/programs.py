"""The programs the suite trains, each declared once here: its name, its phases (in the order a step runs them, named
as the program's own steps), their labels, and its trainers. Importable without torch, as phasebench/spec.py is.

A program's trainers are named by import path ("module:Class"), so that this bottom layer imports none of them; a new
program adds its entry here and its trainers (docs/architecture.md#adding-a-program).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from phasebench.spec import LABELS, PHASE_LABELS, TRAINING_PHASES

LANGUAGES = ("python", "cpp")
TRAINER_SETTINGS = ("data_root", "log_path")  # what a program's trainers may take from the session (Program.settings)


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
    # "module:function" of a torch-free function (phase, product) -> [problems]: what proves that one round of a phase
    # did its work (bench/test_phases.py asks it of every round). Empty for the seed's program, whose checks follow
    # its implementations' pieces (bench/test_phases.py work_problems).
    product_checks: str = ""
    # A training run's steps (bench/test_training_run.py test_program_run): a fixed count in both languages, where the
    # example trains until a loss threshold; 0 for the seed's program, whose run trains --epochs epochs.
    run_steps: int = 0
    # The session's settings its trainers take beside device, threads and seed (phasebench/plugin/session.py
    # worker_options): "data_root" (the seed's data folder) and "log_path" (its progress lines' file; without it the
    # worker writes the run's last loss there itself).
    settings: tuple[str, ...] = ()
    # Counted and warm-up rounds of its per-phase cases where the command gives no --rounds/--warmup-rounds (0: the
    # options' defaults): a program whose step takes a tenth of a second takes fewer.
    rounds: int = 0
    warmup_rounds: int = 0
    # Why `--count instructions` refuses the program, where it does (docs/instruction-counts.md); empty: counted.
    not_counted: str = ""

    def __post_init__(self):
        if not self.phases or len(set(self.phases)) != len(self.phases):
            raise ValueError(f"program '{self.name}': its phases must be named once each, got {self.phases}")
        unlabelled = [phase for phase in self.phases if phase not in self.labels]
        if unlabelled:
            raise ValueError(f"program '{self.name}': no label for {', '.join(unlabelled)}")
        unknown_settings = set(self.settings) - set(TRAINER_SETTINGS)
        if unknown_settings:
            raise ValueError(f"program '{self.name}': unknown settings {sorted(unknown_settings)}")
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
        return imported(path)

    @property
    def is_default(self) -> bool:
        """The seed's program: every implementation of the registry runs it, each with the phases its pieces give
        (phasebench/registry.py), and its cases keep their names unqualified."""
        return self.name == DEFAULT_PROGRAM

    def runs(self, implementation) -> bool:
        """Whether a phasebench.registry.Implementation has cases of this program: the seed's program, every one;
        another program, the published pair only (the implementations without a reference, one a language), each
        built from the program's trainer of its language, since the other implementations change the seed's
        pipeline."""
        return self.is_default or (implementation.reference is None and implementation.language in self.step_trainers)

    def case_phases(self, implementation) -> tuple[str, ...]:
        """The phases of this program's per-phase cases for that implementation, as the cases name them
        (case_phase)."""
        if not self.runs(implementation):
            return ()
        phases = implementation.phases if self.is_default else self.phases
        return tuple(case_phase(self.name, phase) for phase in phases)

    def product_problems(self, phase: str, product: dict) -> list[str]:
        if not self.product_checks:
            raise ValueError(f"program '{self.name}' declares no product checks")
        return imported(self.product_checks)(phase, product)


def imported(path: str):
    """What "module:name" names, its module imported."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


PROGRAMS = {program.name: program for program in (
    # The seed's program: MNIST, after pytorch/examples' cpp/mnist/mnist.cpp and its Python counterpart.
    Program("mnist", TRAINING_PHASES, PHASE_LABELS, source="cpp/mnist/mnist.cpp, mnist/main.py"),
    # pytorch/examples' polynomial fit (docs/method.md#the-regression-program).
    Program("regression", ("get_batch", "zero_grad", "forward_loss", "loss_item", "backward", "update"),
            {"get_batch": "Get Batch", "zero_grad": "Zero Grad", "forward_loss": "Forward And Loss",
             "loss_item": LABELS["loss_item"], "backward": LABELS["backward"], "update": "Parameter Update"},
            step_trainers={"python": "phasebench.train.regression:RegressionTrainer",
                           "cpp": "phasebench.worker.cpp_lib:CppRegressionTrainer"},
            source="cpp/regression/regression.cpp, regression/main.py",
            product_checks="phasebench.train.regression_checks:problems", run_steps=10_000),
    # pytorch/examples' DCGAN on MNIST (docs/method.md#the-dcgan-program).
    Program("dcgan", ("data_loading", "copy_to_device", "d_real", "g_forward", "d_fake", "d_step", "g_loss", "g_step",
                      "progress_print"),
            {"data_loading": LABELS["data_loading"], "copy_to_device": LABELS["copy_to_device"],
             "d_real": "Discriminator On Real", "g_forward": "Generator Forward", "d_fake": "Discriminator On Fake",
             "d_step": "Discriminator Update", "g_loss": "Generator Loss", "g_step": "Generator Update",
             "progress_print": LABELS["progress_print"]},
            step_trainers={"python": "phasebench.train.dcgan:DcganTrainer",
                           "cpp": "phasebench.worker.cpp_lib:CppDcganTrainer"},
            source="cpp/dcgan/dcgan.cpp", product_checks="phasebench.train.dcgan_checks:problems", run_steps=50,
            settings=("data_root", "log_path"), rounds=60, warmup_rounds=2,
            not_counted="a step of 17.5 GFLOP takes tens of seconds under Valgrind, and a phase's round runs the step "
                        "up to it: its count would take hours"),
)}
DEFAULT_PROGRAM = "mnist"
# A per-phase case of a program other than the seed's names its phase "PROGRAM:PHASE" (its id, its benchmark group and
# its saved `phase`), so that its results never share a key with the seed's phase of the same name.
SEPARATOR = ":"


def case_phase(name: str, phase: str) -> str:
    """The phase as a case of program `name` names it: bare for the seed's program, else qualified."""
    return phase if name == DEFAULT_PROGRAM else f"{name}{SEPARATOR}{phase}"


def split_case_phase(text: str) -> tuple[Program, str]:
    """A case's phase as its program and the program's own phase name; ValueError for an unknown program or a phase
    the program does not declare (the seed's program's phases are its implementations': any name passes here)."""
    name, separator, phase = text.rpartition(SEPARATOR)
    found = program(name if separator else DEFAULT_PROGRAM)
    if separator and (not name or name == DEFAULT_PROGRAM):
        raise ValueError(f"phase {text!r}: the seed's program's phases are named bare")
    if not found.is_default and phase not in found.phases:
        raise ValueError(f"phase {text!r}: program '{found.name}' has no phase '{phase}': {', '.join(found.phases)}")
    return found, phase


def phase_place(text: str, seed_phases: tuple[str, ...]) -> int:
    """A case's phase's place in its program's step, which the run order deals its first runner by
    (phasebench/plugin/cases.py run_order): the seed program's in `seed_phases` (0 for a phase outside it), another
    program's in its declared phases."""
    found, phase = split_case_phase(text)
    order = seed_phases if found.is_default else found.phases
    return order.index(phase) if phase in order else 0


def parse(text: str | None) -> tuple[str, ...]:
    """--program's value (NAME[,NAME...]; None: the seed's program) as program names in the order given; ValueError
    naming the known ones."""
    names = [part.strip() for part in (text or DEFAULT_PROGRAM).split(",") if part.strip()]
    unknown = [name for name in names if name not in PROGRAMS]
    if unknown or not names:
        raise ValueError(f"--program {text!r}: valid values are {', '.join(PROGRAMS)} (comma-separated)")
    return tuple(dict.fromkeys(names))


def program(name: str) -> Program:
    """The program of that name; a clear error naming the known ones otherwise."""
    if name not in PROGRAMS:
        raise ValueError(f"unknown program '{name}': {', '.join(PROGRAMS)}")
    return PROGRAMS[name]
