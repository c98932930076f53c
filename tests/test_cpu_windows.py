"""The worker CPU figure (phasebench/cpu_windows.py) against real processes: one, several, windows of a few ms,
never above the cores they may use, what other processes used meanwhile, and a phase's own CPU figures."""

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from phasebench import cpu_windows
from phasebench.cpu_windows import CpuWindow, cpu_times, phase_cpu, process_cpu_ns
from phasebench.phase_round import PhaseRound
from tests.utilization_fakes import CPU_KEYS, fake_benchmark, monitor


def test_worker_cpu_time_from_proc(tmp_path):
    # A command name with a space and a ")" (the comm field of /proc/PID/stat), burning 0.3 s of CPU.
    odd_name = tmp_path / "py) x"
    odd_name.symlink_to(sys.executable)
    burn = "import time\nwhile time.process_time() < 0.3: pass\nprint('burnt', flush=True)\ntime.sleep(60)"
    child = subprocess.Popen([str(odd_name), "-c", burn], stdout=subprocess.PIPE, text=True)
    try:
        window = CpuWindow(child.pid)
        assert child.stdout.readline() == "burnt\n"
        result = window.stop()
        user, system = cpu_times(child.pid)
        so_far = process_cpu_ns(child.pid) / 1e9
        # Asleep: the child may still be on its way from the print to its sleep (2 ms of it were seen, loaded).
        while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "S":
            time.sleep(0.005)
        asleep = CpuWindow(child.pid)
        time.sleep(0.1)
        assert asleep.stop()["cores"] == 0
    finally:
        child.kill()
        child.wait()
    assert user + system >= 0.3 - cpu_windows.CLOCK_TICK_S and so_far >= 0.3
    assert 0.2 < result["cpu_s"] <= so_far + 1e-6  # all but the child's start-up, which may precede the window
    # /proc's ticks split it: user + system is the clock's figure within a tick of each, at either end.
    assert result["user_s"] + result["system_s"] == pytest.approx(result["cpu_s"], abs=4 * cpu_windows.CLOCK_TICK_S)
    assert result["cores"] == pytest.approx(result["cpu_s"] / result["wall_s"], abs=0.001)
    assert result["cores_available"] == len(os.sched_getaffinity(0))


# -- the CPU figure over short windows, and of several workers ----------------------------------------------------

# A stand-in worker: each line it reads asks it to burn that many ns of its CPU; it answers with what it burnt, and
# waits, blocked, for the next line, as a worker waits for its next request.
BURN_ON_REQUEST = """
import sys, time
for line in sys.stdin:
    start = time.process_time_ns()
    while time.process_time_ns() - start < int(line):
        pass
    print(time.process_time_ns() - start, flush=True)
"""
BURST_NS = 3_000_000


