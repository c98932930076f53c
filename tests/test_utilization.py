"""The utilization samplers (phasebench/utilization.py): aggregation, device selection and NVML errors
against a fake NVML (the real pynvml module with its calls monkeypatched to scripted GPUs), the
missing-library path against the real NVML of a machine without an NVIDIA driver, the worker
CPU figure against real processes (one, several, windows of a few ms, never above the cores they may use), and
that every benchmark of the suite records it."""

import ast
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest

from phasebench import utilization
from phasebench.utilization import CpuWindow, GpuWindow, Monitor, cpu_times, gpu_readers, phase_cpu, process_cpu_ns
from phasebench.worker.build import ROOT
from phasebench.worker.client import PhaseRound
from tests.test_faults import _data_options, run_suite

US = 1_000_000
PERIOD_US = 166_667  # a driver sampling period of 1/6 s
CPU_KEYS = {"cores", "cpu_s", "user_s", "system_s", "wall_s", "cores_available", "machine_other_cores"}
GPU_SAMPLES, MEMORY_SAMPLES = pynvml.NVML_GPU_UTILIZATION_SAMPLES, pynvml.NVML_MEMORY_UTILIZATION_SAMPLES
POWER_SAMPLES, CLOCK_SAMPLES = pynvml.NVML_TOTAL_POWER_SAMPLES, pynvml.NVML_PROCESSOR_CLK_SAMPLES


class FakeGpu:
    """One GPU as the fake NVML shows it. The driver's buffered samples are (driver µs, value) per
    sampling type, visible once `now` reaches them; the driver samples all along, so a GPU starts with
    a history from before any benchmark. Polled calls read the current_* values."""

    def __init__(self, bus_id: str, history: tuple[int, ...] = (0, 0), buffered: bool = True,
                 clock_samples: bool = True):
        self.bus_id, self.buffered, self.lost = bus_id, buffered, False
        kinds = (GPU_SAMPLES, MEMORY_SAMPLES, POWER_SAMPLES) + ((CLOCK_SAMPLES,) if clock_samples else ())
        self.samples = {kind: [] for kind in kinds}
        self.current_utilization = SimpleNamespace(gpu=0, memory=0)
        self.current_memory_used, self.current_power_mw, self.current_sm_clock = 0, 0, 0
        self.add_samples(list(history))
        self.release_all()

    def add_samples(self, utilization_pct: list[int], memory_pct: int = 5, power_mw: int = 100_000) -> None:
        """The driver's next samples, one period apart; they become visible when `now` reaches them."""
        start = max((stamp for stamp, _ in self.samples[GPU_SAMPLES]), default=10 * US)
        for i, value in enumerate(utilization_pct, 1):
            for kind, sample in ((GPU_SAMPLES, value), (MEMORY_SAMPLES, memory_pct), (POWER_SAMPLES, power_mw),
                                 (CLOCK_SAMPLES, 1980)):
                if kind in self.samples:
                    self.samples[kind].append((start + i * PERIOD_US, sample))

    def release_all(self) -> None:
        self.now = max((stamp for stamp, _ in self.samples[GPU_SAMPLES]), default=0)

    def check(self) -> None:
        if self.lost:
            raise pynvml.NVMLError_GpuIsLost()


@pytest.fixture
def fake_nvml(monkeypatch):
    """Installs a fake NVML; yields `install(cuda_order, nvml_gpus)`: cuda_order lists the FakeGpus in the order
    the workers' cuda indexes see them (worker_on reports their bus ids as a worker does), nvml_gpus those NVML
    lists (default: the same, in NVML's own order, by bus id)."""
    gpus: list[FakeGpu] = []  # as NVML lists them
    gpu_order = CUDA_ORDER

    def handle_by_bus_id(bus_id):
        for gpu in gpus:
            if gpu.bus_id == bus_id:
                return gpu
        raise pynvml.NVMLError_NotFound()

    def samples(gpu, kind, last_seen):
        gpu.check()
        if not gpu.buffered:
            raise pynvml.NVMLError_NotSupported()
        fresh = [pynvml.c_nvmlSample_t(stamp, pynvml.c_nvmlValue_t(uiVal=value))
                 for stamp, value in gpu.samples.get(kind, []) if last_seen < stamp <= gpu.now]
        if not fresh:
            raise pynvml.NVMLError_NotFound()
        return pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, fresh

    def polled(read):
        def call(gpu, *args):
            gpu.check()
            return read(gpu, *args)
        return call

    def clock(gpu, kind):
        assert kind == pynvml.NVML_CLOCK_SM
        return gpu.current_sm_clock

    for name, function in {
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlDeviceGetHandleByPciBusId": handle_by_bus_id, "nvmlDeviceGetSamples": samples,
        "nvmlDeviceGetUtilizationRates": polled(lambda gpu: gpu.current_utilization),
        "nvmlDeviceGetMemoryInfo": polled(lambda gpu: SimpleNamespace(used=gpu.current_memory_used)),
        "nvmlDeviceGetPowerUsage": polled(lambda gpu: gpu.current_power_mw),
        "nvmlDeviceGetClockInfo": polled(clock),
    }.items():
        monkeypatch.setattr(pynvml, name, function)

    def install(cuda_order: list[FakeGpu], nvml_gpus: list[FakeGpu] | None = None) -> None:
        gpus.extend(sorted(cuda_order, key=lambda gpu: gpu.bus_id) if nvml_gpus is None else nvml_gpus)
        gpu_order.extend(cuda_order)

    yield install
    gpu_order.clear()


