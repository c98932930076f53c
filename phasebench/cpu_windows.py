"""A worker's CPU use, read in pytest from counters the kernel keeps anyway (phasebench/utilization.py says what
each figure is; docs/utilization.md#utilization): the processes' CPU clocks and /proc's ticks across a window
(CpuWindow), with what the rest of the machine used meanwhile, and a phase's own CPU use and page faults over its
timed bodies, from what the worker read just outside its clock (phase_cpu, phase_faults), and on cuda its host CPU
and GPU times (phase_host_and_gpu). No torch, and nothing
of the suite."""

from __future__ import annotations

import os
import statistics
import time

CLOCK_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
# A phase's thread CPU (bench/test_phases.py, phase_cpu): the worker reads its CPU clocks just outside its two
# wall-clock reads (so that they stay out of the timed body), and each round's CPU window holds those reads too
# (a system call each): 0.35 to 2 µs of the thread's CPU a round on this 2-core machine, as much as a 1 µs body,
# which read 2.79 cores of its one thread (copy_to_device, cpp on cpu). From 100 µs on it is about 2 % of the body.
THREAD_CPU_MIN_BODY_S = 1e-4


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process so far, all its threads together, in clock ticks (10 ms)."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name, field 2, may hold spaces: count from the ")" that closes it (field 3 is at 0).
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) * CLOCK_TICK_S, int(fields[12]) * CLOCK_TICK_S  # utime, stime: fields 14, 15


def process_cpu_clock(pid: int) -> int:
    """The clock id of process `pid`'s CPU time, all its threads (what clock_getcpuclockid(3) returns:
    Linux's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED))."""
    return (~pid << 3) | 2


def process_cpu_ns(pid: int) -> int:
    """CPU nanoseconds of a process so far, all its threads, exited ones included: the scheduler's own count,
    to the nanosecond but for the time a thread has been running since its last scheduler tick (1–10 ms), which the
    kernel adds only at that tick when another process asks. OSError once the process is gone."""
    return time.clock_gettime_ns(process_cpu_clock(pid))


def machine_busy_s() -> float:
    """The CPU seconds every process on the machine has used so far (/proc/stat's user, nice, system, irq and
    softirq, all CPUs), in clock ticks."""
    with open("/proc/stat") as stat:
        fields = [int(field) for field in stat.readline().split()[1:8]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) * CLOCK_TICK_S


# Below this the machine's ticks (10 ms, per CPU) say too little of what the other processes used.
MACHINE_OTHER_MIN_WALL_S = 1.0


def cores_available(pids) -> int:
    """The cores the processes may run on together (their CPU affinity)."""
    return len(set().union(*(os.sched_getaffinity(pid) for pid in pids)))


# The kernel brings another running thread's CPU time up to date only at its scheduler tick (1 to 10 ms),
# so the process clock read around a shorter body bills it what that thread used before: the process
# figure is kept only where the bodies are long enough for that to be small (docs/utilization.md#utilization).
PROCESS_CPU_MIN_BODY_S = 0.01


def phase_cpu(rounds, cores: int | None = None) -> dict:
    """The phase's own CPU use over its timed bodies, in cores: the thread that ran them, and the whole process
    (all intra-op threads), each where the bodies last long enough for what the CPU clocks hold beyond them to be
    small (THREAD_CPU_MIN_BODY_S, PROCESS_CPU_MIN_BODY_S), and never above what it can use: one core for the
    thread, the process's `cores` (its CPU affinity; the workers inherit pytest's) for the process."""
    cores = cores or cores_available([0])
    wall = sum(timed.ns for timed in rounds) or 1
    median_s = statistics.median(timed.ns for timed in rounds) / 1e9

    def figure(cpu_ns: int, min_body_s: float, most: int) -> float | None:
        return round(min(cpu_ns / wall, float(most)), 3) if median_s >= min_body_s else None

    return {"phase_thread_cpu_cores": figure(sum(timed.thread_cpu_ns for timed in rounds), THREAD_CPU_MIN_BODY_S, 1),
            "phase_cpu_cores": figure(sum(timed.cpu_ns for timed in rounds), PROCESS_CPU_MIN_BODY_S, cores)}


def phase_faults(rounds) -> dict:
    """The worker's page faults across each timed body (read just outside the clock), as the median of the
    rounds: a phase that faults its memory back in every round shows it here (docs/page-faults.md)."""
    return {"minor_faults_per_round": statistics.median(timed.minor_faults for timed in rounds),
            "major_faults_per_round": statistics.median(timed.major_faults for timed in rounds)}