@contextlib.contextmanager
def burners(count: int):
    children = [subprocess.Popen([sys.executable, "-c", BURN_ON_REQUEST], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for _ in range(count)]
    try:
        for child in children:
            burn(child, 0)  # started: the next line finds it waiting
        yield children
    finally:
        for child in children:
            child.kill()
            child.wait()


def burn(child, ns: int) -> int:
    """Asks a burner for `ns` of CPU; returns what it burnt once it waits, blocked, for the next request (its CPU
    time counted to the nanosecond: a blocked process has none running since its last scheduler tick)."""
    child.stdin.write(f"{ns}\n")
    child.stdin.flush()
    burnt = int(child.stdout.readline())
    deadline = time.monotonic() + 10
    while process_state(child.pid) != "S" and time.monotonic() < deadline:
        time.sleep(0.0002)
    return burnt


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def test_a_window_of_a_few_ms_counts_what_the_worker_burnt():
    """A 3 ms burst in a window of a few ms is counted within 1 ms. /proc's user + system time, which this figure
    was before, counts 10 ms ticks: it read 0 or 10 ms of such a burst, 0 or over 2 cores (test_worker_overhead read
    2.23 and 2.62 on 2 cores)."""
    with burners(1) as (child,):
        for _ in range(5):
            window = CpuWindow(child.pid)
            burnt = burn(child, BURST_NS) / 1e9
            result = window.stop()
            assert burnt <= result["cpu_s"] <= burnt + 0.001, result
            assert result["cores"] == pytest.approx(result["cpu_s"] / result["wall_s"], abs=0.001)
            assert 0 < result["cores"] <= 1, result


def test_no_window_reads_more_cores_than_the_processes_may_use():
    """A process whose threads never stop brings up to a scheduler tick of earlier CPU time per running thread into
    a window (the kernel adds it only at the tick): windows of 1 ms read up to 4.8 cores on 2. The figure stops at
    the cores the process may use; cpu_s / wall_s keeps what was read."""
    spinning = "import hashlib, threading, time\n" \
               "def spin():\n    while True: hashlib.sha256(bytes(1 << 20)).digest()\n" \
               "for _ in range(3): threading.Thread(target=spin, daemon=True).start()\ntime.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", spinning])
    try:
        time.sleep(0.3)
        available = len(os.sched_getaffinity(child.pid))
        results = []
        for _ in range(50):
            window = CpuWindow(child.pid)
            time.sleep(0.001)
            results.append(window.stop())
    finally:
        child.kill()
        child.wait()
    assert all(result["cores_available"] == available for result in results)
    too_many = [result for result in results if not 0 <= result["cores"] <= available]
    assert not too_many, f"{len(too_many)} of {len(results)} windows above {available} cores: {too_many[:3]}"


def test_several_workers_together_and_each():
    with burners(2) as children:
        window = CpuWindow([child.pid for child in children])
        burnt = [burn(child, BURST_NS) / 1e9 for child in children]
        result = window.stop()
    each = result["processes"]
    assert [one["pid"] for one in each] == [child.pid for child in children]
    for one, own in zip(each, burnt):
        assert own <= one["cpu_s"] <= own + 0.001, one
        assert set(one) == CPU_KEYS - {"wall_s", "machine_other_cores"} | {"pid"}
        assert one["cores"] == pytest.approx(one["cpu_s"] / result["wall_s"], abs=0.001)
    assert result["cpu_s"] == pytest.approx(sum(one["cpu_s"] for one in each), abs=2e-6)  # each rounded to 1 µs
    assert result["cores"] == pytest.approx(result["cpu_s"] / result["wall_s"], abs=0.001)
    assert result["cores_available"] == len(os.sched_getaffinity(0))


def test_watching_several_workers_records_their_cpu():
    """test_concurrent_jobs' workers: the device watched once, the CPU of every worker (it was null)."""
    with burners(2) as children:
        samplers, benchmark = monitor(), fake_benchmark(group="concurrent_jobs-2")
        jobs = SimpleNamespace(pids=[child.pid for child in children], device="cpu", impl="python")
        with samplers.watch(benchmark, jobs):
            for child in children:
                burn(child, BURST_NS)
    cpu = benchmark.extra_info["cpu"]
    assert set(cpu) == CPU_KEYS | {"processes"} and len(cpu["processes"]) == 2
    assert cpu["cpu_s"] >= 2 * BURST_NS / 1e9 and benchmark.extra_info["gpu"] is None
    assert samplers.summary_lines()[0] == f"concurrent_jobs-2: python-cpu CPU {cpu['cores']:.2f}"


