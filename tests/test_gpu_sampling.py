"""The GPU samplers (phasebench/utilization.py): aggregation, device selection and NVML errors against a fake NVML
(the real pynvml module with its calls monkeypatched to scripted GPUs), and the missing-library path against the
real NVML of a machine without an NVIDIA driver."""

import os
import time
from types import SimpleNamespace

import pynvml
import pytest

from phasebench import utilization
from phasebench.gpu_sampling import GpuWindow, gpu_readers
from phasebench.utilization import Monitor
from tests.utilization_fakes import CPU_KEYS, fake_benchmark, monitor

US = 1_000_000
PERIOD_US = 166_667  # a driver sampling period of 1/6 s
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
        self.current_temperature_c = 40
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

    def temperature(gpu, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return gpu.current_temperature_c

    for name, function in {
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlDeviceGetHandleByPciBusId": handle_by_bus_id, "nvmlDeviceGetSamples": samples,
        "nvmlDeviceGetUtilizationRates": polled(lambda gpu: gpu.current_utilization),
        "nvmlDeviceGetMemoryInfo": polled(lambda gpu: SimpleNamespace(used=gpu.current_memory_used)),
        "nvmlDeviceGetPowerUsage": polled(lambda gpu: gpu.current_power_mw),
        "nvmlDeviceGetClockInfo": polled(clock),
        "nvmlDeviceGetTemperature": polled(temperature),
    }.items():
        monkeypatch.setattr(pynvml, name, function)

    def install(cuda_order: list[FakeGpu], nvml_gpus: list[FakeGpu] | None = None) -> None:
        gpus.extend(sorted(cuda_order, key=lambda gpu: gpu.bus_id) if nvml_gpus is None else nvml_gpus)
        gpu_order.extend(cuda_order)

    yield install
    gpu_order.clear()


CUDA_ORDER: list = []  # the fake GPUs as the workers' CUDA numbers them (fake_nvml fills it)


def worker_on(device: str, impl: str = "python"):
    """Something with a worker's pid, device, impl and the PCI bus id of its GPU as the worker reports it: this
    process stands in for the worker."""
    index = int(device.partition(":")[2] or 0)
    bus_id = CUDA_ORDER[index].bus_id if device.startswith("cuda") and index < len(CUDA_ORDER) else None
    return SimpleNamespace(pid=os.getpid(), device=device, impl=impl, pci_bus_id=bus_id)


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
    assert result["temperature_c"] == {"mean": 40.0, "median": 40.0, "max": 40.0}  # polled, never buffered
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


def test_the_rounds_of_fresh_workers_pool_their_gpu_samples(fake_nvml):
    """The training run's rounds, each a fresh worker sampled across its train request: the case's gpu object holds
    every round's samples and none from between them, each gap at its seconds since the first round's window began."""
    gpu = FakeGpu("00000000:41:00.0")
    fake_nvml([gpu])
    samplers, benchmark = monitor(), fake_benchmark(group="training_run")
    with samplers.watch_rounds(benchmark, "python", "cuda") as each:
        with each(worker_on("cuda")):
            gpu.add_samples([10, 20])
            gpu.release_all()
        gpu.add_samples([99])  # between the rounds: the next worker's start-up
        gpu.release_all()
        time.sleep(0.05)
        with each(worker_on("cuda")):
            gpu.add_samples([60])
            gpu.release_all()
        with each(worker_on("cuda")):
            gpu.lost = True
    result = benchmark.extra_info["gpu"]
    assert result["source"] == "nvmlDeviceGetSamples" and result["samples"] == 3, result
    assert result["utilization_pct"] == {"mean": 30.0, "median": 20.0, "max": 60.0}
    assert [gap["error"] for gap in result["gaps"]] == ["NVMLError_GpuIsLost: GPU is lost"]
    assert result["gaps"][0]["at_s"] >= 0.05
    assert set(benchmark.extra_info["cpu"]) == CPU_KEYS
    assert samplers.summary_lines()[0].startswith("training_run: python-cuda GPU 30%/60% (3 samples) [1 NVML gaps] CPU ")


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


def test_sampling_off_leaves_the_rounds_and_the_run_beside_them_null():
    samplers, benchmark, free = Monitor(sampling=False), fake_benchmark(group="training_run"), {}
    with samplers.watch_rounds(benchmark, "python", "cuda") as each:
        with each(worker_on("cuda")):
            pass
    with samplers.watch_beside(benchmark, worker_on("cuda"), "free-running", free):
        pass
    assert benchmark.extra_info == {"gpu": None, "cpu": None} and free == {"gpu": None, "cpu": None}
    assert samplers.summary_lines() == []


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
