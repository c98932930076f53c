"""The equivalence tests' workers: cpu workers kept for the package, per language, that each pair borrows with a
fresh trainer, and the fixtures that lend them (a pair of the published implementations, a variant and its
reference). The tests that borrow them share one pool: they run in one process (pairs.POOL_GROUP)."""

from __future__ import annotations

import contextlib
import threading

import pytest

from phasebench import registry
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import Workload
from phasebench.worker import protocol
from phasebench.worker.client import Worker, WorkerDied, WorkerError
from tests.equivalence.pairs import Pair, restart, worker_pair


class KeptWorkers:
    """cpu workers kept for the package, per language, that each pair borrows with a fresh trainer: the worker is
    sent `start` again, which closes its trainer and builds a new one from the seed, as a new process would. The
    trainer a worker builds is wholly the `start` request's options (Implementation.trainer_options), so a worker
    that trained one implementation of its language is restarted as another (python-foreach after python);
    test_a_restarted_trainer_trains_as_a_new_process checks both. A pair then costs a trainer's build, not a
    process's start: a Python worker imports torch and torchvision in about 3 s of cpu here
    (results/test-times/costs.md), and these tests started 46 workers before kept workers, 18 before they were kept
    per language.

    `fresh` lends an idle worker (a new process where none is idle) and `give_back` returns it: two workers of one
    language can be out at once (a variant and its reference). A worker that died or refused is replaced by a new
    process on next use."""

    def __init__(self, settings, library: str | None):
        self.settings, self.library = settings, library
        self.idle: dict[str, list[Worker]] = {language: [] for language in registry.LANGUAGES}
        self.started: list[Worker] = []
        self.lock = threading.Lock()  # a pair borrows its two workers from two threads

    def new_process(self, impl: str, options: dict) -> Worker:
        language = registry.get(impl).language
        worker = Worker(impl, "cpu", options, self.settings.round_timeout, self.library if language == "cpp" else None)
        with self.lock:
            self.started.append(worker)
        return worker

    def fresh(self, impl: str, options: dict) -> Worker:
        with self.lock:
            idle = self.idle[registry.get(impl).language]
            worker = idle.pop() if idle else None
        if worker is not None and worker.alive():
            try:
                restart(worker, options, impl)
                return worker
            except (WorkerError, WorkerDied):  # refused or died: a new process instead
                pass
        if worker is not None:
            worker.stop()
        return self.new_process(impl, options)

    def give_back(self, worker: Worker) -> None:
        with self.lock:
            self.idle[registry.get(worker.impl).language].append(worker)

    def stop(self) -> None:
        """Each worker closes its trainer, then is killed rather than awaited: a Python worker's interpreter takes
        about 1 s of cpu here to tear torch down on its way out (results/test-times/costs.md), which no test looks at."""
        for worker in self.started:
            with contextlib.suppress(WorkerError, WorkerDied):  # one that died is closed all the same
                if worker.alive():
                    worker.request(protocol.Stop(), timeout=30)
            worker.kill()
            worker.close()


@pytest.fixture(scope="package")
def kept_workers(settings, cpp_library):
    kept = KeptWorkers(settings, cpp_library)
    yield kept
    kept.stop()


@pytest.fixture
def fresh_pair(settings, cpp_library, kept_workers, tmp_path):
    """fresh_pair(dropout): new trainers; nothing has drawn from their generators but the model built at start."""
    with contextlib.ExitStack() as stack:
        yield lambda dropout: stack.enter_context(worker_pair(settings, cpp_library, tmp_path, dropout,
                                                              kept=kept_workers))


@pytest.fixture
def variant_pair(settings, cpp_library, kept_workers, tmp_path):
    """variant_pair(variant, dropout, workload): the variant and its language's published implementation,
    fresh trainers in the package's workers."""
    with contextlib.ExitStack() as stack:
        def make(variant: str, dropout: float, workload: Workload = DEFAULT_WORKLOAD) -> Pair:
            reference = registry.language_reference(registry.get(variant)).name
            logs = tmp_path / f"{variant}-{dropout}-{workload.id or 'default'}"
            logs.mkdir()
            return stack.enter_context(worker_pair(settings, cpp_library, logs, dropout, (reference, variant), workload,
                                                   kept=kept_workers))
        yield make