def test_the_rounds_of_fresh_workers_are_recorded_together():
    """The training run: every round a fresh worker, each sampled across its own block (its train request) alone; the
    case records the rounds' CPU time over their summed wall time as one window's figure, the time between them (a
    worker's start-up and exit) in none. A run reported beside the rounds (the free-running one) keeps its own."""
    samplers, benchmark = monitor(), fake_benchmark(group="training_run")
    burnt, started = 0, time.perf_counter()
    with samplers.watch_rounds(benchmark, "python", "cpu") as each:
        for _ in range(3):
            with burners(1) as (child,):
                time.sleep(0.1)  # between the rounds: in no window
                with each(SimpleNamespace(pid=child.pid, device="cpu", impl="python")):
                    burnt += burn(child, BURST_NS)
    elapsed = time.perf_counter() - started
    cpu = benchmark.extra_info["cpu"]
    assert set(cpu) == CPU_KEYS and benchmark.extra_info["gpu"] is None, benchmark.extra_info
    assert burnt / 1e9 <= cpu["cpu_s"] <= burnt / 1e9 + 0.003, cpu
    assert cpu["wall_s"] < elapsed - 0.3 and cpu["machine_other_cores"] is None, (cpu, elapsed)
    assert cpu["cores"] == pytest.approx(cpu["cpu_s"] / cpu["wall_s"], abs=0.001)

    free = {}
    with burners(1) as (child,):
        with samplers.watch_beside(benchmark, SimpleNamespace(pid=child.pid, device="cpu", impl="python"),
                                   "free-running", free):
            burn(child, BURST_NS)
    assert free["gpu"] is None and set(free["cpu"]) == CPU_KEYS and benchmark.extra_info["cpu"] is cpu
    assert samplers.summary_lines()[0] == (f"training_run: python-cpu CPU {cpu['cores']:.2f}, "
                                           f"python-cpu free-running CPU {free['cpu']['cores']:.2f}")


def test_a_round_whose_worker_could_not_be_read_leaves_the_rounds_cpu_null():
    samplers, benchmark = monitor(), fake_benchmark(group="training_run")
    with samplers.watch_rounds(benchmark, "python", "cpu") as each:
        with burners(1) as (child,), each(SimpleNamespace(pid=child.pid, device="cpu", impl="python")):
            burn(child, BURST_NS)
        with burners(1) as (child,), each(SimpleNamespace(pid=child.pid, device="cpu", impl="python")):
            child.kill()
            child.wait()  # reaped: its CPU clock is gone when the window ends
    assert benchmark.extra_info == {"gpu": None, "cpu": None}


def test_phase_cpu_figures_stay_within_what_the_worker_can_use():
    """A phase's CPU clocks are read just outside its wall clock: a body of 0.1 µs whose thread's CPU window held
    0.54 µs read 5.42 cores of its one thread. Such a body is too short to say (null); a longer one is bounded by one
    core for its thread and by the worker's cores for the process."""
    short = [PhaseRound(100, 560, 542, {})] * 100
    assert phase_cpu(short, cores=2) == {"phase_thread_cpu_cores": None, "phase_cpu_cores": None}
    assert phase_cpu([PhaseRound(200_000, 0, 150_000, {})] * 100, cores=2)["phase_thread_cpu_cores"] == 0.75
    clock_reads = [PhaseRound(200_000, 0, 202_000, {})] * 100  # 2 µs of clock reads in a 200 µs body's window
    assert phase_cpu(clock_reads, cores=2)["phase_thread_cpu_cores"] == 1
    # 20 ms bodies on 2 cores, another thread's earlier tick in the process clock: 2.2 read.
    busy = [PhaseRound(20_000_000, 44_000_000, 20_000_000, {})] * 100
    assert phase_cpu(busy, cores=2) == {"phase_thread_cpu_cores": 1, "phase_cpu_cores": 2}


def test_what_other_processes_used_meanwhile_is_recorded():
    """A burst of 0.6 s in a process not watched, inside a 1.1 s window of one that waits: the machine's other use
    shows; a window under a second leaves it null."""
    with burners(2) as (watched, other):
        window = CpuWindow(watched.pid)
        start = time.perf_counter()
        burn(other, 600_000_000)
        time.sleep(max(0.0, cpu_windows.MACHINE_OTHER_MIN_WALL_S + 0.1 - (time.perf_counter() - start)))
        result = window.stop()
        short = CpuWindow(watched.pid)
        assert short.stop()["machine_other_cores"] is None
    assert result["cpu_s"] < 0.01 and result["machine_other_cores"] >= 0.4, result
