"""GPU and CPU utilization of a worker while a benchmark runs (docs/utilization.md#utilization).

The samplers run in the pytest process, never in the worker, and only read counters the kernel and
the driver keep anyway, so they take no time from the phases, which are timed inside the worker. This
module holds the session's Monitor and the MPS status; phasebench/cpu_windows.py reads the CPU and
phasebench/gpu_sampling.py the GPU.

- CPU, on every device: the worker's CPU time (all its threads) from its process CPU clock, to the
  nanosecond, over the wall time of the benchmark, in cores (1.0 = one core busy throughout), never more
  than the cores it may run on (CpuWindow, phasebench/cpu_windows.py, says why it could read more); with
  several workers (concurrent jobs), theirs together and each one's; where every round is a fresh worker
  (the training run), each round's train request, the rounds together (Monitor.watch_rounds).
  /proc/<pid>/stat's user and system times, in clock ticks (usually 10 ms), give the split between the two.
- GPU, on cuda: NVML (nvidia-ml-py, imported as pynvml) on the worker's GPU, found by the PCI bus id
  of its cuda device, never by index order (NVML numbers GPUs its own way and ignores
  CUDA_VISIBLE_DEVICES). A thread samples it every POLL_INTERVAL_S while the benchmark runs.

Which NVML call gives the GPU figures: nvmlDeviceGetSamples where the GPU offers it (source
"nvmlDeviceGetSamples"). Those are the driver's own buffered samples, one per driver sampling
period (interval_s, read off their timestamps), each covering just that period, so the figures
cover the benchmark's window and nothing before it. Where the GPU does not offer them (NVML says
Not Supported), nvmlDeviceGetUtilizationRates is polled instead (source
"nvmlDeviceGetUtilizationRates", interval_s = the polling interval): each reading averages over the
last 1/6 s to 1 s depending on the product, so it can reach back before a short benchmark began.
Each metric is read the same way on its own: buffered where the driver keeps samples of it, else
polled. Memory used is always polled (NVML buffers no samples of it); memory used and power are the
whole GPU's, whoever uses it. "sm_clock_mhz" is the driver's processor-clock samples when buffered,
which is the SM clock on the GPUs CUDA runs on today.

An NVML error during a benchmark (the GPU lost, say) never fails it: the benchmark keeps its time,
and the error is recorded as a gap in its "gpu" object with the seconds since the window began.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from phasebench import schema
from phasebench.cpu_windows import CpuWindow
from phasebench.gpu_sampling import POLL_INTERVAL_S, GpuWindow, gpu_readers
from phasebench.gpu_sampling import figures as gpu_figures

OFF_REASON = "utilization sampling turned off (--no-utilization)"
NO_GPU_REASON = "no GPU benchmarked"


# --- NVIDIA MPS ------------------------------------------------------------------------------------

MPS_PIPE_ENV, MPS_DEFAULT_PIPE_DIRECTORY = "CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"
MPS_PROCESSES = ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server")
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


def mps_processes() -> list[str]:
    """The MPS daemons visible in /proc (none from inside a container that does not share the host's pids)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (name := (entry / "comm").read_text().strip()) in MPS_PROCESSES:
                found.append(f"{name} (pid {entry.name})")
        except OSError:  # it ended while we looked
            continue
    return sorted(found)


def mps_status(compute_mode: str | None = None) -> dict:
    """Whether NVIDIA MPS (the Multi-Process Service) would serve this machine's CUDA processes, found by
    looking only: a CUDA client joins MPS through the control pipe in CUDA_MPS_PIPE_DIRECTORY (default
    /tmp/nvidia-mps), which exists while the daemon runs; its processes, where /proc shows them; and the
    GPU's compute mode (Exclusive_Process is how MPS is usually set up). MPS is never started or stopped.
    Without it, concurrent processes time-slice the GPU: one process's kernels at a time."""
    directory = os.environ.get(MPS_PIPE_ENV) or MPS_DEFAULT_PIPE_DIRECTORY
    control = Path(directory) / "control"
    try:
        pipe = control.is_fifo()
    except OSError:
        pipe = False
    processes = mps_processes()
    return {"running": pipe or bool(processes), "pipe_directory": directory,
            "pipe_directory_from": MPS_PIPE_ENV if os.environ.get(MPS_PIPE_ENV) else "default",
            "control_pipe": pipe, "processes": processes, "compute_mode": compute_mode}


# --- the session -----------------------------------------------------------------------------------

@dataclass
class Span:
    """One worker's GPU and CPU windows across one block (Monitor._span): None where not sampled."""
    gpu: GpuWindow | None
    cpu: CpuWindow | None


def figures(spans: list[Span]) -> tuple[dict | None, dict | None]:
    """The GPU and the CPU figures of one span, or of several one after another (the training run's rounds) as one:
    the GPU's null where no span sampled it, the CPU's where no span had a worker's or one could not be read."""
    gpus = [span.gpu for span in spans if span.gpu]
    cpus = [span.cpu for span in spans]
    return (gpu_figures(gpus) if gpus else None), (None if None in cpus else CpuWindow.over(cpus))


@dataclass
class Record:
    group: str
    label: str  # implementation-device[-workload], as in the test ids
    gpu: dict | None
    cpu: dict | None
    info: dict = field(default_factory=dict)  # the case's extra_info, which a phase case fills after its rounds

    def describe(self) -> str:
        parts = [self.label]
        if self.gpu:
            busy = self.gpu["utilization_pct"]
            parts.append(f"GPU {_pct(busy['mean'])}/{_pct(busy['max'])} ({self.gpu['samples']} samples)")
            if self.gpu["gaps"]:
                parts.append(f"[{len(self.gpu['gaps'])} NVML gaps]")
        if self.cpu:
            parts.append(f"CPU {self.cpu['cores']:.2f}")
        # What the counted rounds went through (docs/method.md#what-the-rounds-went-through), where the case read it.
        if self.info.get("canary_start_s") and self.info.get("canary_end_s"):
            parts.append(f"canary {self.info['canary_start_s'] * 1e3:.1f}→{self.info['canary_end_s'] * 1e3:.1f} ms")
        if self.info.get("steal_s"):
            parts.append(f"steal {self.info['steal_s']:.2f} s")
        return " ".join(parts)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


class Monitor:
    """The session's utilization samplers: what each benchmark recorded, and why no GPU was sampled."""

    def __init__(self, sampling: bool = True, gpu_expected: bool = True, interval_s: float = POLL_INTERVAL_S):
        self.sampling, self.interval_s = sampling, interval_s
        self.nvml = None
        self.readers: dict[str, dict] = {}  # per cuda device
        self.records: list[Record] = []
        # machine_info["phasebench"]["gpu_sampling"]: None while GPU sampling works.
        self.reason = None if sampling else OFF_REASON
        if sampling and not gpu_expected:
            self.reason = NO_GPU_REASON
        elif sampling:
            self._start_nvml()

    def _start_nvml(self) -> None:
        try:
            import pynvml
        except ImportError:
            self.reason = "nvidia-ml-py is not installed"
            return
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as error:
            self.reason = f"NVML unavailable: {error}"
            return
        self.nvml = pynvml

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.nvmlShutdown()
            self.nvml = None

    def mps(self, worker) -> dict | None:
        """mps_status() for a worker on cuda, with its GPU's compute mode from NVML where NVML is up; None on cpu."""
        if not worker.device.startswith("cuda"):
            return None
        mode = None
        if self.nvml is not None:
            try:
                handle = self.nvml.nvmlDeviceGetHandleByPciBusId(worker.pci_bus_id)
                code = self.nvml.nvmlDeviceGetComputeMode(handle)
                mode = COMPUTE_MODES.get(code, str(code))
            except self.nvml.NVMLError as error:
                mode = f"unknown ({type(error).__name__}: {error})"
        return mps_status(mode)

    def _gpu_window(self, worker) -> GpuWindow | None:
        """The sampler of the GPU the worker computes on: the worker reports its device's PCI bus id (NVML's
        spelling), so that this process never touches CUDA and never guesses how the worker numbers its GPUs."""
        device = worker.device
        if self.nvml is None or not device.startswith("cuda"):
            return None
        bus_id = getattr(worker, "pci_bus_id", None)
        if bus_id is None:
            self.reason = self.reason or f"{device}: the worker reported no PCI bus id"
            return None
        if bus_id not in self.readers:
            try:
                self.readers[bus_id] = gpu_readers(self.nvml, self.nvml.nvmlDeviceGetHandleByPciBusId(bus_id))
            except self.nvml.NVMLError as error:
                self.reason = self.reason or f"{device} (PCI {bus_id}) not sampled: {type(error).__name__}: {error}"
                return None
        return GpuWindow(self.nvml, self.readers[bus_id], self.interval_s)

    @contextmanager
    def watch(self, benchmark, worker):
        """Samples `worker`'s CPU and GPU while the block runs (the benchmark's rounds) and puts
        the results in benchmark.extra_info["cpu"] and ["gpu"] (null on cpu or without NVML).
        `worker` has a device and a pid, or `pids`: several workers whose CPU is taken together and each
        (test_concurrent_jobs); with neither, several workers of which none is known (cpu null)."""
        if not self.sampling:
            yield
            schema.write(benchmark, schema.Utilization, gpu=None, cpu=None)
            return
        with self._span(worker) as span:
            yield
        self._record(benchmark, worker.impl, worker.device, *figures([span]))

    @contextmanager
    def watch_rounds(self, benchmark, impl: str, device: str):
        """For a case whose every round is a fresh worker (the training run): yields each(worker), which samples one
        round's worker while its block runs (its train request: its training loop), as watch does. When the block
        ends, the rounds' windows together go into benchmark.extra_info["gpu"] and ["cpu"] as watch puts one
        window's: the workers' CPU time over the windows' summed wall time, and every window's GPU samples. A worker's
        start-up (its set-up included) and exit, between the windows, are in none."""
        spans = []
        yield lambda worker: self.window(worker, spans)
        self.record_windows(benchmark, impl, device, spans)

    @contextmanager
    def window(self, worker, into: list):
        """Samples `worker` while the block runs, as watch does, and appends the window to `into`, for a case measured
        before its benchmark runs (a paired measurement's blocks: phasebench/plugin/pairing.py); record_windows puts
        the windows together into the case's extra_info, as watch_rounds does."""
        if not self.sampling:
            yield
            return
        with self._span(worker) as span:
            yield
        into.append(span)

    def record_windows(self, benchmark, impl: str, device: str, spans: list) -> None:
        if not self.sampling:
            schema.write(benchmark, schema.Utilization, gpu=None, cpu=None)
            return
        self._record(benchmark, impl, device, *figures(spans))

    @contextmanager
    def watch_beside(self, benchmark, worker, name: str, into: dict):
        """Samples `worker` while the block runs as watch does, for a run that a case reports beside its rounds (the
        training run's free-running run): its figures go into `into` ("gpu", "cpu"; null as watch's are), not into
        the case's own; the summary lists them as the case's, followed by `name`."""
        into.update(gpu=None, cpu=None)
        if not self.sampling:
            yield
            return
        with self._span(worker) as span:
            yield
        into["gpu"], into["cpu"] = figures([span])
        if benchmark.enabled:
            self.records.append(Record(benchmark.group, f"{self._label(benchmark, worker.impl, worker.device)} {name}",
                                       into["gpu"], into["cpu"]))

    @contextmanager
    def _span(self, worker):
        """Samples `worker`'s GPU and CPU while the block runs; the yielded Span holds their stopped windows once it
        ends. The GPU's sampler thread stops even when the block fails."""
        gpu = self._gpu_window(worker)
        if gpu:
            gpu.start()
        try:
            pids = getattr(worker, "pids", None) or ([worker.pid] if worker.pid else [])
            cpu = CpuWindow(pids) if pids else None  # no pid: several workers, none the case's own
            span = Span(gpu, cpu)
            yield span
            if cpu:
                cpu.stop()
        finally:
            if gpu:
                gpu.stop()

    @staticmethod
    def _label(benchmark, impl: str, device: str) -> str:
        return "-".join(filter(None, (impl, device, benchmark.extra_info.get("workload"))))

    def _record(self, benchmark, impl: str, device: str, gpu: dict | None, cpu: dict | None) -> None:
        schema.write(benchmark, schema.Utilization, gpu=gpu, cpu=cpu)
        if benchmark.enabled:
            self.records.append(Record(benchmark.group, self._label(benchmark, impl, device), gpu, cpu,
                                       benchmark.extra_info))

    def summary_lines(self) -> list[str]:
        """A line per benchmark group for pytest's terminal summary."""
        groups: dict[str, list[Record]] = {}
        for record in self.records:
            groups.setdefault(record.group, []).append(record)
        lines = [f"{group}: " + ", ".join(r.describe() for r in sorted(records, key=lambda r: r.label))
                 for group, records in sorted(groups.items(), key=lambda item: str(item[0]))]
        if lines and self.reason:
            lines.append(f"GPU not sampled: {self.reason}")
        return lines


class CaseWatch:
    """A case's `utilization_of` (phasebench/plugin/fixtures.py): the session's Monitor, bound to its benchmark."""

    def __init__(self, monitor: Monitor, benchmark):
        self.monitor, self.benchmark = monitor, benchmark

    def __call__(self, worker):
        """`with utilization_of(worker): benchmark.pedantic(...)` (Monitor.watch)."""
        return self.monitor.watch(self.benchmark, worker)

    def rounds(self, impl: str, device: str):
        """`with utilization_of.rounds(impl, device) as each:` and in each round `with each(worker):`, where every
        round is a fresh worker (Monitor.watch_rounds)."""
        return self.monitor.watch_rounds(self.benchmark, impl, device)

    def window(self, worker, into: list):
        """`with utilization_of.window(worker, spans):` one block of a paired measurement (Monitor.window)."""
        return self.monitor.window(worker, into)

    def record_windows(self, impl: str, device: str, spans: list) -> None:
        """The paired measurement's windows of this case's implementation into its extra_info."""
        self.monitor.record_windows(self.benchmark, impl, device, spans)

    def beside(self, worker, name: str, into: dict):
        """`with utilization_of.beside(worker, name, into):` a run reported beside the rounds (Monitor.watch_beside)."""
        return self.monitor.watch_beside(self.benchmark, worker, name, into)
