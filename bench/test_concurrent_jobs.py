"""N training jobs sharing one device (docs/gpu.md#concurrent-jobs-and-ensembles).

test_concurrent_jobs[impl-device-N] starts N fresh workers of one implementation at once and waits until every
one is ready (its data open, its model on the device); then it releases them together: the pytest process
sends each its train request, one after another, before it reads any reply. Each job trains one epoch
free-running, as test_training_run's free-running run does (no synchronization inside the step; the device
synchronized at both ends of the loop), and its loop is timed inside its worker.

The benchmark's time is the wall time from the release (pytest's clock just before the first request is sent)
to the end of the last job's train request inside its worker: both read CLOCK_MONOTONIC
(time.perf_counter_ns), which every process on the machine shares. It holds the request's delivery and each
worker's own set-up of the run around its loop (microseconds to milliseconds against an epoch). One round per
case: a round is N fresh processes training N epochs; the N jobs' loop times show the spread.

On cpu the jobs split the intra-op threads (--threads; by default what torch picks): each gets
max(1, threads // N), as jobs sharing a machine would be given; on cuda each job keeps --threads.

Under --benchmark-disable (the test command) each job trains CHECK_STEPS steps instead of an epoch (the
train_steps request, which reads each step's loss): the start, the release, the collection and the figures are
checked, nothing is measured.
"""

import math
import time
import types
from concurrent.futures import ThreadPoolExecutor

import pytest

from phasebench import registry, schema
from phasebench.spec import TRAIN_IMAGES
from phasebench.worker.client import describe_exit, worker_clock
from phasebench.worker.protocol import Train, TrainSteps

CHECK_STEPS = 5


def images_in(steps: int, workload) -> int:
    """The images `steps` consecutive steps from an epoch's start train (an epoch's last batch is short)."""
    epochs, rest = divmod(steps, workload.steps_per_epoch)
    return epochs * TRAIN_IMAGES + rest * workload.batch_size


def start_all(spawns) -> list:
    """Every worker started at once; returns when all are ready. One that fails to start stops the others."""
    with ThreadPoolExecutor(len(spawns)) as pool:
        futures = [pool.submit(spawn) for spawn in spawns]
    workers = [future.result() for future in futures if future.exception() is None]
    failed = [future.exception() for future in futures if future.exception() is not None]
    if failed:
        for worker in workers:
            worker.stop()
        raise failed[0]
    return workers


@pytest.fixture(scope="session")
def single_job_loops() -> dict:
    """{(implementation, device, workload): the loop seconds of its N=1 case} in this session: what each job's
    slowdown is measured against."""
    return {}


def slowdown_basis(settings, single_job_loops, impl, device, workload, jobs, own_loops) -> tuple[float | None, str | None]:
    """(one job's loop seconds, None) or (None, why there is none)."""
    if jobs == 1:
        single_job_loops[(impl, device, workload)] = own_loops[0]
        return own_loops[0], None
    if (impl, device, workload) in single_job_loops:
        return single_job_loops[(impl, device, workload)], None
    if 1 not in settings.jobs[device]:
        return None, f"--jobs {','.join(map(str, settings.jobs[device]))} has no N=1 case on {device}"
    return None, f"the N=1 case of {impl} on {device} did not finish before this one in this session (deselected, " \
                 f"skipped or failed)"


