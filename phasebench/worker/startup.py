"""A worker's start-up in parts (docs/method.md#a-workers-start-up-in-parts): the process's age when its libraries
are loaded, CUDA's initialization, the set-up's clock around the trainer's construction, and the GPU's bus id. The
server (phasebench/worker/server.py) adds the timer floor's part; each part is on a clock of its own, so that they
never overlap and together fit inside the start that pytest sees.

No torch: the C++ worker imports this module.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable


def cuda_runtime() -> ctypes.CDLL | None:
    """The CUDA runtime this process loaded with torch or LibTorch (libcudart, found in its memory map), or None."""
    with open("/proc/self/maps") as maps:
        runtime = next((line.split()[-1] for line in maps if "/libcudart.so" in line), None)
    return None if runtime is None else ctypes.CDLL(runtime)


def pci_bus_id(device: str) -> str | None:
    """The PCI bus id of this worker's GPU in NVML's spelling (00000000:41:00.0), read through the CUDA runtime this
    process already loaded (torch's or LibTorch's): the pytest process samples that GPU by this id, and never
    touches CUDA itself. None on cpu."""
    if not device.startswith("cuda"):
        return None
    runtime = cuda_runtime()
    if runtime is None:
        raise RuntimeError(f"{device}: no CUDA runtime (libcudart) is loaded in this worker")
    index = device_index(runtime, device)
    text = ctypes.create_string_buffer(64)
    status = runtime.cudaDeviceGetPCIBusId(text, len(text), index)
    if status != 0:
        raise RuntimeError(f"{device}: cudaDeviceGetPCIBusId failed with CUDA error {status}")
    domain, bus, rest = text.value.decode().split(":")
    return f"{int(domain, 16):08X}:{bus.upper()}:{rest.upper()}"


def device_index(runtime: ctypes.CDLL, device: str) -> ctypes.c_int:
    """The device's CUDA index: a bare "cuda" is the current device, as phasebench/devices.py maps it."""
    index = ctypes.c_int(int(device.partition(":")[2] or -1))
    if index.value < 0:
        status = runtime.cudaGetDevice(ctypes.byref(index))
        if status != 0:
            raise RuntimeError(f"device {device} requested but CUDA is not available: cudaGetDevice failed with CUDA "
                               f"error {status}")
    return index


def process_age_ns() -> int:
    """How long ago the kernel created this process: /proc/self/stat's start time (field 22, clock ticks since boot)
    against CLOCK_BOOTTIME, the clock it is kept on. The process is created by the fork in the pytest process, so its
    age holds the exec, the interpreter's start and every import since. The kernel rounds the start down to its tick
    (10 ms at 100 ticks a second); the age is counted from the end of that tick, so that it is up to one tick short
    and never long: no part of a start claims time the start did not take."""
    with open("/proc/self/stat") as stat:
        after_name = stat.read().rpartition(")")[2].split()  # the name, in parentheses, may hold spaces
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    created_ns = (int(after_name[19]) + 1) * tick_ns  # field 22; after the name the fields count from 3
    return max(0, time.clock_gettime_ns(time.CLOCK_BOOTTIME) - created_ns)


class LibrariesLoaded:
    """Whether this process has built a trainer before: a worker's first start counts its imports from the process's
    creation; a later start in the same process (a restart with other options) counts only its own load_libraries,
    which finds them loaded."""

    before = False


def initialize_cuda(device: str) -> None:
    """CUDA's initialization on the worker's device, the same in both languages: through the CUDA runtime that torch or
    LibTorch loaded, the device made current (cudaSetDevice; a bare "cuda" is the current device, as
    phasebench/devices.py maps it) and its primary context created (cudaFree(0)), the driver's start with it. What
    torch or LibTorch adds the first time it touches the device (its own state, generators) stays in the trainer's
    construction. An error says that CUDA is not available, as the trainers do, and why."""
    runtime = cuda_runtime()
    if runtime is None:
        raise RuntimeError(f"device {device} requested but CUDA is not available: no CUDA runtime (libcudart) is "
                           f"loaded in this worker")
    runtime.cudaGetErrorString.restype = ctypes.c_char_p

    def check(call: str, status: int) -> None:
        if status != 0:
            raise RuntimeError(f"device {device} requested but CUDA is not available: {call} failed with CUDA error "
                               f"{status} ({runtime.cudaGetErrorString(status).decode()})")

    index = device_index(runtime, device)
    check("cudaSetDevice", runtime.cudaSetDevice(index))
    check("cudaFree(0)", runtime.cudaFree(ctypes.c_void_p(0)))


def set_up(build: Callable, options: dict, begun_ns: int) -> tuple[object, int, dict[str, int]]:
    """The program's set-up on its own clock, and the start-up's parts up to its end
    (docs/method.md#a-workers-start-up-in-parts). `begun_ns` is when the adapter began loading its libraries. Returns
    the trainer build() makes, the set-up's time (setup_ns: on cuda CUDA's initialization, then the trainer's
    construction, which opens both splits and builds the model and its optimizer; the published programs' set-up
    initializes CUDA too, when they move their model to the device) and the parts so far: "imports" (from the
    process's creation, or on a restart from `begun_ns`, to the libraries loaded), "cuda_init" (cuda only) and
    "trainer"."""
    imports_ns = time.perf_counter_ns() - begun_ns if LibrariesLoaded.before else process_age_ns()
    LibrariesLoaded.before = True
    device = options.get("device", "cpu")
    on_cuda = device.startswith("cuda")
    start = time.perf_counter_ns()
    if on_cuda:
        initialize_cuda(device)
    built = time.perf_counter_ns()
    trainer = build()
    end = time.perf_counter_ns()
    parts = {"imports": imports_ns} | ({"cuda_init": built - start} if on_cuda else {}) | {"trainer": end - built}
    return trainer, end - start, parts
