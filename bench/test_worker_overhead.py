"""What the in-worker timing leaves out: one request's round trip from pytest to a worker and back,
through ctypes for the C++ worker, around a phase with an empty body (TorchBench benchmarks its own
worker the same way). The benchmark times the whole round trip with pytest-benchmark's own clock;
the test checks that the in-worker time of the same empty phase is a small fraction of it, so the
round trip is not billed to the phases."""

import statistics
import time

from phasebench import schema
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD


# Per selected implementation and device (phasebench/plugin/__init__.py), on the published workload: the messaging does
# not depend on what is trained.
def test_worker_overhead(benchmark, worker_for, utilization_of, settings, impl, device):
    worker = worker_for(impl, device)
    inside, round_trips = [], []

    def round_trip():
        start = time.perf_counter_ns()
        ns = worker.run_phase("noop").ns
        round_trips.append(time.perf_counter_ns() - start)
        inside.append(ns)

    benchmark.group = "worker_overhead"
    schema.write(benchmark, schema.WorkerOverheadInfo, implementation=impl, device=device, phase="worker_overhead",
                 **DEFAULT_WORKLOAD.as_info(), rounds=settings.rounds, warmup_rounds=settings.warmup_rounds)
    with utilization_of(worker):
        benchmark.pedantic(round_trip, rounds=settings.rounds, warmup_rounds=settings.warmup_rounds, iterations=1)
    while len(round_trips) < 20:  # under --benchmark-disable, enough round trips for a median
        round_trip()

    inside_ns, round_trip_ns = statistics.median(inside), statistics.median(round_trips)
    schema.write(benchmark, schema.WorkerOverheadInfo, in_worker_noop_median_ns=inside_ns,
                 round_trip_median_ns=round_trip_ns)
    # On cuda the empty phase still holds its two device synchronizations (about 10 µs on an H200),
    # so the bound is a third, not a tenth: were messaging inside, the two would be about equal.
    assert inside_ns < round_trip_ns / 3, (
        f"the empty phase's in-worker time ({inside_ns:.0f} ns) is not small next to the round trip "
        f"({round_trip_ns:.0f} ns): the in-worker timing would include messaging")