@pytest.mark.benchmark(timer=worker_clock)  # the release to the last job's end, on the machine's shared clock
def test_concurrent_jobs(benchmark, new_worker, utilization_of, settings, single_job_loops, tmp_path,
                         impl, device, jobs, workload):  # cases: phasebench/plugin/__init__.py
    registered = registry.get(impl)
    threads = max(1, settings.threads // jobs) if device == "cpu" else settings.threads
    spawns = [new_worker(impl, device, workload, threads=threads, log_path=str(tmp_path / f"job{i}.log"))
              for i in range(jobs)]
    if benchmark.enabled:
        request, timeout = Train(settings.epochs, synchronize=False), \
            settings.round_timeout * settings.epochs * jobs
        steps = workload.steps_per_epoch * settings.epochs
    else:
        request, timeout, steps = TrainSteps(CHECK_STEPS), settings.round_timeout, CHECK_STEPS
    # Several workers, all the case's: the device is watched across all jobs, and the CPU of every worker process
    # (extra_info["cpu"]: theirs together, and each one's in "processes"), from the release to the last reply.
    watched = types.SimpleNamespace(pids=[], device=device, impl=impl, pci_bus_id=None)
    run = {}

    def one_round():
        workers = start_all(spawns)
        watched.pids = [worker.pid for worker in workers]
        watched.pci_bus_id = workers[0].pci_bus_id  # the jobs share one device
        try:
            with utilization_of(watched):
                release_ns = time.perf_counter_ns()
                for worker in workers:
                    worker.send(request)
                replies = [worker.receive(request, timeout) for worker in workers]
        except BaseException:  # the other jobs still owe their replies, so they cannot be asked to stop
            for worker in workers:
                worker.kill()
                worker.close()
            raise
        statuses = [worker.stop() for worker in workers]
        ended_ns = max(reply.ended_at_ns for reply in replies)
        run.update(release_ns=release_ns, replies=replies, statuses=statuses, makespan_ns=ended_ns - release_ns,
                   names=[worker.name for worker in workers])
        worker_clock.advance(ended_ns - release_ns)

    benchmark.group = f"concurrent_jobs-{jobs}"
    benchmark.pedantic(one_round, rounds=1, warmup_rounds=0, iterations=1)

    replies, release_ns, makespan_ns = run["replies"], run["release_ns"], run["makespan_ns"]
    problems = [f"job {i} ({name}) ended with {describe_exit(status)}"
                for i, (name, status) in enumerate(zip(run["names"], run["statuses"])) if status != 0]
    for i, reply in enumerate(replies):
        trained = reply.steps if benchmark.enabled else len(reply.losses)
        if trained != steps:
            problems.append(f"job {i} trained {trained} steps, expected {steps}")
        if not benchmark.enabled and not all(math.isfinite(loss) for loss in reply.losses):
            problems.append(f"job {i}: losses {reply.losses}")
        if not release_ns <= reply.started_at_ns < reply.ended_at_ns <= release_ns + makespan_ns:
            problems.append(f"job {i} ran from {reply.started_at_ns - release_ns} to {reply.ended_at_ns - release_ns}"
                            f" ns after the release, outside the benchmark's {makespan_ns} ns")
    assert not problems, f"{jobs} concurrent {impl} jobs on {device}:\n  " + "\n  ".join(problems)

    # A job's loop: the trainer's own loop timer for an epoch, as in test_training_run; its request for the check.
    loops = [(reply.loop_ns if benchmark.enabled else reply.ended_at_ns - reply.started_at_ns) / 1e9
             for reply in replies]
    basis, unavailable = slowdown_basis(settings, single_job_loops, impl, device, workload, jobs, loops)
    images = images_in(steps, workload) * jobs
    schema.write(
        benchmark, schema.ConcurrentJobsInfo, implementation=impl, language=registered.language,
        reference=registered.pair, device=device, phase=f"concurrent_jobs-{jobs}", **workload.as_info(), note=registered.notes.get(device),
        rounds=1, warmup_rounds=0, jobs=jobs, threads=settings.threads, threads_per_job=threads,
        threads_split=(f"the {settings.threads} intra-op threads split between {jobs} job(s): {threads} each"
                       if device == "cpu" else f"each job keeps --threads {settings.threads}"),
        trained=(f"{settings.epochs} epoch(s) free-running" if benchmark.enabled
                 else f"{CHECK_STEPS} steps (train_steps, --benchmark-disable): a check, not a measurement"),
        steps_per_job=steps, images=images, makespan_s=makespan_ns / 1e9, images_per_s=images / (makespan_ns / 1e9),
        job_loop_s=loops,
        job_start_lag_s=[(reply.started_at_ns - release_ns) / 1e9 for reply in replies],
        job_cpu_cores=[round(reply.request_cpu_ns / (reply.ended_at_ns - reply.started_at_ns), 3)
                       for reply in replies],
        # Each job's worker's page faults across its request (docs/page-faults.md).
        job_minor_faults=[reply.minor_faults for reply in replies],
        job_major_faults=[reply.major_faults for reply in replies],
        job_minor_faults_per_step=[round(reply.minor_faults / steps, 2) for reply in replies],
        single_job_loop_s=basis, slowdown=[loop / basis for loop in loops] if basis else None,
        slowdown_unavailable=unavailable, mps=settings.utilization.mps(watched),
    )
