"""The worker subprocess: one per (implementation, device), it owns a trainer and times phases.

    python -m phasebench.worker.server --impl NAME --language python|cpp --reply-fd FD [--library PATH]

Requests arrive as JSON lines on stdin; each gets one JSON line on FD. The process's own
stdout is pointed at stderr so that nothing printed by torch, torchvision or LibTorch can
corrupt the replies. The C++ worker loads the library with ctypes and never imports torch
or the Python trainer (docs/architecture.md#the-c-abi-and-the-build).
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import json
import os
import resource
import signal
import sys
import time
from array import array
from functools import partial

from phasebench.worker import group


def load_libraries(language: str, library: str | None = None):
    """What each language's program has loaded before its first statement runs, outside its set-up's clock in both
    languages alike: the Python program's imports (torch, torchvision and the trainer, as pytorch/examples' main.py
    imports them at its top), the C++ program's shared libraries (LibTorch, through the suite's library). The
    set-up then holds the same kind of work in both: opening the data, building the model and optimizer
    (docs/architecture.md#set-up-the-same-kind-of-work-in-both-languages)."""
    if language == "python":
        import torchvision  # noqa: F401  (the program's import, not its set-up)

        from phasebench.train import trainer

        return trainer
    from phasebench.worker import cpp_lib

    return cpp_lib.load(library)


class PythonAdapter:
    def __init__(self, options: dict):
        trainer = load_libraries("python")
        PHASE_NAMES, Trainer = trainer.PHASE_NAMES, trainer.Trainer  # noqa: N806

        # The program's own time starts here, with its imports done (docs/results.md#the-published-table-redone).
        start = time.perf_counter_ns()
        self.trainer = Trainer(**options)
        self.setup_ns = time.perf_counter_ns() - start
        self.names = list(PHASE_NAMES)

    def phase_names(self):
        return self.names

    def get_params(self) -> bytes:
        return self.trainer.get_params().numpy().tobytes()

    def set_params(self, data: bytes):
        import torch

        self.trainer.set_params(torch.frombuffer(bytearray(data), dtype=torch.float32))

    def batch_at(self, index: int):
        data, target = self.trainer.batch_at(index)
        return data.float().contiguous().numpy().tobytes(), target.tolist()

    def ensemble_params(self, member: int) -> bytes:
        return self.trainer.ensemble_params(member).numpy().tobytes()


class CppAdapter:
    def __init__(self, options: dict, library: str):
        from phasebench.worker import cpp_lib

        lib = load_libraries("cpp", library)
        start = time.perf_counter_ns()
        self.trainer = cpp_lib.CppTrainer(lib, **options)
        self.setup_ns = time.perf_counter_ns() - start

    def phase_names(self):
        return self.trainer.phase_names()

    def get_params(self) -> bytes:
        return self.trainer.get_params().tobytes()

    def set_params(self, data: bytes):
        self.trainer.set_params(array("f", data))

    def batch_at(self, index: int):
        images, labels = self.trainer.batch_at(index)
        return images.tobytes(), labels

    def ensemble_params(self, member: int) -> bytes:
        return self.trainer.ensemble_params(member).tobytes()


def capability() -> str | None:
    """The ATen CPU capability this process dispatches to (torch.backends.cpu.get_cpu_capability()), where torch is
    loaded (the Python worker); the C++ worker loads the same libtorch_cpu under the same pins."""
    if "torch" not in sys.modules:
        return None
    return sys.modules["torch"].backends.cpu.get_cpu_capability()


def pci_bus_id(device: str) -> str | None:
    """The PCI bus id of this worker's GPU in NVML's spelling (00000000:41:00.0), read through the CUDA runtime this
    process already loaded (torch's or LibTorch's): the pytest process samples that GPU by this id, and never
    touches CUDA itself. None on cpu."""
    if not device.startswith("cuda"):
        return None
    index = int(device.partition(":")[2] or 0)  # a bare "cuda" is cuda:0: a worker never changes its device
    with open("/proc/self/maps") as maps:
        runtime = next((line.split()[-1] for line in maps if "/libcudart.so" in line), None)
    if runtime is None:
        raise RuntimeError(f"{device}: no CUDA runtime (libcudart) is loaded in this worker")
    text = ctypes.create_string_buffer(64)
    status = ctypes.CDLL(runtime).cudaDeviceGetPCIBusId(text, len(text), index)
    if status != 0:
        raise RuntimeError(f"{device}: cudaDeviceGetPCIBusId failed with CUDA error {status}")
    domain, bus, rest = text.value.decode().split(":")
    return f"{int(domain, 16):08X}:{bus.upper()}:{rest.upper()}"


def fault(kind: str):
    """Test-only fault knob (docs/faults.md#faults-and-bad-input): make this worker die or hang on purpose,
    on a "fault" request or on the phases named in PHASEBENCH_TEST_FAULT."""
    if kind == "segfault":
        ctypes.string_at(0)
    elif kind == "abort":
        os.abort()
    elif kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "hang":
        while True:
            time.sleep(3600)
    raise ValueError(f"unknown fault '{kind}': segfault, abort, kill or hang")


def faults_for(impl: str, rank: int | None = None) -> dict[str, str]:
    """PHASEBENCH_TEST_FAULT=[IMPL[@RANK]/]PHASE:KIND[,...] as {phase: kind} for a worker of `impl` (and, once it
    joined a process group, of that rank): lets one suite run show what a faulty case does to the others."""
    faults = {}
    for item in filter(None, os.environ.get("PHASEBENCH_TEST_FAULT", "").split(",")):
        target, _, kind = item.partition(":")
        only, _, phase = target.rpartition("/")
        only_impl, at, only_rank = only.partition("@")
        if only_impl in ("", impl) and (not at or (rank is not None and only_rank == str(rank))):
            faults[phase] = kind
    return faults


def on_the_shared_clock(work):
    """Runs work(); returns its result and when it started and ended on CLOCK_MONOTONIC (perf_counter_ns, which
    every process on the machine shares, so test_concurrent_jobs can line jobs up), with the process CPU time
    across it (all threads) and its page faults (minor and major, read outside the clocks)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu_start, started = time.process_time_ns(), time.perf_counter_ns()
    result = work()
    ended = time.perf_counter_ns()
    cpu_ns = time.process_time_ns() - cpu_start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return result, {"started_at_ns": started, "ended_at_ns": ended, "request_cpu_ns": cpu_ns,
                    "minor_faults": after.ru_minflt - before.ru_minflt, "major_faults": after.ru_majflt - before.ru_majflt}


def handle(adapter, request: dict) -> dict:
    command = request["cmd"]
    trainer = adapter.trainer
    if command == "phase":
        ns, cpu_ns, thread_cpu_ns, product, faults = trainer.run_phase(request["name"])
        return {"ns": ns, "cpu_ns": cpu_ns, "thread_cpu_ns": thread_cpu_ns, "product": product} | faults
    if command == "phase_names":
        return {"names": adapter.phase_names()}
    if command == "layout":
        return {"layout": trainer.layout()}
    if command == "get_params":
        return {"data": base64.b64encode(adapter.get_params()).decode()}
    if command == "set_params":
        adapter.set_params(base64.b64decode(request["data"]))
        return {}
    if command == "epoch_batches":
        return {"count": trainer.epoch_batches()}
    if command == "batch":
        images, labels = adapter.batch_at(request["index"])
        return {"images": base64.b64encode(images).decode(), "labels": labels}
    if command == "train_steps":
        losses, clock = on_the_shared_clock(lambda: trainer.train_steps(request["steps"]))
        return {"losses": losses} | clock
    # Data parallel (docs/distributed.md; phasebench/worker/group.py): rank 0 opens the store, every rank joins.
    if command == "dist_store":
        adapter.store, port = group.open_store(request["world"], request["timeout_s"])
        return {"port": port}
    if command == "dist_join":
        started = time.perf_counter_ns()
        name = group.join(request["rank"], request["world"], request["device"], request["timeout_s"],
                          request["port"], getattr(adapter, "store", None))
        trainer.attach(name)
        return {"group": name, "backend": group.backend_for(request["device"]), "phases": adapter.phase_names(),
                "join_ns": time.perf_counter_ns() - started}
    if command == "timed_steps":
        step_ns, clock = on_the_shared_clock(lambda: trainer.timed_steps(request["steps"]))
        return {"step_ns": step_ns} | clock
    if command == "evaluate":
        accuracy, loss = trainer.evaluate()
        return {"accuracy": accuracy, "loss": loss}
    if command == "train":
        (totals, steps, loop_ns, cpu_ns), clock = on_the_shared_clock(
            lambda: trainer.train(request["epochs"], request["synchronize"], request.get("max_steps", 0)))
        # The published Total Time: the program from before its dataset is opened to its last step.
        return {"phase_ns": totals, "steps": steps, "loop_ns": loop_ns, "phase_cpu_ns": cpu_ns,
                "setup_ns": adapter.setup_ns, "program_ns": adapter.setup_ns + loop_ns,
                # This process's peak resident memory so far (Linux reports KiB), and the device's peak since
                # train() began (docs/implementations.md#implementations-and-workloads).
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "peak_device_bytes": trainer.peak_device_memory()} | clock
    # Ensembles (docs/gpu.md#concurrent-jobs-and-ensembles): M models built from seeds 1..M, a timed step of all
    # of them, a member's parameters.
    if command == "ensemble_start":
        trainer.start_ensemble(request["models"])
        return {}
    if command == "ensemble_step":
        ns, cpu_ns, thread_cpu_ns, losses = trainer.ensemble_step()
        return {"ns": ns, "cpu_ns": cpu_ns, "thread_cpu_ns": thread_cpu_ns, "losses": losses}
    if command == "ensemble_params":
        return {"data": base64.b64encode(adapter.ensemble_params(request["member"])).decode()}
    if command == "ensemble_stop":
        trainer.stop_ensemble()
        return {}
    if command == "fault":
        fault(request["kind"])
    raise ValueError(f"unknown command '{command}'")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--impl", required=True, help="the implementation's name (bench/registry.py)")
    parser.add_argument("--language", choices=("python", "cpp"), required=True)
    parser.add_argument("--reply-fd", type=int, required=True)
    parser.add_argument("--library")
    parser.add_argument("--count-out", help="the instruction-count mode: callgrind's --callgrind-out-file")
    args = parser.parse_args(argv)
    replies = os.fdopen(args.reply_fd, "w", buffering=1)
    os.dup2(2, 1)

    def reply(message: dict):
        replies.write(json.dumps(message) + "\n")

    adapter = counter = None
    faults = faults_for(args.impl)
    for line in sys.stdin:
        request = json.loads(line)
        command = request.get("cmd")
        try:
            if command == "phase" and request["name"] in faults:
                fault(faults[request["name"]])
            if command == "stop":
                if adapter is not None:
                    adapter.trainer.close()
                reply({"ok": True})
                return 0
            if command == "ping":  # the round trip alone, for worker_overhead
                reply({"ok": True})
                continue
            if command == "start":
                if adapter is not None:  # a restart with other options (the equivalence tests): a fresh trainer
                    adapter.trainer.close()
                    adapter = None
                if args.count_out:
                    from phasebench.worker.count_server import perturb_heap

                    perturb_heap()
                adapter = (PythonAdapter(request["options"]) if args.language == "python"
                           else CppAdapter(request["options"], args.library))
                counted = {}
                if args.count_out:  # docs/instruction-counts.md: the bracket instead of the clock
                    from phasebench.worker.count_server import Counter

                    counter = Counter(args.library, args.count_out, args.impl)
                    counted = counter.attach(args.language, adapter.trainer) | {"cpu_capability": capability()}
                reply({"ok": True, "pid": os.getpid(), "phases": adapter.phase_names(),
                       "threads": adapter.trainer.threads(),
                       "timer_floor_ns": 0 if counter else adapter.trainer.timer_floor(),
                       "setup_ns": adapter.setup_ns,
                       "pci_bus_id": pci_bus_id(request["options"].get("device", "cpu"))} | counted)
                continue
            if adapter is None:
                raise RuntimeError(f"'{command}' before 'start'")
            if counter is not None and command == "phase":
                counted = counter.count(adapter.trainer, request["name"], partial(handle, adapter, request))
                reply({"ok": True} | counted.pop("result") | counted)
                continue
            reply({"ok": True} | handle(adapter, request))
            if command == "dist_join":  # this rank's own faults, now that it has one
                faults = faults_for(args.impl, request["rank"])
        except Exception as error:  # the client raises it with this message, verbatim
            # A collective's or a store's error (c10d's carry a backtrace): its first line says why.
            text = group.one_line(error) if type(error).__module__.startswith("torch.distributed") else str(error)
            reply({"ok": False, "error": text, "type": type(error).__name__})
    return 0


if __name__ == "__main__":
    sys.exit(main())
