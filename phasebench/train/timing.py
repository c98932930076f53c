"""The clock and its neighbours (docs/method.md#what-is-measured): a timed body with nothing but the body between
the clock reads (on cuda the cheapest synchronization at both ends), the CPU clocks just outside them, the
page faults read outside the clock.
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
