"""What the pytest process knows of the machine without importing torch or touching CUDA: torch's and
torchvision's versions read from their version files, the GPUs NVML lists, and, only when a run needs them
(never for --collect-only or --help), torch's own facts from a probe process (phasebench/worker/probe.py).
Each worker reports its own device (its GPU's PCI bus id, phasebench/worker/server.py)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from phasebench import method, schema
from phasebench.handed_down import handed_down


def _version_file(package: str, names: tuple[str, ...]) -> dict[str, str | None] | None:
    """The named assignments of a package's version.py (torch's and torchvision's, e.g. __version__ = '2.14.1+cu130',
    cuda = '13.0'), or None where the file is not where it should be."""
    spec = importlib.util.find_spec(package)
    try:
        text = Path(spec.origin).with_name("version.py").read_text()
    except (AttributeError, TypeError, OSError):
        return None
    found = {}
    for name in names:
        match = re.search(rf"^{re.escape(name)}\s*(?::\s*[^=]+)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.M)
        found[name] = (match.group(1) or match.group(2)) if match else None
    return found


def torch_build() -> dict[str, str | None]:
    """{"torch": its version, "cuda": the CUDA it was built with (None: a CPU build)}."""
    found = _version_file("torch", ("__version__", "cuda"))
    if found is None:
        facts = probe()
        return {"torch": facts["torch"], "cuda": facts["cuda"]}
    return {"torch": found["__version__"], "cuda": found["cuda"]}


def torchvision_version() -> str:
    """torchvision.__version__ (local tag included, e.g. 0.29.1+cu130) read from its version.py: importing
    torchvision costs about as much CPU as torch, and pytest itself reads no data (phasebench/train/loaders.py)."""
    found = _version_file("torchvision", ("__version__",))
    if found and found["__version__"]:
        return found["__version__"]
    import torchvision  # a layout this reader does not know

    return torchvision.__version__


# The probe's answer, handed to child processes (a pytest that the tests start) with what it was asked under.
PROBE_ENV = "PHASEBENCH_PROBE"


def _probe_key() -> list:
    """What the probe's facts depend on: the interpreter and its torch, the GPUs and CPUs it may use, the threads
    and libraries it is told to use. An answer under another key is not taken."""
    variables = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "LD_LIBRARY_PATH", "LD_PRELOAD")
    return [sys.executable, sys.prefix, (_version_file("torch", ("__version__",)) or {}).get("__version__"),
            sorted(os.sched_getaffinity(0))] + [os.environ.get(name) for name in variables]


@functools.cache
def probe() -> dict:
    """torch's own facts (phasebench/worker/probe.py), from a process of its own; once per pytest run. The answer
    goes into the environment (PHASEBENCH_PROBE) with its key, so a pytest the tests start under the same key takes
    it rather than starting torch again (1-2 s here)."""
    return handed_down(PROBE_ENV, _probe_key(), _run_probe)


def _run_probe() -> dict:
    done = subprocess.run([sys.executable, "-m", "phasebench.worker.probe"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"python -m phasebench.worker.probe failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def nvml_gpus() -> tuple[list[str], str | None]:
    """The GPUs' names as NVML lists them, and why none can be listed (None when NVML answered)."""
    try:
        import pynvml
    except ImportError:
        return [], "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return [], f"NVML unavailable: {error}"
    try:
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
                 for index in range(pynvml.nvmlDeviceGetCount())]
        return [name.decode() if isinstance(name, bytes) else name for name in names], None
    finally:
        pynvml.nvmlShutdown()


def first_gpu() -> dict:
    """The GPU a bare "cuda" names (phasebench/devices.py: cuda:0 in a fresh worker): its name, its CUDA index and its
    PCI bus id in NVML's spelling, the id each worker's own lookup (phasebench/worker/startup.py pci_bus_id) gives.
    CUDA numbers the visible GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; NVML in bus order: with one
    visible GPU, or with that setting, they agree, and otherwise the workers' ids are the ones to trust."""
    import pynvml

    pynvml.nvmlInit()
    try:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        handle = (pynvml.nvmlDeviceGetHandleByIndex(int(visible)) if visible.isdigit()
                  else pynvml.nvmlDeviceGetHandleByUUID(visible) if visible.startswith("GPU-")
                  else pynvml.nvmlDeviceGetHandleByIndex(0))
        name, bus_id = pynvml.nvmlDeviceGetName(handle), pynvml.nvmlDeviceGetPciInfo(handle).busId
    finally:
        pynvml.nvmlShutdown()

    def text(value):
        return value.decode() if isinstance(value, bytes) else value

    return {"name": text(name), "index": 0, "bus_id": text(bus_id)}


def gpu_count() -> int:
    """The GPUs NVML lists (CUDA_VISIBLE_DEVICES, where set, limits them): a data-parallel rank takes one each."""

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = len(nvml_gpus()[0])
    return min(count, len([part for part in visible.split(",") if part.strip()])) if visible is not None else count


def cuda_reason(confirm: bool) -> str | None:
    """Why cuda cases cannot run here, or None. A CPU build of torch or no GPU that NVML lists decides it without
    torch; where both are there and `confirm` (a run, not a collection), the probe asks torch itself."""
    if not torch_build()["cuda"]:
        return "no usable GPU: this torch is a CPU build"
    gpus, why = nvml_gpus()
    if not gpus:
        return f"no usable GPU: NVML lists none ({why or 'no device'})"
    if confirm and not probe()["cuda_available"]:
        return "no usable GPU: torch.cuda.is_available() is False"
    return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML: the version stays unknown, nothing else depends on it
        return None


def machine_info(settings, probed: bool) -> dict:
    """machine_info["phasebench"]: what every saved result records of where and how it ran (schema.MachineInfo,
    as a dict; the count mode, gpu_sampling and testing are added by the session). Without `probed` (a
    collection) cuDNN's version is not asked for."""
    build = torch_build()
    gpu = first_gpu() | {"driver": driver_version()} if settings.cuda_reason is None else None
    return schema.MachineInfo(
        format=schema.FORMAT_VERSION,  # the layout of the saved result (phasebench/saved.py reads older ones)
        method=method.METHOD_VERSION,  # results of different methods are never compared
        method_sources=method.method_sources_hash(),
        metric="time",  # "instructions" under --count instructions (phasebench/plugin/counting.py)
        torch=build["torch"], torchvision=torchvision_version(), cuda=build["cuda"],
        cudnn=probe()["cudnn"] if probed else None,
        gpu=gpu, gpu_unavailable=settings.cuda_reason, cpu=cpu_model(), threads=settings.threads,
        implementations=list(settings.impls), workloads=[workload.as_info() for workload in settings.workloads],
        dataset=settings.source.name if settings.source else None,
        dataset_path=settings.source.raw_dir if settings.source else None,
        dataset_origin=settings.source.origin if settings.source else None,
        rounds=settings.rounds, warmup_rounds=settings.warmup_rounds, processes=settings.processes,
        pair_workers=settings.pair_workers, order_seed=settings.order_seed,
        # What a cuda phase does depends on them, so results of different settings are kept apart
        # (phasebench/results.py switched).
        cublas_workspace_config=os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        pytorch_cuda_alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
    ).as_dict()
