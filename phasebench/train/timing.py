"""The clock and its neighbours (docs/method.md#what-is-measured): a timed body with nothing but the body between
the clock reads (on cuda the cheapest synchronization at both ends, two event records around the body and the
host CPU read before the closing synchronize), the CPU clocks just outside them, the page faults read outside the
clock.
Its C++ twin is cpp/src/clock.cpp."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from typing import NamedTuple

import torch

FLOOR_ROUNDS = 2000  # empty-phase rounds whose median is a worker's timer floor


class BodyTime(NamedTuple):
    """What the clock read of one timed body."""

    ns: int  # wall time: the body, synchronized at both ends on cuda
    cpu_ns: int  # the process's CPU time across it (all threads)
    thread_cpu_ns: int  # the CPU time of the thread that ran it, the closing synchronize included on cuda
    # cuda only (None on cpu): this thread's CPU time up to the end of the body, before the closing synchronize
    # (the host's share: launching, Python, the dispatcher), and the time between events recorded just before and
    # just after the body on the current stream (the stream's span, docs/gpu.md#host-cpu-and-gpu-time)
    host_cpu_ns: int | None = None
    gpu_ns: int | None = None


def timed_cpu(body: Callable, trainer) -> BodyTime:
    """(wall ns, process CPU ns, this thread's CPU ns) of body(trainer)."""
    cpu_start, thread_start = time.process_time_ns(), time.thread_time_ns()
    start = time.perf_counter_ns()
    body(trainer)
    end = time.perf_counter_ns()
    return BodyTime(end - start, time.process_time_ns() - cpu_start, time.thread_time_ns() - thread_start)


class CudaClock:
    """As timed_cpu, with the device synchronized at both ends, this thread's CPU time read before the closing
    synchronize (which can spin, so that a CPU time read after it is about the wall time in every phase) and the
    body's GPU time from two events on the current stream. One per trainer, made once its device is current: its
    events are created here, never inside a clock. `synchronize`, `new_event`, `record` and `current_stream` are the
    low-level calls, replaceable in a test: torch.cuda.synchronize() is _cuda_synchronize inside a device guard, and
    record is the event's own C method, without torch.cuda.Event.record's Python frame."""

    def __init__(self, synchronize: Callable | None = None, new_event: Callable | None = None,
                 record: Callable | None = None, current_stream: Callable | None = None):
        self.synchronize = synchronize or torch._C._cuda_synchronize
        self.new_event = new_event or (lambda: torch.cuda.Event(enable_timing=True))
        self.record = record or torch._C._CudaEventBase.record
        self.current_stream = current_stream or torch.cuda.current_stream
        self.start_event, self.end_event = self.new_event(), self.new_event()
        # An event's first record creates it on the device: done here, so that no clock holds a creation.
        stream = self.current_stream()
        self.record(self.start_event, stream)
        self.record(self.end_event, stream)
        self.synchronize()

    def __call__(self, body: Callable, trainer) -> BodyTime:
        synchronize, record, start_event, end_event = self.synchronize, self.record, self.start_event, self.end_event
        stream = self.current_stream()  # outside the clock; a body that switches streams switches back
        synchronize()
        cpu_start, thread_start = time.process_time_ns(), time.thread_time_ns()
        start = time.perf_counter_ns()
        # Between the wall clock's reads beside the body: the two event records, each an enqueue that waits for
        # nothing, recorded here since an event marks its stream's place when it is recorded; and the read of the
        # host CPU time, which must come before the closing synchronize it leaves out.
        record(start_event, stream)
        body(trainer)
        record(end_event, stream)
        host_end = time.thread_time_ns()
        synchronize()
        end = time.perf_counter_ns()
        cpu_end, thread_end = time.process_time_ns(), time.thread_time_ns()
        gpu_ns = round(start_event.elapsed_time(end_event) * 1e6)  # milliseconds; both events are complete by now
        return BodyTime(end - start, cpu_end - cpu_start, thread_end - thread_start, host_end - thread_start, gpu_ns)


def timer_for(device: torch.device) -> Callable:
    """A trainer's clock: a new CudaClock (its own events) on cuda."""
    return CudaClock() if device.type == "cuda" else timed_cpu


def timer_floor(timed: Callable, empty_body: Callable, trainer, rounds: int = FLOOR_ROUNDS) -> int:
    """The median time of the empty phase: what the clock itself costs in this worker."""
    return int(statistics.median(timed(empty_body, trainer)[0] for _ in range(rounds)))


def page_faults() -> tuple[int, int]:
    """The process's (minor, major) page faults so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_majflt
