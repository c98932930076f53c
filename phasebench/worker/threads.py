"""What a case's counted rounds went through, read outside every clock (docs/method.md#what-the-rounds-went-through):
each worker thread's own CPU time and context switches, its migrations between CPUs, Python's garbage collections,
a canary of fixed work, and, in the pytest process, the machine's steal time and whether it has hardware counters.

The worker reads its threads when the counted rounds open and when they close (a request each, never inside a
round): each thread's CPU clock (Linux's per-thread CPU clock for its TID, to the nanosecond, not /proc's 10 ms
ticks), its name and its voluntary and involuntary context switches (/proc/self/task/TID/comm and status), and its
migrations: the scheduler's own count (/proc/self/task/TID/sched se.nr_migrations, which the kernel keeps anyway)
where the kernel shows it, else a perf software counter (PERF_COUNT_SW_CPU_MIGRATIONS, the same count at the same
place in the scheduler) opened on each thread, which costs every context switch of a counted thread a little while
the rounds run. No torch, and of the suite only the leaf phasebench.cpu_windows: both workers and the pytest process
import it.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import os
import platform
import time
from pathlib import Path

from phasebench.cpu_windows import CLOCK_TICK_S

TASKS = Path("/proc/self/task")
PMU_DEVICES = Path("/sys/bus/event_source/devices")
# The CPU's performance-monitoring unit as perf sees it: "cpu" on x86 (cpu_core/cpu_atom on hybrid Intel parts), an
# armv8 PMU's own name on Arm.
CPU_PMUS = ("cpu", "cpu_core", "cpu_atom")
# A perf counter of migrations adds to each context switch of a counted thread, inside the rounds too (a pipe
# ping-pong between two threads, the main one counted, shows it): why the scheduler's own count is read first.


# -- threads ------------------------------------------------------------------------------------------------------

def thread_cpu_clock(tid: int) -> int:
    """The clock id of thread `tid`'s CPU time: Linux's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), valid for any
    thread of the calling process (what pthread_getcpuclockid(3) returns for one of its own threads)."""
    return (~tid << 3) | 6


def thread_cpu_ns(tid: int) -> int:
    """Thread `tid`'s CPU nanoseconds so far (user and system), to the nanosecond; OSError once it has ended."""
    return time.clock_gettime_ns(thread_cpu_clock(tid))


def thread_ids() -> list[int]:
    """This process's threads (/proc/self/task), main thread included."""
    return sorted(int(name) for name in os.listdir(TASKS))


def thread_name(tid: int) -> str:
    return (TASKS / str(tid) / "comm").read_text().strip()


