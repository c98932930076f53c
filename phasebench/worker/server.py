"""The worker subprocess: one per (implementation, device), it owns a trainer and times phases.

    python -m phasebench.worker.server --impl NAME --language python|cpp --reply-fd FD [--library PATH]

Requests arrive as JSON lines on stdin; each gets one JSON line on FD (phasebench/worker/protocol.py says what
each holds; Server's table says who answers it). The process's own
stdout is pointed at stderr so that nothing printed by torch, torchvision or LibTorch can
corrupt the replies. The C++ worker loads the library with ctypes and never imports torch
or the Python trainer (docs/architecture.md#the-c-abi-and-the-build).
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import gc
import json
import os
import resource
import sys
import time
from array import array
from collections.abc import Callable

from phasebench import programs
from phasebench.fitness import run_and_wait_ns
from phasebench.phase_round import PhaseRound
from phasebench.spec import TRAINING_PHASES
from phasebench.worker import group, protocol, threads
from phasebench.worker.startup import pci_bus_id, set_up


def load_libraries(language: str, library: str | None = None):
    """What each language's program has loaded before its first statement runs, outside its set-up's clock in both
    languages alike: the Python program's imports (torch, torchvision and the trainer, as pytorch/examples' main.py
    imports them at its top), the C++ program's shared libraries (LibTorch, through the suite's library). The
    set-up then holds the same kind of work in both: opening the data, building the model and optimizer
    (docs/architecture.md#set-up-the-same-kind-of-work-in-both-languages)."""
    if language == "python":
        import torchvision  # noqa: F401  (the program's import, not its set-up)

        from phasebench.train import trainer

        return trainer
    from phasebench.worker import cpp_lib

    return cpp_lib.load(library)


class PythonAdapter:
    def __init__(self, options: dict):
        begun = time.perf_counter_ns()
        trainer = load_libraries("python")
        Trainer = trainer.Trainer  # noqa: N806

        # The program's own time starts here, with its imports done (docs/results.md#the-published-table-redone).
        self.trainer, self.setup_ns, self.startup_parts_ns = set_up(lambda: Trainer(**options), options, begun)
        self.names = list(TRAINING_PHASES)

    def phase_names(self):
        return self.names

    def get_params(self) -> bytes:
        return self.trainer.get_params().numpy().tobytes()

    def set_params(self, data: bytes):
        import torch

        self.trainer.set_params(torch.frombuffer(bytearray(data), dtype=torch.float32))

    def batch_at(self, index: int):
        data, target = self.trainer.batch_at(index)
        return data.float().contiguous().numpy().tobytes(), target.tolist()

    def ensemble_params(self, member: int) -> bytes:
        return self.trainer.ensemble_params(member).numpy().tobytes()


class CppAdapter:
    def __init__(self, options: dict, library: str):
        from phasebench.worker import cpp_lib

        begun = time.perf_counter_ns()
        lib = load_libraries("cpp", library)
        self.trainer, self.setup_ns, self.startup_parts_ns = set_up(lambda: cpp_lib.CppTrainer(lib, **options),
                                                                    options, begun)

    def phase_names(self):
        return self.trainer.phase_names()

    def get_params(self) -> bytes:
        return self.trainer.get_params().tobytes()

    def set_params(self, data: bytes):
        self.trainer.set_params(array("f", data))

    def batch_at(self, index: int):
        images, labels = self.trainer.batch_at(index)
        return images.tobytes(), labels

    def ensemble_params(self, member: int) -> bytes:
        return self.trainer.ensemble_params(member).tobytes()


class ProgramAdapter:
    """The worker of a program other than the seed's (phasebench/programs.py): its trainer of the worker's language,
    built from the start's options, serving its phases. The program's imports (torch and its trainer's module, or
    LibTorch through the suite's library) are loaded before the set-up's clock, as the seed's are."""

    def __init__(self, name: str, language: str, options: dict, library: str | None):
        begun = time.perf_counter_ns()
        options = dict(options)
        declared = programs.program(name)
        # Where a training run's last line goes (train), unless the trainer writes its own progress lines there.
        self.log_path = None if "log_path" in declared.settings else options.pop("log_path", None)
        trainer_class = declared.step_trainer(language)  # imports its module (torch, in Python)
        if language == "cpp":
            from phasebench.worker import cpp_lib

            lib = cpp_lib.load(library)
            build = lambda: trainer_class(lib, **options)  # noqa: E731
        else:
            build = lambda: trainer_class(**options)  # noqa: E731
        self.program = name
        self.trainer, self.setup_ns, self.startup_parts_ns = set_up(build, options, begun)

    def phase_names(self):
        return self.trainer.phase_names()

    def train(self, max_steps: int = 0) -> tuple[int, int, int, float | None]:
        """A training run of the program as the suite runs it (docs/method.md#the-regression-program): its fixed
        step count (or max_steps, a check's), the steps untimed inside, its loop on this process's clock around the
        trainer's one call, alike in both languages; then, outside the loop's clock, the last step's loss written to
        the log file where the worker has one. Returns (steps, loop ns, process CPU ns across the loop, last loss)."""
        steps = max_steps or programs.program(self.program).run_steps
        cpu_start, start = time.process_time_ns(), time.perf_counter_ns()
        losses = self.trainer.train_steps(steps)
        loop_ns, cpu_ns = time.perf_counter_ns() - start, time.process_time_ns() - cpu_start
        last = losses[-1] if losses else None
        if self.log_path:
            with open(self.log_path, "a") as log:
                log.write(f"Loss: {last:.6f} after {steps} batches\n")
        return steps, loop_ns, cpu_ns, last

    # What the seed's workers answer beyond phases and steps: a clear error, not an AttributeError's trace.
    def refuse(self, what: str):
        raise ValueError(f"the {self.program} program's worker has no {what}: it times phases and trains steps")

    def get_params(self) -> bytes:
        self.refuse("'get_params'")

    def set_params(self, data: bytes):
        self.refuse("'set_params'")

    def batch_at(self, index: int):
        self.refuse("'batch'")

    def ensemble_params(self, member: int) -> bytes:
        self.refuse("ensembles")


def capability() -> str | None:
    """The ATen CPU capability this process dispatches to (torch.backends.cpu.get_cpu_capability()), where torch is
    loaded (the Python worker); the C++ worker loads the same libtorch_cpu under the same pins."""
    if "torch" not in sys.modules:
        return None
    return sys.modules["torch"].backends.cpu.get_cpu_capability()


def count_conditions(language: str, trainer) -> str:
    """--pins count (docs/method.md#switches-for-the-intervention-study): what the instruction-count mode does to its
    workers (phasebench/worker/count_server.py) that a timed worker can do as well, beside the environment's pins
    the pytest process sets: Python's cyclic GC collected, frozen and disabled (the C++ worker's host interpreter's
    too), each round then preceded by a collection (Server._phase), and in the Python worker the interpreter's type
    attribute cache emptied just before each timed body, outside its clock. Returns the start reply's `pins`."""
    gc.collect()
    gc.freeze()
    gc.disable()
    if language == "python":
        timed = trainer.timed

        def from_an_empty_type_cache(body, owner):
            sys._clear_type_cache()
            return timed(body, owner)

        trainer.timed = from_an_empty_type_cache
    return "count"


def on_the_shared_clock(work):
    """Runs work(); returns its result and when it started and ended on CLOCK_MONOTONIC (perf_counter_ns, which
    every process on the machine shares, so test_concurrent_jobs can line jobs up), with the process CPU time
    across it (all threads) and its page faults (minor and major, read outside the clocks)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu_start, started = time.process_time_ns(), time.perf_counter_ns()
    result = work()
    ended = time.perf_counter_ns()
    cpu_ns = time.process_time_ns() - cpu_start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return result, {"started_at_ns": started, "ended_at_ns": ended, "request_cpu_ns": cpu_ns,
                    "minor_faults": after.ru_minflt - before.ru_minflt, "major_faults": after.ru_majflt - before.ru_majflt}


def answers(request: type[protocol.Request]):
    """Registers the method it decorates as its server's handler of `request` (Server.handlers): each request type's
    handler is named where it is defined, and nowhere else."""
    def registered(method):
        method.answers = request
        return method
    return registered


class Server:
    """A worker's requests and their handlers: each method that answers a request type says so (`answers`). A
    subclass adds commands with methods of its own, or acts before each request (`dispatch`) or once a trainer is
    started (`started`); `main(server=...)` runs it."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.adapter = self.counter = None
        self.stopping = False
        # --pins count on a timed worker (count_conditions); the count mode applies its own
        self.pinned = getattr(args, "pins", None) == "count" and not getattr(args, "count_out", None)
        self.window: threads.Window | None = None  # a case's counted rounds, while they run (rounds_open)

    @classmethod
    def handlers(cls) -> dict[str, tuple[type[protocol.Request], str]]:
        """{command: (its request type, the name of the method registered for it with `answers`)}, of this class
        and its bases."""
        found = {}
        for owner in reversed(cls.__mro__):
            for name, member in vars(owner).items():
                request = getattr(member, "answers", None)
                if request is not None:
                    found[request.cmd] = (request, name)
        return found

    def serve(self, lines, reply: Callable[[dict], None]) -> int:
        """Answers each request line with one reply, until a stop or the end of the lines."""
        handlers = self.handlers()
        requests = {name: kind for name, (kind, _) in handlers.items()}
        for line in lines:
            try:
                request = protocol.decode_request(line, requests)
                answer = self.dispatch(request, getattr(self, handlers[request.cmd][1]))
                reply({"ok": True} | protocol.encode_reply(answer))
            except Exception as error:  # the client raises it with this message, verbatim
                # A collective's or a store's error (c10d's carry a backtrace): its first line says why.
                text = group.one_line(error) if type(error).__module__.startswith("torch.distributed") else str(error)
                reply({"ok": False, "error": text, "type": type(error).__name__})
            if self.stopping:
                break
        return 0

    def dispatch(self, request: protocol.Request, handler: Callable):
        """Runs the request's handler; a trainer must be started first, except for the commands that start one."""
        if self.adapter is None and not isinstance(request, (protocol.Start, protocol.Stop, protocol.Ping)):
            raise RuntimeError(f"'{request.cmd}' before 'start'")
        return handler(request)

    def before_trainer(self) -> None:
        """Called before each trainer is built (a subclass may prepare the process for it)."""

    def started(self) -> None:
        """Called once a start request has built its trainer (self.adapter), before its reply."""

    @property
    def trainer(self):
        return self.adapter.trainer

    # -- the worker's life ---------------------------------------------------------------------------------------
    @answers(protocol.Start)
    def start(self, request: protocol.Start) -> protocol.Started:
        if self.adapter is not None:  # a restart with other options (the equivalence tests): a fresh trainer
            self.adapter.trainer.close()
            self.adapter = None
        args = self.args
        self.before_trainer()
        if request.program != programs.DEFAULT_PROGRAM:
            self.adapter = ProgramAdapter(request.program, args.language, request.options, args.library)
        else:
            self.adapter = (PythonAdapter(request.options) if args.language == "python"
                            else CppAdapter(request.options, args.library))
        self.started()
        pins = floor_dumps = cpu_capability = None
        if self.pinned:
            pins = count_conditions(args.language, self.trainer)
        if args.count_out:  # docs/instruction-counts.md: the bracket instead of the clock
            from phasebench.worker.count_server import Counter

            self.counter = Counter(args.library, args.count_out, args.impl)
            floor_dumps, cpu_capability = self.counter.attach(args.language, self.trainer), capability()
        # The start-up's last parts, each on its own clock: the timer floor (none in the count mode) and the bus id
        # (cuda only). Left out of every part: the count mode's set-up and the reply.
        parts = dict(self.adapter.startup_parts_ns)
        floor, began = 0, time.perf_counter_ns()
        if not self.counter:
            floor = self.trainer.timer_floor()
            parts["timer_floor"] = time.perf_counter_ns() - began
        device, began = request.options.get("device", "cpu"), time.perf_counter_ns()
        bus_id = pci_bus_id(device)
        if bus_id is not None:
            parts["pci_bus_id"] = time.perf_counter_ns() - began
        return protocol.Started(os.getpid(), self.adapter.phase_names(), self.trainer.threads(), floor,
                                self.adapter.setup_ns, bus_id, flags=self.trainer.flags(),
                                startup_parts_ns=parts, pins=pins, count_floor_dumps=floor_dumps,
                                cpu_capability=cpu_capability)

    @answers(protocol.Stop)
    def stop(self, request: protocol.Stop) -> protocol.Ok:
        if self.adapter is not None:
            self.trainer.close()
        self.stopping = True
        return protocol.Ok()

    @answers(protocol.Ping)
    def ping(self, request: protocol.Ping) -> protocol.Ok:  # the round trip alone, for worker_overhead
        return protocol.Ok()

    # -- phases and steps ----------------------------------------------------------------------------------------
    @answers(protocol.Phase)
    def phase(self, request: protocol.Phase) -> PhaseRound:
        if self.counter is not None:  # the instruction-count mode: where the round's dump is, in its reply
            timed, dump = self.counter.count(self.trainer, request.name,
                                             lambda: self._phase(request.name, request.checks))
            return dataclasses.replace(timed, dump=dump)
        return self._phase(request.name, request.checks)

    @answers(protocol.PhaseCalls)
    def phase_calls(self, request: protocol.PhaseCalls) -> protocol.PhaseBlock:
        if self.counter is not None:
            raise ValueError("the instruction-count mode counts one round a request ('phase')")
        if request.calls < 1:
            raise ValueError(f"'phase_calls' of {request.calls} calls: at least one")
        before = run_and_wait_ns(os.getpid())  # once this thread runs: the wait to be woken is not the block's
        start = time.perf_counter_ns()
        rounds = [self._phase(request.name, request.checks) for _ in range(request.calls)]
        wall_ns = time.perf_counter_ns() - start
        after = run_and_wait_ns(os.getpid())
        return protocol.PhaseBlock(rounds, after[0] - before[0], after[1] - before[1], wall_ns)

    def _phase(self, name: str, checks: bool = True) -> PhaseRound:
        if self.pinned:  # as the count mode collects before each counted round (count_conditions)
            gc.collect()
        # Without its checks (--round-checks off), the round computes nothing that proves its work.
        run = (lambda: self.trainer.run_phase(name)) if checks else (lambda: self.trainer.run_phase(name, checks=False))
        if self.window is None:
            return run()
        before = threads.gc_collections()  # read outside the round, as every figure of the window
        timing = run()
        self.window.add_round(before, threads.gc_collections())
        return timing

    # What a case's counted rounds went through (docs/method.md#what-the-rounds-went-through): read when they open and
    # when they close, each a request of its own, never inside a round; the canary runs outside the threads' window.
    @answers(protocol.RoundsOpen)
    def rounds_open(self, request: protocol.RoundsOpen) -> protocol.RoundsOpened:
        if self.window is not None:  # left open by a case that failed before its close
            self.window.discard()
        canary = threads.canary_ns()
        self.window = threads.Window()
        self.window.open()
        return protocol.RoundsOpened(canary)

    @answers(protocol.RoundsClose)
    def rounds_close(self, request: protocol.RoundsClose) -> protocol.RoundsClosed:
        if self.window is None:
            raise RuntimeError("'rounds_close' before 'rounds_open'")
        figures, self.window = self.window.close(), None
        return protocol.RoundsClosed(canary_ns=threads.canary_ns(), **figures)

    @answers(protocol.PhaseNames)
    def phase_names(self, request: protocol.PhaseNames) -> protocol.Names:
        return protocol.Names(self.adapter.phase_names())

    @answers(protocol.Layout)
    def layout(self, request: protocol.Layout) -> protocol.LayoutReply:
        return protocol.LayoutReply(self.trainer.layout())

    @answers(protocol.GetParams)
    def get_params(self, request: protocol.GetParams) -> protocol.Data:
        return protocol.Data(base64.b64encode(self.adapter.get_params()).decode())

    @answers(protocol.SetParams)
    def set_params(self, request: protocol.SetParams) -> protocol.Ok:
        self.adapter.set_params(base64.b64decode(request.data))
        return protocol.Ok()

    @answers(protocol.EpochBatches)
    def epoch_batches(self, request: protocol.EpochBatches) -> protocol.Count:
        return protocol.Count(self.trainer.epoch_batches())

    @answers(protocol.Batch)
    def batch(self, request: protocol.Batch) -> protocol.BatchReply:
        images, labels = self.adapter.batch_at(request.index)
        return protocol.BatchReply(base64.b64encode(images).decode(), labels)

    @answers(protocol.TrainSteps)
    def train_steps(self, request: protocol.TrainSteps) -> protocol.Losses:
        losses, clock = on_the_shared_clock(lambda: self.trainer.train_steps(request.steps))
        return protocol.Losses(losses=losses, **clock)

    # Data parallel (docs/distributed.md; phasebench/worker/group.py): rank 0 opens the store, every rank joins.
    @answers(protocol.DistStore)
    def dist_store(self, request: protocol.DistStore) -> protocol.Port:
        self.adapter.store, port = group.open_store(request.world, request.timeout_s)
        return protocol.Port(port)

    @answers(protocol.DistJoin)
    def dist_join(self, request: protocol.DistJoin) -> protocol.Joined:
        started = time.perf_counter_ns()
        name = group.join(request.rank, request.world, request.device, request.timeout_s, request.port,
                          getattr(self.adapter, "store", None))
        self.trainer.attach(name)
        return protocol.Joined(name, group.backend_for(request.device), self.adapter.phase_names(),
                               time.perf_counter_ns() - started)

    @answers(protocol.TimedSteps)
    def timed_steps(self, request: protocol.TimedSteps) -> protocol.StepTimes:
        step_ns, clock = on_the_shared_clock(lambda: self.trainer.timed_steps(request.steps))
        return protocol.StepTimes(step_ns=step_ns, **clock)

    @answers(protocol.Evaluate)
    def evaluate(self, request: protocol.Evaluate) -> protocol.Evaluation:
        accuracy, loss = self.trainer.evaluate()
        return protocol.Evaluation(accuracy, loss)

    @answers(protocol.Train)
    def train(self, request: protocol.Train) -> protocol.Run:
        trainer, setup_ns = self.trainer, self.adapter.setup_ns
        if isinstance(self.adapter, ProgramAdapter):  # another program's run: its loop whole, no phase timers
            (steps, loop_ns, cpu_ns, _), clock = on_the_shared_clock(lambda: self.adapter.train(request.max_steps))
            return protocol.Run(phase_ns={}, steps=steps, loop_ns=loop_ns, phase_cpu_ns=cpu_ns, setup_ns=setup_ns,
                                program_ns=setup_ns + loop_ns,
                                peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                                peak_device_bytes=None, **clock)
        (totals, steps, loop_ns, cpu_ns), clock = on_the_shared_clock(
            lambda: trainer.train(request.epochs, request.synchronize, request.max_steps))
        # The published Total Time: the program from before its dataset is opened to its last step.
        return protocol.Run(phase_ns=totals, steps=steps, loop_ns=loop_ns, phase_cpu_ns=cpu_ns, setup_ns=setup_ns,
                            program_ns=setup_ns + loop_ns,
                            # This process's peak resident memory so far (Linux reports KiB), and the device's peak
                            # since train() began (docs/implementations.md#implementations-and-workloads).
                            peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                            peak_device_bytes=trainer.peak_device_memory(), **clock)

    # Ensembles (docs/gpu.md#concurrent-jobs-and-ensembles): M models built from seeds 1..M, a timed step of all
    # of them, a member's parameters.
    @answers(protocol.EnsembleStart)
    def ensemble_start(self, request: protocol.EnsembleStart) -> protocol.Ok:
        self.trainer.start_ensemble(request.models)
        return protocol.Ok()

    @answers(protocol.EnsembleStep)
    def ensemble_step(self, request: protocol.EnsembleStep) -> protocol.EnsembleReply:
        return protocol.EnsembleReply(*self.trainer.ensemble_step())

    @answers(protocol.EnsembleParams)
    def ensemble_params(self, request: protocol.EnsembleParams) -> protocol.Data:
        return protocol.Data(base64.b64encode(self.adapter.ensemble_params(request.member)).decode())

    @answers(protocol.EnsembleStop)
    def ensemble_stop(self, request: protocol.EnsembleStop) -> protocol.Ok:
        self.trainer.stop_ensemble()
        return protocol.Ok()


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--impl", required=True, help="the implementation's name (bench/registry.py)")
    parser.add_argument("--language", choices=("python", "cpp"), required=True)
    parser.add_argument("--reply-fd", type=int, required=True)
    parser.add_argument("--library")
    parser.add_argument("--count-out", help="the instruction-count mode: callgrind's --callgrind-out-file")
    parser.add_argument("--pins", choices=("count",),
                        help="time under the count mode's conditions (count_conditions; the environment's pins are "
                             "the pytest process's to set)")
    return parser.parse_args(argv)


def main(argv=None, server: type[Server] = Server) -> int:
    """Runs a worker: `server` answers its requests (a subclass of Server adds to them)."""
    args = parse_args(argv)
    replies = os.fdopen(args.reply_fd, "w", buffering=1)
    os.dup2(2, 1)

    def reply(message: dict):
        replies.write(json.dumps(message) + "\n")

    return server(args).serve(sys.stdin, reply)


if __name__ == "__main__":
    sys.exit(main())
