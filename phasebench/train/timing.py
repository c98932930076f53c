"""The clock and its neighbours (docs/method.md#what-is-measured): a timed body with nothing but the body between
the clock reads (on cuda the cheapest synchronization at both ends), the CPU clocks just outside them, the
page faults read outside the clock, and the test-only slowdown the gate's studies add to one phase.
Its C++ twin is cpp/src/clock.cpp."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable

import torch

FLOOR_ROUNDS = 2000  # empty-phase rounds whose median is a worker's timer floor


def timed_cpu(body: Callable, trainer) -> tuple[int, int, int]:
    """(wall ns, process CPU ns, this thread's CPU ns) of body(trainer)."""
    cpu_start, thread_start = time.process_time_ns(), time.thread_time_ns()
    start = time.perf_counter_ns()
    body(trainer)
    end = time.perf_counter_ns()
    return end - start, time.process_time_ns() - cpu_start, time.thread_time_ns() - thread_start


def timed_cuda(body: Callable, trainer) -> tuple[int, int, int]:
    """As timed_cpu, with the device synchronized at both ends: torch.cuda.synchronize() is this call inside a
    device guard, and the trainer has set its device current."""
    synchronize = torch._C._cuda_synchronize
    synchronize()
    cpu_start, thread_start = time.process_time_ns(), time.thread_time_ns()
    start = time.perf_counter_ns()
    body(trainer)
    synchronize()
    end = time.perf_counter_ns()
    return end - start, time.process_time_ns() - cpu_start, time.thread_time_ns() - thread_start


def timer_for(device: torch.device) -> Callable:
    return timed_cuda if device.type == "cuda" else timed_cpu


def timer_floor(timed: Callable, empty_body: Callable, trainer, rounds: int = FLOOR_ROUNDS) -> int:
    """The median time of the empty phase: what the clock itself costs in this worker."""
    return int(statistics.median(timed(empty_body, trainer)[0] for _ in range(rounds)))


def page_faults() -> tuple[int, int]:
    """The process's (minor, major) page faults so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_majflt


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


def slowed(body: Callable, ns: int, fraction: float = 0.0, work: int = 0) -> Callable:
    """Test-only (the gate's studies): the body, then a spin of ns, or with a fraction above 0 of that fraction of
    the time the body just took (a relative slowdown that scales with whatever else the machine is doing, as a
    slower phase would)."""
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