def context_switches(tid: int) -> tuple[int, int]:
    """Thread `tid`'s (voluntary, involuntary) context switches so far (/proc/self/task/TID/status)."""
    found = {}
    for line in (TASKS / str(tid) / "status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            found[key] = int(value)
    return found["voluntary_ctxt_switches"], found["nonvoluntary_ctxt_switches"]


def sched_migrations(tid: int) -> int | None:
    """Thread `tid`'s migrations between CPUs so far, as the scheduler counts them (se.nr_migrations in
    /proc/self/task/TID/sched); None where the kernel shows no such file or field (it needs CONFIG_SCHED_DEBUG)."""
    try:
        text = (TASKS / str(tid) / "sched").read_text()
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "se.nr_migrations":
            return int(value)
    return None


# -- perf software counters ------------------------------------------------------------------------------------

class PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr as far as PERF_ATTR_SIZE_VER0 (64 bytes), enough for a software counter."""

    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64), ("wakeup_events", ctypes.c_uint32),
                ("bp_type", ctypes.c_uint32), ("config1", ctypes.c_uint64)]


PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS = 1, 4
PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "riscv64": 241, "ppc64le": 319, "s390x": 331, "i686": 336}


def perf_paranoid() -> str:
    try:
        return Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    except OSError:
        return "unreadable"


def perf_migrations_counter(tid: int) -> int | str:
    """A perf counter of thread `tid`'s migrations (a file descriptor; read it with read_counter, close it), or why
    none can be opened. The kernel side is counted (exclude_kernel off): migrations happen in the scheduler, so a
    user-only counter would read 0 however often the thread moved; kernel.perf_event_paranoid above 1 refuses that
    to a process without CAP_PERFMON, and the reason says so."""
    number = PERF_EVENT_OPEN.get(platform.machine())
    if number is None:
        return f"perf_event_open: its system call number on {platform.machine()} is not known here"
    attr = PerfEventAttr(type=PERF_TYPE_SOFTWARE, size=ctypes.sizeof(PerfEventAttr),
                         config=PERF_COUNT_SW_CPU_MIGRATIONS)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(ctypes.c_long(number), ctypes.byref(attr), ctypes.c_int(tid), ctypes.c_int(-1),
                      ctypes.c_int(-1), ctypes.c_ulong(0))
    if fd >= 0:
        return fd
    code = ctypes.get_errno()
    why = f"perf_event_open refused ({errno.errorcode.get(code, code)}: {os.strerror(code)})"
    if code in (errno.EACCES, errno.EPERM):
        why += (f"; kernel.perf_event_paranoid is {perf_paranoid()} (counting the scheduler's migrations needs at "
                f"most 1, or CAP_PERFMON), or a seccomp filter refuses the call")
    return why


def read_counter(fd: int) -> int:
    return int.from_bytes(os.read(fd, 8), "little")


# -- the rest of the machine --------------------------------------------------------------------------------------

def steal_s() -> float:
    """The machine's steal time so far: what its hypervisor ran elsewhere while its CPUs wanted to run (/proc/stat's
    cpu line, the 8th value, all CPUs summed), in seconds of clock ticks (usually 10 ms)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()
    return int(fields[8]) * CLOCK_TICK_S if len(fields) > 8 else 0.0


def hardware_counters() -> tuple[str, str]:
    """("absent" or "present", why): whether the machine exposes a CPU performance-monitoring unit to perf
    (/sys/bus/event_source/devices). Nothing is counted with it: where present, the reason says so."""
    try:
        devices = sorted(entry.name for entry in PMU_DEVICES.iterdir())
    except OSError as error:
        return "absent", f"{PMU_DEVICES} unreadable ({error.strerror})"
    pmus = [name for name in devices if name in CPU_PMUS or name.startswith("armv")]
    if not pmus:
        return "absent", f"no CPU PMU in {PMU_DEVICES} (it lists {', '.join(devices) or 'nothing'})"
    return "present", f"CPU PMU {', '.join(pmus)} in {PMU_DEVICES}; not counted"


def gc_collections() -> list[int]:
    """Python's garbage collections so far in this process, per generation (gc.get_stats: each collection counts
    once, in the generation it collected, as gc.callbacks sees one "start" for it). Reading it runs nothing in
    between, where a gc.callbacks callback would run inside every collection, timed bodies included."""
    return [generation["collections"] for generation in gc.get_stats()]


# The canary: the same pure-Python loop in both workers (both run it in their interpreter: the C++ worker's host
# one), of fixed instructions, timed best of CANARY_REPEATS so that one interruption does not read as a slow machine.
CANARY_ITERATIONS, CANARY_REPEATS = 50_000, 3


def canary_work(iterations: int = CANARY_ITERATIONS) -> int:
    x = 1
    for _ in range(iterations):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def canary_ns(repeats: int = CANARY_REPEATS) -> int:
    """The canary's best time of `repeats`, in ns: how fast this machine runs fixed work now."""
    best = None
    for _ in range(repeats):
        start = time.perf_counter_ns()
        canary_work()
        took = time.perf_counter_ns() - start
        best = took if best is None else min(best, took)
    return best


# -- the worker's window over its counted rounds ---------------------------------------------------------------------

