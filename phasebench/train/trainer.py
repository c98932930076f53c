"""The Python trainer as the worker drives it (phasebench/worker/server.py): the training state (state.py) with
its phases timed (phases.py says what each prepares, times and produces; timing.py how the clock is read), the
training run (run.py), the steps the equivalence tests ask for, and ensembles. Its twin is the C++ library's
session (phasebench/worker/cpp_lib.py's CppTrainer has the same methods).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from phasebench import determinism
from phasebench.phase_round import PhaseRound
from phasebench.spec import ONE_SHOT_PHASES
from phasebench.train import loaders, run
from phasebench.train.ensemble import KINDS as ENSEMBLE_KINDS
from phasebench.train.model import Net, sgd
from phasebench.train.phases import NEEDS_NO_STEP, PHASE_BY_NAME, RUN_BODIES, STEP_PARTS
from phasebench.train.state import TrainingState
from phasebench.train.timing import FLOOR_ROUNDS, page_faults, timer_floor, timer_for


class Trainer(TrainingState):
    def __init__(self, root: str, ensemble: str = "loop", **options):
        if ensemble not in ENSEMBLE_KINDS:
            raise ValueError(f"unknown ensemble '{ensemble}': {', '.join(ENSEMBLE_KINDS)}")
        super().__init__(root, **options)
        self.timed = timer_for(self.device)
        self.last_phase = None
        self.ensemble_kind, self.ensemble, self.ensemble_losses = ensemble, None, None
        # Each phase's timed body, and the run's: this trainer's own, so that a test may wrap one after construction.
        self.bodies = {name: phase.body for name, phase in PHASE_BY_NAME.items()}
        self.run_bodies = dict(RUN_BODIES)

    def timer_floor(self, rounds: int = FLOOR_ROUNDS) -> int:
        return timer_floor(self.timed, self.bodies["noop"], self, rounds)

    def threads(self) -> int:
        return torch.get_num_threads()

    def flags(self) -> dict:
        """The numerics flags in effect in this process (phasebench/determinism.py)."""
        return determinism.read()

    def run_phase(self, name: str, checks: bool = True) -> PhaseRound:
        """Prepare the phase untimed, time its body; returns its timing, its product and the process's page faults
        across the round. With `checks` off (--round-checks off, docs/method.md#switches-for-the-intervention-study)
        nothing that proves the work is done: no weak references to count leftovers by, nothing taken to check the
        product against, no product; the release of what earlier rounds left stays."""
        phase = PHASE_BY_NAME.get(name)
        step = self.step_piece
        if phase is None:
            raise ValueError(f"unknown phase '{name}'")
        if step.whole and name in STEP_PARTS:
            raise ValueError(f"a step '{step.kind}' trainer replays its step whole: it has no '{name}' phase")
        if name in ONE_SHOT_PHASES:
            if name != step.one_shot_phase:
                raise ValueError(f"phase '{name}' is not a phase of a step '{step.kind}' trainer")
            if step.ready:
                raise ValueError(f"'{name}' runs once per worker, and it already ran in this one (untimed, before "
                                 f"the first phase that steps, or timed): time it in a fresh worker")
        elif name not in NEEDS_NO_STEP:
            step.ensure_ready(self)
        # A training step frees the previous step's tensors itself, as in any training loop.
        continuing = phase.continues_itself and self.last_phase == name
        earlier = [] if continuing or not checks else self.weak_held()
        if not continuing:
            self.release()
        if phase.prepare:
            phase.prepare(self)
        if phase.check_before and checks:
            phase.check_before(self)
        if self.group_attached:  # every rank leaves a barrier just before its clock (docs/distributed.md)
            from phasebench.train import distributed

            distributed.barrier()
        leftovers = None if continuing or not checks else sum(
            ref() is not None or (memory is not None and not memory.expired()) for ref, memory in earlier)
        del earlier
        # Page faults across the round, read outside the clock (a system call each).
        before = page_faults()
        timing = self.timed(self.bodies[name], self)
        after = page_faults()
        self.last_phase = name
        if name in ONE_SHOT_PHASES:
            step.ready = True
        product = (phase.product(self) | {"leftovers": leftovers}) if checks else {"checks": "off"}
        return PhaseRound(timing.ns, timing.cpu_ns, timing.thread_cpu_ns, product, after[0] - before[0],
                          after[1] - before[1], timing.host_cpu_ns, timing.gpu_ns)

    def train(self, epochs: int, synchronize: bool, max_steps: int = 0) -> tuple[dict[str, int], int, int, int]:
        return run.train(self, self.run_bodies, epochs, synchronize, max_steps)

    def train_steps(self, steps: int) -> list[float]:
        """`steps` steps and their losses; a graph step's first ones are its warm-up, then it captures."""
        step = self.step_piece
        if step.one_shot_at_start:
            step.ensure_ready(self)
        losses = []
        for _ in range(steps):
            if step.due(self):
                step.one_shot(self)
                step.ready = True
            self.step()
            losses.append(self.loss.item())
        return losses

    # -- data parallel (phasebench/train/distributed.py) ------------------------------------------------------
    def attach(self, group_name: str) -> None:
        """Join the default process group (its name is the C++ trainer's argument; here the group is the default)."""
        from phasebench.train import distributed

        distributed.attach(self, self.bucket_mb)

    def timed_steps(self, steps: int) -> list[int]:
        """`steps` steps as the phase train_step runs them, each timed alone (the distributed training run)."""
        step = self.step_piece
        if step.one_shot_at_start:
            step.ensure_ready(self)
        self.release()
        return [self.timed(self.bodies["train_step"], self)[0] for _ in range(steps)]

    def evaluate(self) -> tuple[float, float]:
        test_set = self.test_set
        self.model.eval()
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            for data, target in loaders.data_loader(test_set, self.batch_size):
                data, target = data.to(self.device), target.to(self.device)
                output = self.model(data)
                loss_sum += F.nll_loss(output, target, reduction="sum").item()
                correct += output.argmax(1).eq(target).sum().item()
        self.model.train()
        return 100.0 * correct / len(test_set), loss_sum / len(test_set)

    # -- ensembles (docs/gpu.md#concurrent-jobs-and-ensembles; phasebench/train/ensemble.py) ------------------------
    def start_ensemble(self, models: int) -> None:
        """M models from seeds 1..M with this trainer's dropout, workload and optimizer flags; replaces the last
        ensemble. It reseeds the global generator; the trainer's own model is left as it is."""
        self.stop_ensemble()  # freed before the new one is built
        self.ensemble = ENSEMBLE_KINDS[self.ensemble_kind](
            models, lambda: Net(self.dropout, self.workload).to(self.device),
            lambda params: sgd(params, self.optimizer_flags))

    def stop_ensemble(self) -> None:
        self.ensemble = self.ensemble_losses = None

    def _step_ensemble(self) -> None:
        self.ensemble_losses = self.ensemble.step(self.data, self.target)

    def ensemble_step(self) -> tuple[int, int, int, list[float]]:
        """One step of every member on the next batch, timed as a phase is: the batch is loaded and copied to
        the device before the clock starts, and what the last step left is released before that. Returns
        (ns, process CPU ns, thread CPU ns, each member's loss)."""
        if self.ensemble is None:
            raise RuntimeError("no ensemble: send ensemble_start first")
        self.ensemble_losses = None
        self.release()
        self.on_device()
        ns, cpu_ns, thread_ns = self.timed(Trainer._step_ensemble, self)[:3]
        losses = self.ensemble_losses
        return ns, cpu_ns, thread_ns, (torch.stack(losses) if isinstance(losses, list) else losses).tolist()

    def ensemble_params(self, member: int) -> torch.Tensor:
        if self.ensemble is None:
            raise RuntimeError("no ensemble: send ensemble_start first")
        return self.ensemble.member_params(member)