CUDA_ORDER: list = []  # the fake GPUs as the workers' CUDA numbers them (fake_nvml fills it)


def fake_benchmark(group: str = "train_step", enabled: bool = True):
    return SimpleNamespace(extra_info={}, group=group, enabled=enabled)


def worker_on(device: str, impl: str = "python"):
    """Something with a worker's pid, device, impl and the PCI bus id of its GPU as the worker reports it: this
    process stands in for the worker."""
    index = int(device.partition(":")[2] or 0)
    bus_id = CUDA_ORDER[index].bus_id if device.startswith("cuda") and index < len(CUDA_ORDER) else None
    return SimpleNamespace(pid=os.getpid(), device=device, impl=impl, pci_bus_id=bus_id)


def monitor() -> Monitor:
    """A monitor whose thread does not poll during a test, so only start and stop read the fake."""
    return Monitor(interval_s=3600)


def test_buffered_samples_of_the_window_only(fake_nvml):
    # Sampled before the benchmark: 99%. Like an H200 under driver 580, it keeps no clock samples.
    gpu = FakeGpu("00000000:41:00.0", history=(99, 99), clock_samples=False)
    fake_nvml([gpu])
    gpu.current_memory_used, gpu.current_sm_clock = 1536 * 2**20, 1755
    samplers, benchmark = monitor(), fake_benchmark()
    with samplers.watch(benchmark, worker_on("cuda")):
        gpu.add_samples([10, 20, 60], memory_pct=30, power_mw=250_500)
        gpu.release_all()

    result = benchmark.extra_info["gpu"]
    assert result["source"] == "nvmlDeviceGetSamples"
    assert result["interval_s"] == pytest.approx(PERIOD_US / US)
    assert result["samples"] == 3 and result["gaps"] == []
    assert result["utilization_pct"] == {"mean": 30.0, "median": 20.0, "max": 60.0}
    assert result["memory_utilization_pct"] == {"mean": 30.0, "median": 30.0, "max": 30.0}
    assert result["power_w"] == {"mean": 250.5, "median": 250.5, "max": 250.5}
    assert result["sm_clock_mhz"] == {"mean": 1755.0, "median": 1755.0, "max": 1755.0}  # polled at the end
    assert result["memory_used_mib"] == {"mean": 1536.0, "median": 1536.0, "max": 1536.0}
    assert samplers.reason is None
    assert samplers.summary_lines() == ["train_step: python-cuda GPU 30%/60% (3 samples) CPU "
                                        f"{benchmark.extra_info['cpu']['cores']:.2f}"]


def test_device_found_by_pci_bus_id_not_by_index(fake_nvml):
    # CUDA_VISIBLE_DEVICES=1,0: the workers' cuda:0 is the GPU that NVML lists second.
    second, first = FakeGpu("00000000:41:00.0"), FakeGpu("00000000:1B:00.0")
    fake_nvml([second, first])
    samplers = monitor()
    for device, gpu, busy in (("cuda", second, 80), ("cuda:1", first, 7)):
        benchmark = fake_benchmark()
        with samplers.watch(benchmark, worker_on(device)):
            for each in (second, first):
                each.add_samples([busy if each is gpu else 50])
                each.release_all()
        assert benchmark.extra_info["gpu"]["utilization_pct"]["max"] == busy, device


