"""One timed round of a phase, the one type every side of it uses: both languages' trainers return it
(phasebench/train/trainer.py's Trainer.run_phase, phasebench/worker/cpp_lib.py's CppTrainer.run_phase), the worker
sends it as the phase request's reply (phasebench/worker/protocol.py), and the pytest process reads it
(phasebench/worker/client.py's Worker.run_phase, bench/test_phases.py).

A leaf: no torch and no other phasebench module, so that the trainers and the worker import it alike.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CountDump:
    """The instruction-count mode, in the worker (docs/instruction-counts.md#how-a-round-is-counted): where a counted
    round's callgrind dump is and the label it was dumped under. The pytest process reads it, outside Valgrind."""

    dump: str  # the dump file's path
    label: str  # "IMPL/PHASE/N", the worker's Nth counted round


@dataclass(frozen=True)
class CountedRound:
    """The instruction-count mode, in the pytest process: a counted round's dump, read (phasebench/worker/counting.py's
    read_round)."""

    instructions: int  # the dump's total Ir: the round's count
    events: dict[str, int]  # every event the dump names, its total (Ir included; more with caches or branches simulated)
    split: dict[str, int]  # where the instructions went, by counting.CATEGORIES
    top: list  # the functions with the most of them: [object, function, instructions]
    label: str  # as CountDump's


@dataclass(frozen=True)
class PhaseRound:
    ns: int  # the timed body, synchronized at both ends
    cpu_ns: int  # the worker process's CPU time across it (all threads; docs/utilization.md#utilization)
    thread_cpu_ns: int  # the CPU time of the thread that ran it
    product: dict  # what the phase produced (phasebench/train/phases.py)
    minor_faults: int = 0  # the worker process's page faults across the round, read outside the clock
    major_faults: int = 0
    # cuda only, None on cpu (docs/gpu.md#host-cpu-and-gpu-time): the CPU time of the thread that ran it up to the
    # body's end, read before the closing synchronize, and the time between CUDA events recorded around the body
    host_cpu_ns: int | None = None
    gpu_ns: int | None = None
    # The instruction-count mode only: where the worker dumped the round, and that dump as the pytest process read it.
    dump: CountDump | None = None
    counted: CountedRound | None = None
