"""Data parallel, phase by phase (docs/distributed.md): collected only under --world-size N[,N...].

test_dist_phase[phase-impl-device-worldN]: every rank of a world of N of the suite's own workers (one implementation;
rank 0's TCPStore on 127.0.0.1 port 0) runs the phase each round; every rank leaves a barrier, untimed, just before
its clock starts, so that no clock holds the wait for a late rank. The round's value is the slowest rank's time;
extra_info holds every rank's median. grad_sync (python-allreduce, cpp-allreduce) is the all-reduce of the gradients
after backward, alone; python-ddp has none: its all-reduce runs inside backward.

test_dist_training_run[impl-device-worldN]: each round a fresh world whose ranks train the same steps (an epoch of
global batches, --epochs; under --benchmark-disable CHECK_STEPS), each step timed alone on every rank. The round's
value is the run's Total Time, the slowest rank's (its set-up, its joining the group, its loop); extra_info has every
rank's Total Time, Summed Time (its step timers added up) and steps, images/s, the steps' p50/p95 (the slowest rank
per step, as PyTorch's DDP benchmark reports percentiles), and the scaling efficiency against world size 1 of the same
implementation in this session.

On cpu the ranks split the intra-op threads (--threads, by default what torch picks) as concurrent jobs do: each gets
max(1, threads // N).
"""

from __future__ import annotations

import statistics
import types

import pytest

from phasebench import registry, schema
from phasebench.spec import GRAD_SYNC, SYNCS, TRAIN_IMAGES
from phasebench.worker.client import worker_clock
from phasebench.worker.protocol import Phase, TimedSteps

from .test_phases import CHECKED_ROUNDS, work_problems

# pytest-benchmark reads the in-worker durations through this clock (the slowest rank's per round; a training run's
# Total Time), never the pytest process's wall time around a round.
pytestmark = pytest.mark.benchmark(timer=worker_clock)

CHECK_STEPS = 12  # under --benchmark-disable: a log line, and the second epoch never reached
BARRIER = ("every rank leaves a barrier (the process group's), untimed, just before its clock starts; the round's "
           "value is the slowest rank's time")


def shard_workload(workload, world_size: int):
    """What one rank's phases produce: batch / W images of every global batch (and of the last one)."""
    return types.SimpleNamespace(batch_size=workload.batch_size // world_size,
                                 last_batch=workload.last_batch // world_size,
                                 conv1_channels=workload.conv1_channels, parameter_count=workload.parameter_count)