def sample_thread(tid: int) -> dict | None:
    """One thread's figures so far; None once it has ended."""
    try:
        voluntary, involuntary = context_switches(tid)
        return {"tid": tid, "name": thread_name(tid), "cpu_ns": thread_cpu_ns(tid),
                "voluntary_ctxt_switches": voluntary, "nonvoluntary_ctxt_switches": involuntary,
                "migrations": sched_migrations(tid)}
    except (OSError, KeyError):
        return None


class Window:
    """The worker's side of a case's counted rounds: open() just before the first, close() just after the last, and
    add_round() around each round in between (its garbage collections). Nothing is read inside a round."""

    def __init__(self):
        self.pid = os.getpid()
        self.before: dict[int, dict] = {}
        self.counters: dict[int, int] = {}  # perf counters per thread, where the scheduler's count is not shown
        self.migrations_source: str | None = None
        self.migrations_unavailable: str | None = None
        self.gc = [0, 0, 0]

    def open(self) -> None:
        self.before = {tid: sample for tid in thread_ids() if (sample := sample_thread(tid)) is not None}
        if all(sample["migrations"] is not None for sample in self.before.values()):
            self.migrations_source = "sched"
            return
        self.migrations_source = "perf"
        for tid in self.before:
            counter = perf_migrations_counter(tid)
            if isinstance(counter, str):
                self.migrations_source, self.migrations_unavailable = None, counter
                self.discard()
                return
            self.counters[tid] = counter

    def add_round(self, before: list[int], after: list[int]) -> None:
        self.gc = [total + b - a for total, a, b in zip(self.gc, before, after)]

    def discard(self) -> None:
        """Closes its perf counters, if any, without reading them (a window a failed case left open)."""
        for fd in self.counters.values():
            os.close(fd)
        self.counters = {}

    def _migrations(self, tid: int, now: dict, then: dict | None) -> int | None:
        """The thread's migrations across the window (from its start, for one started inside it, where the
        scheduler's count is read; a perf counter was opened only on the threads there at the start)."""
        if self.migrations_source == "sched" and now["migrations"] is not None:
            return now["migrations"] - (then["migrations"] if then is not None else 0)
        if self.migrations_source == "perf" and tid in self.counters:
            return read_counter(self.counters[tid])
        return None

    def close(self) -> dict:
        """Each thread's figures across the window: CPU seconds, context switches and migrations (deltas); a thread
        started inside it counts from its start ("started"), one that ended inside it has no figures ("ended")."""
        threads = []
        for tid in sorted(set(thread_ids()) | set(self.before)):
            now, then = sample_thread(tid), self.before.get(tid)
            if now is None:
                if then is not None:
                    threads.append({"pid": self.pid, "tid": tid, "name": then["name"], "cpu_s": None,
                                    "voluntary_ctxt_switches": None, "nonvoluntary_ctxt_switches": None,
                                    "cpu_migrations": None, "started": False, "ended": True})
                continue
            start = then or {"cpu_ns": 0, "voluntary_ctxt_switches": 0, "nonvoluntary_ctxt_switches": 0}
            threads.append({
                "pid": self.pid, "tid": tid, "name": now["name"], "cpu_s": (now["cpu_ns"] - start["cpu_ns"]) / 1e9,
                "voluntary_ctxt_switches": now["voluntary_ctxt_switches"] - start["voluntary_ctxt_switches"],
                "nonvoluntary_ctxt_switches": now["nonvoluntary_ctxt_switches"] - start["nonvoluntary_ctxt_switches"],
                "cpu_migrations": self._migrations(tid, now, then),
                "started": then is None, "ended": False})
        self.discard()
        return {"threads": threads, "gc_collections": list(self.gc), "cpu_migrations_source": self.migrations_source,
                "cpu_migrations_unavailable": self.migrations_unavailable}


def migrations(threads: list[dict], source: str | None) -> int | None:
    """The threads' migrations summed; None where none could be read (no source)."""
    return sum(thread["cpu_migrations"] or 0 for thread in threads) if source else None