def phase_host_and_gpu(rounds) -> dict:
    """On cuda, each round's two clocks beside its wall time (docs/method.md#what-is-measured), in seconds, and their
    medians: host CPU (the CPU time of the thread that ran the body, up to its end, before the closing synchronize)
    and GPU (between the events recorded around the body). {} where the worker read neither (cpu)."""
    figures = {}
    for name, values in (("host_cpu", [timed.host_cpu_ns for timed in rounds]),
                         ("gpu", [timed.gpu_ns for timed in rounds])):
        if values and None not in values:
            figures |= {f"{name}_s": [ns / 1e9 for ns in values], f"{name}_median_s": statistics.median(values) / 1e9}
    return figures


class CpuWindow:
    """The CPU time of one or more processes (all their threads) across a window, in cores of the window's wall time.

    The CPU time is the processes' CPU clock (process_cpu_ns), read inside the wall-clock window (wall, CPU
    at the start; CPU, wall at the end), so the time divided is never shorter than the time counted. /proc's
    user and system times count 10 ms clock ticks, and a window of a few ms read 0 or 1 of them: 2.23 cores
    for one worker on 2 cores (test_worker_overhead); they remain only for the user/system split. A process
    running when the window starts may still bring up to one scheduler tick of earlier time per running thread,
    so a short window can read more than the processes' cores: `cores` is then the cores available, and
    cpu_s / wall_s what was read. With several processes, `processes` holds each one's figures over the same
    window, and the totals are theirs together.

    `machine_other_cores` is what everything else on the machine used meanwhile (pytest included), in cores: a
    benchmark that shared its cores with other work shows it (one busy process made a one-job epoch of python
    on 2 cores 2.4x as long, two 4.8x, as its two intra-op threads wait for each other at every barrier). It is
    null for windows under MACHINE_OTHER_MIN_WALL_S."""

    def __init__(self, pids):
        self.pids = [pids] if isinstance(pids, int) else list(pids)
        self.available = {pid: cores_available([pid]) for pid in self.pids}
        self.result: dict | None = None  # what stop() read
        self.totals: tuple | None = None  # and the sums it came from: CPU ns, user s, system s, machine s, wall s, cores
        self.started = time.perf_counter()
        self.machine = machine_busy_s()
        self.ticks = [cpu_times(pid) for pid in self.pids]
        self.cpu = [process_cpu_ns(pid) for pid in self.pids]

    @staticmethod
    def _figures(cpu_ns: int, user: float, system: float, wall: float, available: int) -> dict:
        return {"cores": round(min(cpu_ns / 1e9 / wall, float(available)), 3), "cpu_s": round(cpu_ns / 1e9, 6),
                "user_s": round(user, 3), "system_s": round(system, 3), "cores_available": available}

    @classmethod
    def _total(cls, cpu_ns: int, user: float, system: float, machine: float, wall: float, available: int) -> dict:
        total = cls._figures(cpu_ns, user, system, wall, available)
        total["wall_s"] = round(wall, 6)
        total["machine_other_cores"] = (round(max(0.0, machine - cpu_ns / 1e9) / wall, 2)
                                        if wall >= MACHINE_OTHER_MIN_WALL_S else None)
        return total

    def stop(self) -> dict | None:
        try:
            cpu = [process_cpu_ns(pid) - before for pid, before in zip(self.pids, self.cpu)]
            ticks = [cpu_times(pid) for pid in self.pids]
        except OSError:  # a worker died during the benchmark, which fails it anyway
            return None
        machine = machine_busy_s() - self.machine
        wall = time.perf_counter() - self.started
        each = [self._figures(ns, user - user0, system - system0, wall, self.available[pid]) | {"pid": pid}
                for pid, ns, (user, system), (user0, system0) in zip(self.pids, cpu, ticks, self.ticks)]
        self.totals = (sum(cpu), sum(f["user_s"] for f in each), sum(f["system_s"] for f in each), machine, wall,
                       cores_available(self.pids))
        total = self._total(*self.totals)
        if len(self.pids) > 1:
            total["processes"] = each
        self.result = total
        return total

    @classmethod
    def over(cls, windows: list[CpuWindow]) -> dict | None:
        """The figures of one stopped window, or of several one after another as one window's (the training run's
        rounds, each a fresh worker): their CPU time over their summed wall time, the time between them in none.
        None where one of them could not be read."""
        if not windows or any(window.totals is None for window in windows):
            return None
        if len(windows) == 1:
            return windows[0].result
        cpu_ns, user, system, machine, wall, _ = (sum(column) for column in zip(*(w.totals for w in windows)))
        return cls._total(cpu_ns, user, system, machine, wall, max(window.totals[5] for window in windows))
