"""The pytest side of the workers: spawn, ask, time out, and report a death with its cause."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from phasebench import determinism, registry
from phasebench.phase_round import CountedRound, PhaseRound
from phasebench.programs import DEFAULT_PROGRAM
from phasebench.repository import ROOT
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import Workload
from phasebench.worker import build, counting, protocol, threads
from phasebench.worker.protocol import Request

# A sanitizer report runs from "==PID==ERROR: AddressSanitizer: ..." to "==PID==ABORTING"; its cause is at
# the top, often more lines above the end of the log than a tail shows.
SANITIZER_REPORT = re.compile(r"^==(\d+)==ERROR: \w*Sanitizer\b")


class WorkerError(RuntimeError):
    """The worker answered with an error: the trainer's message, verbatim."""


class WorkerDied(RuntimeError):
    """The worker crashed, was killed, or did not answer in time."""


class WorkerClock:
    """pytest-benchmark's timer for phases timed inside a worker (docs/method.md#what-is-measured).

    It stands still while the pytest process talks to the worker and advances by each duration
    the worker reports, so pytest-benchmark's statistics see exactly the in-worker times."""

    __name__ = "worker_clock"  # how saved results name the timer

    def __init__(self):
        self.ns = 0

    def __call__(self) -> float:
        return self.ns / 1e9

    def advance(self, ns: int) -> None:
        self.ns += ns


worker_clock = WorkerClock()


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


@dataclass(frozen=True)
class Conditions:
    """What a timed worker runs under beyond its trainer's options, alike in both languages: the plugin's switches
    --omp-wait-policy and --pins make them (phasebench/plugin/switches.py; docs/method.md#switches-for-the-intervention-study)."""

    environment: dict = field(default_factory=dict)  # variable -> its value in the worker; None: removed there
    prefix: tuple = ()  # put before the worker's command (setarch ARCH -R: ASLR off)
    pins: str | None = None  # "count": the worker applies the count mode's conditions (server.count_conditions)

    def apply(self, command: list[str], env: dict | None) -> tuple[list[str], dict | None]:
        """The worker's command and environment (None: this process's) under these conditions."""
        command = [*self.prefix, *command] + (["--pins", self.pins] if self.pins else [])
        if self.environment:
            env = dict(os.environ if env is None else env)
            for name, value in self.environment.items():
                if value is None:
                    env.pop(name, None)
                else:
                    env[name] = value
        return command, env