def percentile(values, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def threads_info(settings, device: str, world_size: int) -> dict:
    threads = settings.rank_threads(device, world_size)
    split = (f"the {settings.threads} intra-op threads split between {world_size} rank(s): {threads} each"
             if device == "cpu" else f"each rank keeps --threads {settings.threads}, one GPU a rank")
    return {"threads": settings.threads, "threads_per_rank": threads, "threads_split": split}


def sync_problems(product: dict, world_size: int) -> list[str]:
    problems = []
    if not product["finite"] or product["nonzero_grads"] != 8:
        problems.append(f"gradients finite: {product['finite']}, non-zero in {product['nonzero_grads']} of 8")
    if world_size > 1 and not product["moved"] > 0:
        problems.append("conv1's gradient did not change in the all-reduce: the shards differ, so it must")
    if world_size == 1 and product["moved"] != 0:
        problems.append(f"alone, the all-reduce changed conv1's gradient by {product['moved']:.3g}")
    return problems


def watching(world, device: str, impl: str):
    """What utilization watches: every rank's worker process (extra_info["cpu"]: theirs together, and each one's)."""
    return types.SimpleNamespace(pids=[worker.pid for worker in world.workers], device=device, impl=impl,
                                 pci_bus_id=world.workers[0].pci_bus_id)


def test_dist_phase(benchmark, world_for, utilization_of, settings, phase, impl, device, world_size, workload):
    registered = registry.get(impl)
    world = world_for(impl, device, world_size, workload)
    taken = []  # per round: every rank's reply

    def one_round():
        replies = world.request_all(Phase(phase))
        worker_clock.advance(max(reply.ns for reply in replies))
        taken.append(replies)

    benchmark.group = f"{phase}-world{world_size}"
    schema.write(
        benchmark, schema.DistPhaseInfo, implementation=impl, language=registered.language, reference=registered.pair,
        device=device, phase=phase, **workload.as_info(), world_size=world_size, sync=registered.sync, sync_how=SYNCS[registered.sync].how,
        backend=world.joined[0].backend, rounds=settings.rounds, warmup_rounds=settings.warmup_rounds,
        **threads_info(settings, device, world_size), clock=BARRIER, dist_timeout_s=settings.dist_timeout,
        note=registered.notes.get(device))
    with utilization_of(watching(world, device, impl)):
        benchmark.pedantic(one_round, rounds=settings.rounds, warmup_rounds=settings.warmup_rounds, iterations=1)
    while len(taken) < CHECKED_ROUNDS:  # under --benchmark-disable
        one_round()
    counted = taken[-settings.rounds:] if benchmark.enabled else taken
    per_rank = [[replies[rank].ns for replies in counted] for rank in range(world_size)]
    slowest = [max(range(world_size), key=lambda rank: replies[rank].ns) for replies in counted]
    schema.write(
        benchmark, schema.DistPhaseInfo, rank_median_s=[statistics.median(ns) / 1e9 for ns in per_rank],
        rank_cpu_cores=[round(sum(r[rank].cpu_ns for r in counted) / max(1, sum(per_rank[rank])), 3)
                        for rank in range(world_size)],
        slowest_rank_rounds=[slowest.count(rank) for rank in range(world_size)])

    shard = shard_workload(workload, world_size)
    problems = []
    for i, replies in enumerate(taken):
        for rank, reply in enumerate(replies):
            product = reply.product
            found = (sync_problems(product, world_size) if phase == GRAD_SYNC
                     else work_problems(phase, product, shard, device == "cpu" or registered.split_on_device))
            problems += [f"round {i}, rank {rank}: {problem}" for problem in found]
        batches = {reply.product.get("batch") for reply in replies}
        if len(batches) > 1:
            problems.append(f"round {i}: the ranks were at different batches {sorted(batches)}")
    assert not problems, f"{phase} ({impl} on {device}, world {world_size}):\n  " + "\n  ".join(problems[:10])


@pytest.fixture(scope="session")
def single_rank_rates() -> dict:
    """{(implementation, device, workload): images/s at world size 1} in this session: the scaling efficiency's basis."""
    return {}


def test_dist_training_run(benchmark, world_for, world_pool, utilization_of, settings, single_rank_rates, progress,
                           impl, device, world_size, workload):
    registered = registry.get(impl)
    steps = workload.steps_per_epoch * settings.epochs if benchmark.enabled else CHECK_STEPS
    runs = []

    def one_round():
        world_pool.release()  # a fresh world: its set-up and its joining the group are the run's
        world = world_for(impl, device, world_size, workload)
        with utilization_of(watching(world, device, impl)):  # the last round's is the one recorded
            replies = world.request_all(TimedSteps(steps),
                                        timeout=settings.round_timeout * max(1, settings.epochs))
        ranks = []
        for worker, joined, reply in zip(world.workers, world.joined, replies):
            loop_ns = reply.ended_at_ns - reply.started_at_ns
            ranks.append({"setup_ns": worker.info.setup_ns, "join_ns": joined.join_ns, "loop_ns": loop_ns,
                          "total_ns": worker.info.setup_ns + joined.join_ns + loop_ns,
                          "summed_ns": sum(reply.step_ns), "step_ns": reply.step_ns})
        world_pool.release()
        runs.append(ranks)
        worker_clock.advance(max(rank["total_ns"] for rank in ranks))
        progress(f"round {len(runs)}: {max(rank['total_ns'] for rank in ranks) / 1e9:.2f} s")

    benchmark.group = f"training_run-world{world_size}"
    rounds = settings.run_rounds if benchmark.enabled else 1
    benchmark.pedantic(one_round, rounds=rounds, warmup_rounds=0, iterations=1)

    images = (steps // workload.steps_per_epoch) * TRAIN_IMAGES + (steps % workload.steps_per_epoch) * workload.batch_size
    slowest = [max(ranks, key=lambda rank: rank["total_ns"]) for ranks in runs]
    loops = [max(rank["loop_ns"] for rank in ranks) for ranks in runs]
    step_slowest = [max(per) for ranks in runs for per in zip(*(rank["step_ns"] for rank in ranks))]
    rate = images / (statistics.median(loops) / 1e9)
    key = (impl, device, workload)
    if world_size == 1:
        single_rank_rates[key] = rate
    basis = single_rank_rates.get(key)
    schema.write(
        benchmark, schema.DistTrainingRunInfo, implementation=impl, language=registered.language,
        reference=registered.pair, device=device, phase="training_run", **workload.as_info(), world_size=world_size, sync=registered.sync,
        rounds=rounds, warmup_rounds=0, epochs=settings.epochs, **threads_info(settings, device, world_size),
        trained=(f"{settings.epochs} epoch(s) of global batches" if benchmark.enabled
                 else f"{CHECK_STEPS} steps (--benchmark-disable): a check, not a measurement"),
        steps=steps, images=images,
        total_s=[slow["total_ns"] / 1e9 for slow in slowest],
        total_median_s=statistics.median(slow["total_ns"] for slow in slowest) / 1e9,
        summed_median_s=statistics.median(slow["summed_ns"] for slow in slowest) / 1e9,
        loop_median_s=statistics.median(loops) / 1e9,
        ranks=[{"rank": rank, "total_s": [ranks[rank]["total_ns"] / 1e9 for ranks in runs],
                "summed_s": [ranks[rank]["summed_ns"] / 1e9 for ranks in runs],
                "setup_s": [ranks[rank]["setup_ns"] / 1e9 for ranks in runs],
                "join_s": [ranks[rank]["join_ns"] / 1e9 for ranks in runs], "steps": steps,
                "step_p50_s": percentile([ns for ranks in runs for ns in ranks[rank]["step_ns"]], 0.5) / 1e9,
                "step_p95_s": percentile([ns for ranks in runs for ns in ranks[rank]["step_ns"]], 0.95) / 1e9}
               for rank in range(world_size)],
        step_p50_s=percentile(step_slowest, 0.5) / 1e9, step_p95_s=percentile(step_slowest, 0.95) / 1e9,
        images_per_s=rate, single_rank_images_per_s=basis,
        scaling_efficiency=rate / (world_size * basis) if basis else None,
        scaling_unavailable=None if basis else f"world size 1 of {impl} on {device} did not run before this case")
    assert all(all(ns > 0 for ns in rank["step_ns"]) and len(rank["step_ns"]) == steps
               for ranks in runs for rank in ranks)


def test_torchrun(benchmark, settings, request, utilization_of, single_rank_rates, tmp_path, impl, device, world_size,
                  workload):
    """The training run launched by torchrun (docs/distributed.md#several-machines-torchrun): two agents (--nnodes 2,
    c10d rendezvous, a shared --rdzv-id, --max-restarts 0) of world_size / 2 ranks each, in two network namespaces where
    the machine allows (extra_info["network"] says which). Each round: fresh agents, the same steps as
    test_dist_training_run; its value is the slowest rank's Total Time."""
    from phasebench.worker import torchrun

    if world_size < 2 or world_size % 2:
        pytest.skip(f"two agents of world_size / 2 ranks each: world size {world_size} is not an even number above 1")
    if device == "cuda" and settings.cuda_reason:
        pytest.skip(settings.cuda_reason)
    registered = registry.get(impl)
    library = request.getfixturevalue("cpp_library") if registered.language == "cpp" else None
    steps = workload.steps_per_epoch * settings.epochs if benchmark.enabled else CHECK_STEPS
    threads = settings.rank_threads(device, world_size)
    runs = []

    def one_round():
        out = tmp_path / f"round{len(runs)}"
        options = settings.worker_options(device, str(tmp_path / f"progress{len(runs)}.log"), impl=impl,
                                          workload=workload) | {"threads": threads}
        result = torchrun.launch(impl, options, steps, out, library, timeout_s=settings.round_timeout * max(
            1, settings.epochs), dist_timeout_s=settings.dist_timeout, nproc_per_node=world_size // 2)
        ranks = result["ranks"]
        assert len(ranks) == world_size and len({rank["params_sha256"] for rank in ranks}) == 1, ranks
        for rank in ranks:
            rank["total_ns"] = rank["setup_ns"] + rank["join_ns"] + rank["loop_ns"]
        runs.append(result)
        worker_clock.advance(max(rank["total_ns"] for rank in ranks))

    benchmark.group = f"torchrun-world{world_size}"
    rounds = settings.run_rounds if benchmark.enabled else 1
    # The ranks are torchrun's processes, not the suite's: utilization watches the device only (as test_phase does
    # with several processes).
    with utilization_of(types.SimpleNamespace(pid=None, device=device, impl=impl)):
        benchmark.pedantic(one_round, rounds=rounds, warmup_rounds=0, iterations=1)
    images = (steps // workload.steps_per_epoch) * TRAIN_IMAGES + (steps % workload.steps_per_epoch) * workload.batch_size
    loops = [max(rank["loop_ns"] for rank in run["ranks"]) for run in runs]
    step_slowest = [max(per) for run in runs for per in zip(*(rank["step_ns"] for rank in run["ranks"]))]
    rate = images / (statistics.median(loops) / 1e9)
    basis = single_rank_rates.get((impl, device, workload))
    schema.write(
        benchmark, schema.TorchrunInfo, implementation=impl, language=registered.language,
        reference=registered.pair, device=device, phase="torchrun", **workload.as_info(), world_size=world_size, sync=registered.sync, rounds=rounds,
        warmup_rounds=0, epochs=settings.epochs, **threads_info(settings, device, world_size), steps=steps,
        images=images, nodes=2, nproc_per_node=world_size // 2, network=runs[0]["network"],
        namespaces=runs[0]["namespaces"], rendezvous=runs[0]["rdzv"], command=runs[0]["command"],
        total_median_s=statistics.median(max(r["total_ns"] for r in run["ranks"]) for run in runs) / 1e9,
        summed_median_s=statistics.median(max(sum(r["step_ns"]) for r in run["ranks"]) for run in runs) / 1e9,
        loop_median_s=statistics.median(loops) / 1e9,
        ranks=[{key: rank[key] for key in ("rank", "group_rank", "local_rank", "master", "agent_store", "threads")}
               | {"total_s": rank["total_ns"] / 1e9, "join_s": rank["join_ns"] / 1e9} for rank in runs[-1]["ranks"]],
        step_p50_s=percentile(step_slowest, 0.5) / 1e9, step_p95_s=percentile(step_slowest, 0.95) / 1e9,
        images_per_s=rate, single_rank_images_per_s=basis,
        scaling_efficiency=rate / (world_size * basis) if basis else None)
