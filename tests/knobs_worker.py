"""The testing worker: phasebench's worker (phasebench/worker/server.py) with the tests' knobs (tests/knobs.py), run
as the workers of a run that loads `-p tests.knobs`:

    python -m tests.knobs_worker --impl NAME --language python|cpp --reply-fd FD [--library PATH]

It adds the `fault` request and the faults of PHASEBENCH_TEST_FAULT (docs/faults.md#faults-and-bad-input), and the
slow knob of PHASEBENCH_TEST_SLOW_PHASE, put in place once a trainer is built: the Python trainer's phase bodies
and run bodies wrapped here, the C++ trainer's through the testing build's pb_testing_* entry points
(cpp/include/phasebench_testing.h); and, for the instruction-count study, the heap pad of PHASEBENCH_TEST_HEAP_PAD
before each trainer is built.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

from phasebench.worker import protocol, server
from tests.knobs import FAULT_ENV, SLOW_PHASE_ENV, faults_for, parse_slow_phase


@protocol.request_type("fault", protocol.Ok)
class Fault(protocol.Request):
    kind: str  # segfault, abort, kill or hang


def fault(kind: str):
    """Make this worker die or hang on purpose."""
    if kind == "segfault":
        ctypes.string_at(0)
    elif kind == "abort":
        os.abort()
    elif kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "hang":
        while True:
            time.sleep(3600)
    raise ValueError(f"unknown fault '{kind}': segfault, abort, kill or hang")


# -- the slow knob in Python: the body, then a spin, its fraction of the body's time, or fixed work ---------------
def busy_wait(ns: int) -> None:
    """Spin, not sleep: a test slowdown must compete for the CPU as real work does."""
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def added_work(iterations: int) -> None:
    """Deterministic work, no clock: the same instructions every round (the instruction-count gate's injected
    regression; its C++ twin is cpp/src/clock.cpp's added_work)."""
    sink = 0
    for i in range(iterations):
        sink += i


def slowed(body, ns: int, fraction: float = 0.0, work: int = 0):
    """The body, then a spin of ns, or with a fraction above 0 of that fraction of the time the body just took (a
    relative slowdown that scales with whatever else the machine is doing, as a slower phase would), or with work
    above 0 that many iterations of a fixed loop."""
    def body_then_spin(trainer):
        body(trainer)
        busy_wait(ns)

    def body_then_work(trainer):
        body(trainer)
        added_work(work)

    def body_then_spin_its_fraction(trainer):
        start = time.perf_counter_ns()
        body(trainer)
        busy_wait(int((time.perf_counter_ns() - start) * fraction))

    if work > 0:
        return body_then_work
    return body_then_spin_its_fraction if fraction > 0 else body_then_spin


def slow_python(trainer, slow_phase: str, slow_ns: int = 0, slow_fraction: float = 0.0, slow_work: int = 0) -> None:
    """The phase's body slowed, per phase and in the run alike (Trainer.bodies, Trainer.run_bodies)."""
    for bodies in (trainer.bodies, trainer.run_bodies):
        if slow_phase in bodies:
            bodies[slow_phase] = slowed(bodies[slow_phase], slow_ns, slow_fraction, slow_work)


def slow_cpp(library: str, trainer, slow_phase: str, slow_ns: int = 0, slow_fraction: float = 0.0,
             slow_work: int = 0) -> None:
    """The knob set in the C++ session through the testing build's entry points, before any phase runs."""
    from phasebench.worker import cpp_lib

    lib = cpp_lib.load_testing(library)  # the same loaded library: the session's handle is valid in it
    if slow_work:
        status = lib.pb_testing_slow_work(trainer.handle, slow_phase.encode(), slow_work)
    else:
        status = lib.pb_testing_slow_phase(trainer.handle, slow_phase.encode(), slow_ns, slow_fraction)
    if status != cpp_lib.PB_OK:
        raise cpp_lib.CppError(lib.pb_last_error().decode(errors="replace"))


HEAP_PAD_ENV = "PHASEBENCH_TEST_HEAP_PAD"


def perturb_heap() -> None:
    """HEAP_PAD_ENV=N (lab/studies/count-study's SPREAD_PERTURB): before the trainer is built, leave
    the C library's heap in another state for each N, holes of other sizes freed among blocks kept, as a change to
    the code before it would. The same in both languages (both workers are this process), since the C++ trainer's
    heap is the C library's; an environment variable's length moves the Python heap but not this one."""
    n = int(os.environ.get(HEAP_PAD_ENV, "0") or 0)
    if n <= 0:
        return
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(24 + (k * 37 * n) % 1500) for k in range(16 * n)]
    for block in blocks[::2]:
        libc.free(block)
    _KEPT.extend(blocks[1::2])


_KEPT: list[int] = []  # the heap pad's kept blocks, never freed


class KnobsServer(server.Server):
    def __init__(self, args):
        super().__init__(args)
        self.fault_text = os.environ.get(FAULT_ENV, "")
        self.faults = faults_for(self.fault_text, args.impl)
        text = os.environ.get(SLOW_PHASE_ENV)
        if text:
            from phasebench.registry import NAMES
            from phasebench.spec import TRAINING_PHASES

            self.slow = parse_slow_phase(text, TRAINING_PHASES, NAMES).trainer_options(args.impl)
        else:
            self.slow = {}

    @server.answers(Fault)
    def fault(self, request: Fault) -> protocol.Ok:
        fault(request.kind)

    def dispatch(self, request: protocol.Request, handler):
        if isinstance(request, protocol.Phase) and request.name in self.faults:
            fault(self.faults[request.name])
        reply = super().dispatch(request, handler)
        if isinstance(request, protocol.DistJoin):  # this rank's own faults, now that it has one
            self.faults = faults_for(self.fault_text, self.args.impl, request.rank)
        return reply

    def before_trainer(self) -> None:
        perturb_heap()

    def started(self) -> None:
        if not self.slow:
            return
        try:
            if self.args.language == "python":
                slow_python(self.trainer, **self.slow)
            else:
                slow_cpp(self.args.library, self.trainer, **self.slow)
        except BaseException:
            self.trainer.close()
            self.adapter = None
            raise


if __name__ == "__main__":
    sys.exit(server.main(server=KnobsServer))