def test_polling_where_the_gpu_buffers_no_samples(fake_nvml):
    gpu = FakeGpu("00000000:41:00.0", buffered=False)
    fake_nvml([gpu])
    window = GpuWindow(pynvml, gpu_readers(pynvml, gpu), interval_s=3600)
    gpu.current_utilization.gpu = 99  # before the window: read at start, not kept
    window.start()
    for busy, memory_mib, power_mw, clock in ((20, 100, 90_000, 1410), (40, 300, 110_000, 1980)):
        gpu.current_utilization = SimpleNamespace(gpu=busy, memory=busy // 2)
        gpu.current_memory_used, gpu.current_power_mw, gpu.current_sm_clock = memory_mib * 2**20, power_mw, clock
        window.poll()
    result = window.stop()  # polls once more: the last values again

    assert result["source"] == "nvmlDeviceGetUtilizationRates" and result["interval_s"] == 3600
    assert result["samples"] == 3
    assert result["utilization_pct"] == {"mean": 33.33, "median": 40.0, "max": 40.0}
    assert result["memory_utilization_pct"]["max"] == 20
    assert result["memory_used_mib"] == {"mean": 233.33, "median": 300.0, "max": 300.0}
    assert result["power_w"] == {"mean": 103.33, "median": 110.0, "max": 110.0}
    assert result["sm_clock_mhz"]["median"] == 1980


def test_gpu_lost_mid_run_is_one_gap_and_keeps_earlier_samples(fake_nvml):
    gpu = FakeGpu("00000000:41:00.0")
    fake_nvml([gpu])
    window = GpuWindow(pynvml, gpu_readers(pynvml, gpu), interval_s=3600)
    window.start()
    gpu.add_samples([30, 50])
    gpu.release_all()
    window.poll()
    gpu.lost = True
    window.poll()
    window.poll()  # a lasting error is one gap
    gpu.lost = False
    gpu.add_samples([70])
    gpu.release_all()
    result = window.stop()

    assert [gap["error"] for gap in result["gaps"]] == ["NVMLError_GpuIsLost: GPU is lost"]
    assert result["gaps"][0]["at_s"] >= 0
    assert result["samples"] == 3 and result["utilization_pct"]["max"] == 70
    assert result["sm_clock_mhz"]["max"] == 1980  # buffered, as the GPU keeps clock samples


def test_gpu_lost_does_not_fail_the_benchmark(fake_nvml):
    gpu = FakeGpu("00000000:41:00.0")
    fake_nvml([gpu])
    samplers, benchmark = monitor(), fake_benchmark()
    with samplers.watch(benchmark, worker_on("cuda", impl="cpp")):
        timed = time.perf_counter_ns()  # the benchmark's own work, untouched by the samplers
        gpu.lost = True

    assert timed > 0
    assert benchmark.extra_info["gpu"]["samples"] == 0
    assert benchmark.extra_info["gpu"]["gaps"][0]["error"] == "NVMLError_GpuIsLost: GPU is lost"
    assert benchmark.extra_info["gpu"]["utilization_pct"] == {"mean": None, "median": None, "max": None}
    assert set(benchmark.extra_info["cpu"]) == CPU_KEYS
    assert samplers.summary_lines()[0].startswith("train_step: cpp-cuda GPU -/- (0 samples) [1 NVML gaps] CPU ")


def test_gpu_that_nvml_does_not_list_is_null_with_the_reason(fake_nvml):
    fake_nvml([FakeGpu("00000000:41:00.0")], nvml_gpus=[FakeGpu("00000000:1B:00.0")])
    samplers, benchmark = monitor(), fake_benchmark()
    with samplers.watch(benchmark, worker_on("cuda")):
        pass
    assert benchmark.extra_info["gpu"] is None and set(benchmark.extra_info["cpu"]) == CPU_KEYS
    assert samplers.reason == "cuda (PCI 00000000:41:00.0) not sampled: NVMLError_NotFound: Not Found"


def test_cpu_device_has_no_gpu_object_and_disabled_benchmarks_no_summary(fake_nvml):
    fake_nvml([FakeGpu("00000000:41:00.0")])
    samplers, benchmark = monitor(), fake_benchmark(enabled=False)
    with samplers.watch(benchmark, worker_on("cpu")):
        pass
    assert benchmark.extra_info["gpu"] is None and set(benchmark.extra_info["cpu"]) == CPU_KEYS
    assert samplers.summary_lines() == []


def test_sampling_off():
    samplers, benchmark = Monitor(sampling=False), fake_benchmark()
    with samplers.watch(benchmark, worker_on("cuda")):
        pass
    assert benchmark.extra_info == {"gpu": None, "cpu": None}
    assert samplers.reason == utilization.OFF_REASON and samplers.summary_lines() == []


def test_without_nvml_gpu_is_null_and_the_suite_records_why():
    """The real NVML on a machine without an NVIDIA driver: nvmlInit fails (NVML Shared Library Not Found)."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        expected = f"NVML unavailable: {error}"
    else:
        pynvml.nvmlShutdown()
        pytest.skip("NVML works on this machine")
    from phasebench.plugin.session import PhasebenchSession

    samplers, benchmark = Monitor(), fake_benchmark()
    with samplers.watch(benchmark, worker_on("cuda")):
        pass
    assert benchmark.extra_info["gpu"] is None and set(benchmark.extra_info["cpu"]) == CPU_KEYS
    session = SimpleNamespace(machine={"torch": "x"}, utilization=samplers, testing=None)
    assert PhasebenchSession.machine_info(session) == {"torch": "x", "gpu_sampling": expected, "testing": None}
    assert samplers.summary_lines()[-1] == f"GPU not sampled: {expected}"


def test_no_cuda_benchmark_is_the_reason():
    assert Monitor(gpu_expected=False).reason == utilization.NO_GPU_REASON


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
    assert user + system >= 0.3 - utilization.CLOCK_TICK_S and so_far >= 0.3
    assert 0.2 < result["cpu_s"] <= so_far + 1e-6  # all but the child's start-up, which may precede the window
    # /proc's ticks split it: user + system is the clock's figure within a tick of each, at either end.
    assert result["user_s"] + result["system_s"] == pytest.approx(result["cpu_s"], abs=4 * utilization.CLOCK_TICK_S)
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


# -- every benchmark records it -------------------------------------------------------------------------------------

def benchmark_tests() -> dict[str, list[str]]:
    """{test function: its parameters} of every test of the suite that takes pytest-benchmark's fixture."""
    found = {}
    for path in sorted((ROOT / "bench").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                arguments = [argument.arg for argument in node.args.args]
                if "benchmark" in arguments:
                    found[f"{path.name}::{node.name}"] = arguments
    return found


def test_every_benchmark_asks_for_utilization():
    tests = benchmark_tests()
    assert "test_concurrent_jobs.py::test_concurrent_jobs" in tests and len(tests) >= 6, tests
    assert not [name for name, arguments in tests.items() if "utilization_of" not in arguments]


def test_every_benchmark_records_the_worker_cpu(pytestconfig, saved_extra_info, tmp_path):
    """Each benchmark of the suite on cpu, as the test command runs it: each saves the CPU of the worker(s) it
    measured, never null (test_concurrent_jobs and test_loss_item saved null), and no gpu object on cpu. What
    pytest-benchmark's own fixture held after the real cases: those of this session where it ran every benchmark
    function on cpu with 2 concurrent jobs (the test command), else a child suite (python; about 15 s here)."""
    plain = {name: arguments for name, arguments in benchmark_tests().items() if "world_size" not in arguments}
    functions = {name.split("::")[1] for name in plain}
    ran_here = {nodeid.split("::")[-1]: info for nodeid, info in saved_extra_info.items() if "-cpu" in nodeid}
    if {name.split("[")[0] for name in ran_here} >= functions and "test_concurrent_jobs[python-cpu-2]" in ran_here:
        saved = ran_here
    else:
        saved = _child_suite_extra_info(pytestconfig, tmp_path, plain)
    assert {name.split("[")[0] for name in saved} == functions, sorted(saved)
    nulls = [name for name, entry in saved.items() if not isinstance(entry.get("cpu"), dict) or entry.get("gpu", "absent") is not None]
    assert not nulls, {name: saved[name] for name in nulls}
    assert len(saved["test_concurrent_jobs[python-cpu-2]"]["cpu"]["processes"]) == 2


def _child_suite_extra_info(pytestconfig, tmp_path, plain: dict) -> dict[str, dict]:
    """{test: its extra_info's cpu and gpu} of every plain benchmark function run once on cpu (python; 2 concurrent
    jobs) in a child pytest."""
    recorded = tmp_path / "extra_info.jsonl"  # tests/recorder.py writes each benchmark's extra_info there
    # bench/test_distributed.py is collected only under --world-size (docs/distributed.md): not in this run.
    run = run_suite(*sorted({f"bench/{name.split('::')[0]}" for name in plain}),
                    "-k", "not test_phase or data_loading", "--impl", "python", "--device", "cpu", "--jobs", "2",
                    "--models", "2", "--rounds", "2", "--warmup-rounds", "0", "--run-rounds", "1",
                    "--benchmark-disable", "-p", "tests.recorder", *_data_options(pytestconfig),
                    env={"PHASEBENCH_TEST_EXTRA_INFO": str(recorded)}, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return {entry["test"].split("::")[-1]: entry for entry in map(json.loads, recorded.read_text().splitlines())}


def test_what_other_processes_used_meanwhile_is_recorded():
    """A burst of 0.6 s in a process not watched, inside a 1.1 s window of one that waits: the machine's other use
    shows; a window under a second leaves it null."""
    with burners(2) as (watched, other):
        window = CpuWindow(watched.pid)
        start = time.perf_counter()
        burn(other, 600_000_000)
        time.sleep(max(0.0, utilization.MACHINE_OTHER_MIN_WALL_S + 0.1 - (time.perf_counter() - start)))
        result = window.stop()
        short = CpuWindow(watched.pid)
        assert short.stop()["machine_other_cores"] is None
    assert result["cpu_s"] < 0.01 and result["machine_other_cores"] >= 0.4, result
