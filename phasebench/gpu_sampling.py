"""A GPU's utilization while a benchmark runs, from NVML (phasebench/utilization.py says which call gives which
figure, and why the GPU is found by the PCI bus id its worker reports)."""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque

POLL_INTERVAL_S = 0.1  # how often a GPU is polled where its driver buffers no samples
# The member of NVML's value union that each nvmlValueType_t fills (NVML_VALUE_TYPE_DOUBLE = 0, ...).
VALUE_FIELDS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def summarize(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "median": None, "max": None}
    return {"mean": round(statistics.fmean(values), 2), "median": round(statistics.median(values), 2),
            "max": round(max(values), 2)}


class BufferedReader:
    """The driver's samples of one kind (nvmlDeviceGetSamples) newer than the last one read."""

    source = "nvmlDeviceGetSamples"

    def __init__(self, nvml, handle, sample_type: int, scale: float):
        self.nvml, self.handle, self.sample_type, self.scale = nvml, handle, sample_type, scale
        self.last_seen = 0  # the driver's timestamp (µs) of the newest sample read
        self.spacings = deque(maxlen=64)

    @property
    def interval_s(self) -> float | None:
        return statistics.median(self.spacings) / 1e6 if self.spacings else None

    def read(self) -> list[float]:
        try:
            value_type, samples = self.nvml.nvmlDeviceGetSamples(self.handle, self.sample_type, self.last_seen)
        except self.nvml.NVMLError_NotFound:  # nothing sampled since last_seen
            return []
        field = VALUE_FIELDS[value_type]
        fresh = sorted((s.timeStamp, getattr(s.sampleValue, field)) for s in samples)  # in time order
        stamps = ([self.last_seen] if self.last_seen else []) + [stamp for stamp, _ in fresh]
        self.spacings.extend(later - earlier for earlier, later in zip(stamps, stamps[1:]))
        if fresh:
            self.last_seen = fresh[-1][0]
        return [value * self.scale for _, value in fresh]


class PolledReader:
    """One reading of a current value per call."""

    source = "nvmlDeviceGetUtilizationRates"

    def __init__(self, read_value, scale: float):
        self.read_value, self.scale = read_value, scale

    def read(self) -> list[float]:
        return [self.read_value() * self.scale]


def gpu_readers(nvml, handle) -> dict:
    """A reader per metric: the driver's buffered samples where the GPU keeps them, else polling."""

    def buffered_or_polled(sample_type: int, read_value, scale: float = 1.0):
        reader = BufferedReader(nvml, handle, sample_type, scale)
        try:
            # The driver samples all the time, so an empty buffer means it keeps none of this kind
            # (an H200 under driver 580 has no processor-clock samples). This read also learns the
            # driver's sampling period.
            if reader.read():
                return reader
        except nvml.NVMLError_NotSupported:
            pass
        return PolledReader(read_value, scale)

    def rates():
        return nvml.nvmlDeviceGetUtilizationRates(handle)

    return {
        "utilization_pct": buffered_or_polled(nvml.NVML_GPU_UTILIZATION_SAMPLES, lambda: rates().gpu),
        "memory_utilization_pct": buffered_or_polled(nvml.NVML_MEMORY_UTILIZATION_SAMPLES, lambda: rates().memory),
        "memory_used_mib": PolledReader(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used, 1 / 2**20),
        "power_w": buffered_or_polled(nvml.NVML_TOTAL_POWER_SAMPLES, lambda: nvml.nvmlDeviceGetPowerUsage(handle),
                                      1e-3),  # NVML gives milliwatts
        "sm_clock_mhz": buffered_or_polled(nvml.NVML_PROCESSOR_CLK_SAMPLES,
                                           lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        # With the clock and the power: a run that throttles shows it (the driver buffers no temperature samples).
        "temperature_c": PolledReader(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU), 1.0),
    }


class GpuWindow:
    """One GPU, sampled on a thread of the pytest process from start() to stop()."""

    def __init__(self, nvml, readers: dict, interval_s: float = POLL_INTERVAL_S):
        self.nvml, self.readers, self.interval_s = nvml, readers, interval_s
        self.values = {name: [] for name in readers}
        self.gaps: list[dict] = []
        self.failing: set[str] = set()  # errors of the last poll, so a lasting error is one gap
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="phasebench-gpu-sampler", daemon=True)

    def start(self) -> None:
        self.started = time.perf_counter()
        self.poll(keep=False)  # what the driver buffered before the window is not the benchmark's
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.wait(self.interval_s):
            self.poll()

    def poll(self, keep: bool = True) -> None:
        with self.lock:
            errors = set()
            for name, reader in self.readers.items():
                try:
                    values = reader.read()
                except self.nvml.NVMLError as error:
                    errors.add(f"{type(error).__name__}: {error}")
                    continue
                if keep:
                    self.values[name].extend(values)
            at_s = round(time.perf_counter() - self.started, 3)
            self.gaps += [{"error": error, "at_s": at_s} for error in sorted(errors - self.failing)]
            self.failing = errors

    def stop(self) -> dict:
        self.stopping.set()
        self.thread.join()
        self.poll()  # the samples since the thread's last poll
        return figures([self])


def figures(windows: list[GpuWindow]) -> dict:
    """The figures of one stopped window, or of several of one GPU one after another as one window's (the training
    run's rounds, each a fresh worker): every window's samples together, each gap at its seconds since the first
    window began."""
    first = windows[0]
    utilization = first.readers["utilization_pct"]
    buffered = isinstance(utilization, BufferedReader)
    values = {name: [value for window in windows for value in window.values[name]] for name in first.values}
    gaps = [gap | {"at_s": round(gap["at_s"] + window.started - first.started, 3)}
            for window in windows for gap in window.gaps]
    return {"source": utilization.source, "interval_s": utilization.interval_s if buffered else first.interval_s,
            "samples": len(values["utilization_pct"]), "gaps": gaps,
            **{name: summarize(kept) for name, kept in values.items()}}