class Worker:
    """One worker subprocess with its trainer started: `python -m MODULE`, phasebench/worker/server.py by default or
    a module that runs its main() with more requests (the tests' tests/knobs_worker.py)."""

    def __init__(self, impl: str, device: str, options: dict, timeout: float, library: str | None = None,
                 module: str = "phasebench.worker.server", conditions: Conditions | None = None,
                 program: str = DEFAULT_PROGRAM):
        self.impl, self.device, self.timeout, self.program = impl, device, timeout, program
        self.log_path: str | None = options.get("log_path")  # the trainer's published log lines (not self.log)
        self.log = tempfile.NamedTemporaryFile(prefix=f"phasebench-{impl}-{device}-", suffix=".log", delete=False)
        options = dict(options)
        count = options.pop("count", None)  # the instruction-count mode (phasebench/plugin/counting.py)
        read_fd, write_fd = os.pipe()
        language = registry.get(impl).language
        command = [sys.executable, "-m", module, "--impl", impl, "--language", language,
                   "--reply-fd", str(write_fd)]
        if library:
            command += ["--library", library]
        env = (os.environ | build.sanitizer_runtime_env()) if library else None
        if options.get("deterministic"):  # the equivalence tests' numerics: cuBLAS's workspace before CUDA loads
            env = (env or dict(os.environ)) | determinism.environment(True)
        self.count_dir = None
        if count:
            self.count_dir = tempfile.mkdtemp(prefix=f"phasebench-count-{impl}-")
            out_file = os.path.join(self.count_dir, "callgrind.out")
            command = (counting.command(out_file, count["prefix"], count.get("caches"), count.get("branches", False))
                       + command + ["--count-out", out_file])
            env = (env or dict(os.environ)) | counting.PINS
        if conditions is not None:
            command, env = conditions.apply(command, env)
        self.started_ns = time.perf_counter_ns()
        self.replaced: str | None = None  # set by WorkerPool where this worker replaced a dead one
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=self.log, stderr=self.log,
                                        pass_fds=(write_fd,), cwd=ROOT, env=env)
        os.close(write_fd)
        self.replies, self.buffer = read_fd, b""
        try:
            self.info: protocol.Started = self.request(protocol.Start(options, program))
            # The instruction-count mode: the empty bracket's rounds, read here, outside Valgrind.
            self.count_floors: list[int] | None = None if self.info.count_floor_dumps is None else [
                counting.read_round(floor.dump, floor.label)["instructions"] for floor in self.info.count_floor_dumps]
        except BaseException:
            self.kill()
            self.close()
            raise

    @property
    def name(self) -> str:
        of = "" if self.program == DEFAULT_PROGRAM else f" of {self.program}"
        return f"{self.impl} worker{of} on {self.device}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        """The log's last `lines` lines, or, when it holds a sanitizer report, that report in full (the first
        one: later ones follow from it) and the lines after it."""
        text = Path(self.log.name).read_text(errors="replace").strip().splitlines()
        for start, line in enumerate(text):
            report = SANITIZER_REPORT.match(line)
            if report:
                ending = f"=={report.group(1)}==ABORTING"
                end = next((i for i in range(start, len(text)) if text[i].startswith(ending)), len(text) - 1)
                return "\n".join(text[start:end + 1] + text[end + 1:][-lines:])
        return "\n".join(text[-lines:])

    def _died(self, what: str, cause: str) -> WorkerDied:
        tail = self.log_tail()
        return WorkerDied(f"{self.name} {cause} during '{what}'" + (f"; its last output:\n{tail}" if tail else ""))

    def _read_line(self, what: str, deadline: float) -> bytes:
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.replies], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self.kill()
                return b""
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:
                self.process.wait()
                raise self._died(what, f"died with {describe_exit(self.process.returncode)}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def request(self, message: Request, timeout: float | None = None):
        """The worker's reply to `message`, of the request's reply type; WorkerError when it answers with an error."""
        self.send(message)
        return self.receive(message, timeout)

    def send(self, message: Request) -> None:
        """The first half of request(): several workers can be sent their requests before any reply is read
        (test_concurrent_jobs releases its jobs so). Every send is followed by its receive()."""
        try:
            self.process.stdin.write(message.encode().encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self.process.wait()
            raise self._died(message.what, f"had died with {describe_exit(self.process.returncode)}") from None

    def receive(self, message: Request, timeout: float | None = None):
        """The reply to `message`, sent with send(); a worker that does not answer within `timeout` seconds
        (--round-timeout by default) is killed."""
        what = message.what
        timeout = self.timeout if timeout is None else timeout
        try:
            line = self._read_line(what, time.monotonic() + timeout)
        except BaseException:  # e.g. Ctrl-C: its reply would come out of turn, so it cannot be asked again
            self.kill()
            raise
        if not line:
            raise self._died(what, f"did not answer within {timeout:g} s (--round-timeout) and was killed")
        reply = json.loads(line)
        if not reply.pop("ok"):
            raise WorkerError(f"{self.name}: {reply['error']}")
        try:
            return protocol.decode_reply(message.reply, reply)
        except protocol.ProtocolError as error:
            raise WorkerError(f"{self.name}: {error}") from None

    def run_phase(self, phase: str, checks: bool = True) -> PhaseRound:
        """One round of `phase`; with `checks` off (--round-checks off) the worker computes nothing that proves its
        work, in either language (the C++ worker turns its session's checks off: pb_set_round_checks), and the product
        says so ({"checks": "off"})."""
        timed: PhaseRound = self.request(protocol.Phase(phase, checks))
        if timed.dump is None:
            return timed
        # The instruction-count mode: the worker says where its round's dump is; it is read here, outside Valgrind.
        return dataclasses.replace(timed, counted=CountedRound(**counting.read_round(timed.dump.dump, timed.dump.label)))

    def run_phase_block(self, phase: str, calls: int, checks: bool = True) -> protocol.PhaseBlock:
        """`calls` rounds of `phase` back to back in one request (a paired phase's block), each timed as run_phase's;
        the whole block within --round-timeout."""
        return self.request(protocol.PhaseCalls(phase, checks, calls))

    @property
    def pci_bus_id(self) -> str | None:
        """Its GPU's PCI bus id as the worker reports it (NVML's spelling); None on cpu."""
        return self.info.pci_bus_id

    @property
    def timer_floor_ns(self) -> int:
        """The median of the empty phase, measured by the worker when it started."""
        return self.info.timer_floor_ns

    @property
    def count_floor(self) -> int | None:
        """The instruction-count mode: the median of the empty bracket's rounds, counted when the worker started."""
        return None if self.count_floors is None else int(statistics.median(self.count_floors))

    def stop(self, timeout: float = 30.0) -> int:
        """Stop the worker; returns its exit status."""
        if self.alive():
            try:
                self.request(protocol.Stop(), timeout=timeout)
                self.process.wait(timeout=timeout)
            except (WorkerDied, WorkerError, subprocess.TimeoutExpired):
                self.kill()
        self.close()
        return self.process.returncode

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()

    def close(self) -> None:
        if self.replies is not None:
            os.close(self.replies)
            self.replies = None
        if self.process.stdin:
            self.process.stdin.close()
        self.log.close()
        os.unlink(self.log.name)
        if self.count_dir:
            import shutil

            shutil.rmtree(self.count_dir, ignore_errors=True)


class RoundRecords:
    """What a case's counted rounds went through (docs/method.md#what-the-rounds-went-through), from every worker that
    ran them: open(worker) just before the first counted round it runs, close(worker) just after its last, each a
    request of its own; figures() for the case's extra_info. The machine's steal time and the window's wall time are
    read here, in the pytest process, around the first opening and the last closing."""

    def __init__(self):
        self.running: list[Worker] = []  # opened, not closed yet
        self.closed: list[protocol.RoundsClosed] = []  # each worker's, in the order they closed
        self.canary_start_ns: int | None = None
        self.started = self.ended = self.steal_start = self.steal_end = None

    def open(self, worker: Worker) -> None:
        """Opens the rounds of `worker`, unless they are open already."""
        if any(running is worker for running in self.running):
            return
        if self.started is None:
            self.steal_start, self.started = threads.steal_s(), time.perf_counter()
        opened = worker.request(protocol.RoundsOpen())
        if self.canary_start_ns is None:
            self.canary_start_ns = opened.canary_ns
        self.running.append(worker)

    def close(self, worker: Worker) -> None:
        """Closes the rounds of `worker`, if they are open."""
        if not any(running is worker for running in self.running):
            return
        self.running = [running for running in self.running if running is not worker]
        self.closed.append(worker.request(protocol.RoundsClose()))
        self.ended, self.steal_end = time.perf_counter(), threads.steal_s()

    def close_all(self) -> None:
        for worker in list(self.running):
            self.close(worker)

    def figures(self) -> dict:
        """The case's record of them (phasebench/schema.py PhaseInfo); {} where no rounds were opened."""
        if not self.closed:
            return {}
        migrations = [threads.migrations(reply.threads, reply.cpu_migrations_source) for reply in self.closed]
        sources = sorted({reply.cpu_migrations_source for reply in self.closed if reply.cpu_migrations_source})
        reasons = [reply.cpu_migrations_unavailable for reply in self.closed if reply.cpu_migrations_unavailable]
        generations = [sum(counts) for counts in zip(*(reply.gc_collections for reply in self.closed))]
        hardware, why = threads.hardware_counters()
        return {"rounds_window_s": round(self.ended - self.started, 6),
                "worker_threads": [thread for reply in self.closed for thread in reply.threads],
                "steal_s": round(self.steal_end - self.steal_start, 6),
                "cpu_migrations": None if None in migrations else sum(migrations),
                "cpu_migrations_source": ",".join(sources) or None,
                "cpu_migrations_unavailable": reasons[0] if reasons else None,
                "hardware_counters": hardware, "hardware_counters_reason": why,
                "gc_collections": sum(generations), "gc_collections_by_generation": generations,
                "canary_start_s": self.canary_start_ns / 1e9, "canary_end_s": self.closed[-1].canary_ns / 1e9}


class StartFailed(RuntimeError):
    """A pooled worker asked for again after its start failed in this session: it is not started again, and the case
    fails at once with the first start's message (docs/faults.md#faults-and-bad-input)."""


def stop_all(workers: list) -> None:
    """Stops the workers at once (a paired phase holds several a key): each exits while the others do."""
    with ThreadPoolExecutor(max(1, len(workers))) as stopping:
        list(stopping.map(lambda worker: worker.stop(), workers))


class WorkerPool:
    """Long-lived workers, one per (implementation, device, workload), and more of a key where a paired phase asks for
    another slot (bench/test_phases.py measure_paired); a dead one is replaced on next use, and the replacement says
    so in `replaced` until a case takes it (take_replaced). A start that fails is remembered for its key, whatever the
    slot (every slot's worker starts with the same options): later asks for that key raise StartFailed with its
    message, without a new process (a start that fails once fails the same way again, after seconds of imports each
    time)."""

    def __init__(self, make_worker):
        # (impl, device, workload, library, slot) -> Worker, with program=NAME for a program other than the seed's
        self.make_worker = make_worker
        self.workers: dict[tuple[str, str, Workload, str, int], Worker] = {}
        self.failed_starts: dict[tuple[str, str, Workload, str], str] = {}  # key -> why its start failed

    def get(self, impl: str, device: str, workload: Workload = DEFAULT_WORKLOAD, library: str | None = None,
            slot: int = 0, program: str = DEFAULT_PROGRAM) -> Worker:
        """The worker of that key (implementation, device, workload, program) in that slot (0: the one every case
        shares)."""
        key = (impl, device, workload, program)
        if key in self.failed_starts:
            raise StartFailed(self.failed_starts[key])
        worker = self.workers.get(key + (slot,))
        if worker is None or not worker.alive():
            dead = None
            if worker is not None:
                del self.workers[key + (slot,)]  # closed once: a replacement that fails to start leaves nothing to close again
                worker.close()
                dead = f"{worker.name} (pid {worker.pid}) had died with {describe_exit(worker.process.returncode)}"
            try:
                of = {} if program == DEFAULT_PROGRAM else {"program": program}
                worker = self.workers[key + (slot,)] = self.make_worker(impl, device, workload, library, slot, **of)
                worker.replaced = dead
            except Exception as error:  # not a Ctrl-C: that stops the run, and says nothing of the worker
                self.failed_starts[key] = (f"{impl} worker{'' if program == DEFAULT_PROGRAM else ' of ' + program} "
                                           f"on {device} ({workload.label}) "
                                           f"is not started again: its start failed earlier in this session with "
                                           f"{type(error).__name__}: {error}")
                raise
        return worker

    @staticmethod
    def take_replaced(worker: Worker) -> str | None:
        """What the pooled worker replaced (the dead worker, its pid and how it died), once: the first case that runs
        on a replacement records it; None for a worker that replaced none, or whose replacement a case took."""
        replaced, worker.replaced = worker.replaced, None
        return replaced

    def release(self, impl: str, device: str, workload: Workload = DEFAULT_WORKLOAD,
                program: str = DEFAULT_PROGRAM) -> None:
        """Stop that key's workers now, if they run: no later case needs them (conftest.py), and a sweep of many
        implementations and workloads would otherwise hold their processes until the session ends."""
        stopping = [self.workers.pop(key) for key in [key for key in self.workers
                                                      if key[:4] == (impl, device, workload, program)]]
        stop_all(stopping)

    def stop_all(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        self.workers.clear()
