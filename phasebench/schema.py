"""The saved-result format: one typed record for each kind of case's extra_info and one for the run's
machine_info["phasebench"], the method that made them, and the one way to write and read them.

A benchmark case writes its record through write(); a key its record does not have is refused there, and again
when the run is saved (check_saved, from the plugin's pytest_benchmark_update_json) and whenever a saved result is
read (check_result, info_of, machine_of), naming the file and the benchmark. A leaf: it imports no torch and
nothing of the suite beyond phasebench.spec, phasebench.method, phasebench.record (the base records: a saved dict's
typed form, and what every case records) and phasebench.distributed_records (the data-parallel cases' records, which
it re-exports as it does the base; tests/test_layers.py).

The measurement method that made a result is phasebench/method.py's (METHOD_VERSION). What each
key means, and its unit: phasebench/reference/fields.py, published as docs/reference/saved-results.md (a key added
here without its meaning there fails tests/test_reference_pages.py)."""

from __future__ import annotations

from dataclasses import dataclass

from phasebench import spec
from phasebench.distributed_records import (
    DistPhaseInfo,
    DistTrainingRunInfo,
    TorchrunInfo,
)
from phasebench.method import METHOD_VERSION
from phasebench.record import Case, Record, SchemaError, Utilization

# -- every case's extra_info (its base: phasebench/record.py; data parallel: phasebench/distributed_records.py) ---

@dataclass
class WorkerOverheadInfo(Case):
    """bench/test_worker_overhead.py: an empty phase's round trip against its in-worker time."""
    in_worker_noop_median_ns: float | None = None
    round_trip_median_ns: float | None = None


@dataclass
class LossItemInfo(Case):
    """bench/test_examples_differences.py: reading loss.item(), timed as a phase."""
    threads: int | None = None
    timer_floor_s: float | None = None
    phase_thread_cpu_cores: float | None = None
    phase_cpu_cores: float | None = None


@dataclass
class PhaseInfo(Case):
    """bench/test_phases.py: one training phase, timed inside its worker."""
    language: str | None = None
    reference: str | None = None  # the implementation it is compared with
    note: str | None = None  # the registry's note for the device
    threads: int | None = None
    processes: int | None = None
    order: int | None = None  # its place in its phase's run order (0 first), drawn from machine_info's order_seed
    timer_floor_s: float | None = None  # the median of the workers' empty-phase floors
    timer_floors_s: list | None = None
    phase_thread_cpu_cores: float | None = None
    phase_cpu_cores: float | None = None
    minor_faults_per_round: float | None = None
    major_faults_per_round: float | None = None
    # cuda only (absent on cpu and in results saved before they existed; docs/method.md#what-is-measured): each counted
    # round's host CPU time (the CPU time of the thread that ran the body, up to its end, before the closing
    # synchronize) and GPU time (between CUDA events recorded around the body on the current stream), seconds
    host_cpu_s: list | None = None
    host_cpu_median_s: float | None = None
    gpu_s: list | None = None
    gpu_median_s: float | None = None
    # What the counted rounds went through, read outside the clocks just before the first and just after the last
    # (the window), alike in both languages (docs/method.md#what-the-rounds-went-through); null under --count.
    rounds_window_s: float | None = None  # the window's wall seconds, in pytest: the rounds, their untimed
    # preparation and their requests (with --processes N, from the first worker's opening to the last one's close)
    # Per worker thread across the window: pid, tid (the main thread's is the pid; in the C++ worker, the host
    # interpreter's thread that calls the library), name (its comm), cpu_s (its own CPU seconds, user and system, from
    # its per-thread CPU clock, to the ns), voluntary_ctxt_switches and nonvoluntary_ctxt_switches (counts),
    # cpu_migrations (count, or null where not counted), started (inside the window: figures from its start), ended
    # (inside the window: figures null).
    worker_threads: list | None = None
    steal_s: float | None = None  # the machine's steal time across the window, seconds, all CPUs summed (/proc/stat,
    # read in pytest, in clock ticks of usually 10 ms): time the hypervisor gave these CPUs to others
    cpu_migrations: int | None = None  # the worker threads' moves between CPUs across the window, summed; null: unread
    cpu_migrations_source: str | None = None  # "sched": /proc/self/task/TID/sched se.nr_migrations, nothing added
    # to the rounds; "perf": a PERF_COUNT_SW_CPU_MIGRATIONS counter per thread (a lower bound if one started inside)
    cpu_migrations_unavailable: str | None = None  # why cpu_migrations is null (perf_event_paranoid, seccomp, ...)
    hardware_counters: str | None = None  # "absent" (no CPU PMU) or "present" (not counted)
    hardware_counters_reason: str | None = None  # what /sys/bus/event_source/devices lists
    gc_collections: int | None = None  # Python's garbage collections during the counted rounds' requests, in the
    # worker(s) (the C++ worker's: its host interpreter's); the untimed preparation included: an upper bound on the
    # collections inside the clock
    gc_collections_by_generation: list | None = None  # the same, per generation 0, 1, 2
    canary_start_s: float | None = None  # seconds a fixed pure-Python loop took in the worker just before the window
    # (the first worker's; best of 3): the machine's speed when the rounds began, the same work in both languages
    canary_end_s: float | None = None  # the same just after it (the last worker's): whether the speed moved
    round_checks: str | None = None  # what its worker did (--round-checks): on or off, in both languages; none: on
    # (a C++ case saved with C ABI 7, which had no switch, says computed: its rounds kept their checks)


@dataclass
class CountedPhaseInfo(PhaseInfo):
    """A phase under --count instructions (bench/test_phases.py counted_info, docs/instruction-counts.md)."""
    metric: str | None = None  # "instructions"
    unit: str | None = None
    instructions: list | None = None  # each counted round's
    instructions_median: float | None = None
    count_floor: float | None = None  # the empty bracket's count, the workers' median
    count_floors: list | None = None
    count_labels: list | None = None
    split: dict | None = None  # where the median round's instructions went
    top_functions: list | None = None
    cpu_capability: str | None = None
    # With caches or branches simulated (--count-i1/-d1/-ll, --count-branches;
    # docs/instruction-counts.md#simulated-caches-and-branches): {event: [each counted round's total]} for every
    # event callgrind's dumps name, in their order; each a number of events (unit: events), a model's, not the
    # machine's. Ir: instructions (the same as `instructions`); Dr, Dw: data reads and writes; I1mr, D1mr, D1mw:
    # first-level misses (instruction reads, data reads, data writes); ILmr, DLmr, DLmw: last-level misses, alike;
    # Bc, Bcm: conditional branches and their mispredictions; Bi, Bim: indirect branches and their mispredictions
    # (phasebench/worker/counting.py EVENTS). Absent where nothing was simulated.
    count_events: dict | None = None


@dataclass
class TrainingRunInfo(Case):
    """bench/test_training_run.py: the published run end to end; the benchmark's time is its Total Time."""
    language: str | None = None
    reference: str | None = None
    threads: int | None = None
    epochs: int | None = None
    steps: int | None = None
    summed_s: list | None = None  # Summed Time per round: the phase timers added up
    summed_median_s: float | None = None
    program_s: list | None = None  # Total Time per round: set-up and loop, inside the worker
    process_total_s: list | None = None  # spawn to exit per round, seen from pytest
    program_median_s: float | None = None
    setup_median_s: float | None = None
    startup_median_s: float | None = None
    loop_median_s: float | None = None
    stopping_median_s: float | None = None
    total_median_s: float | None = None
    phase_total_s: dict | None = None  # each phase's total over the run
    phase_cpu_cores: float | None = None
    free_running: dict | None = None  # the run without phase timers: total_s, loop_s, process_total_s, one_shot,
    # one_shot_s, and its own utilization, gpu and cpu (as the case's, which are the timed rounds')
    peak_rss_bytes: list | None = None
    peak_rss_median_bytes: float | None = None
    peak_device_bytes: list | None = None
    peak_device_median_bytes: float | None = None
    minor_faults: list | None = None
    major_faults: list | None = None
    minor_faults_per_step_median: float | None = None
    free_running_minor_faults_per_step: float | None = None
    # The worker's start-up in parts, seconds (docs/method.md#a-workers-start-up-in-parts): per timed round
    # {part: s}, and each part's median over them; cuda_init and pci_bus_id are absent on cpu
    startup_parts_s: list | None = None
    startup_parts_median_s: dict | None = None


@dataclass
class ConcurrentJobsInfo(Case):
    """bench/test_concurrent_jobs.py: N jobs released together on one device."""
    language: str | None = None
    reference: str | None = None
    note: str | None = None
    jobs: int | None = None
    threads: int | None = None
    threads_per_job: int | None = None
    threads_split: str | None = None
    trained: str | None = None
    steps_per_job: int | None = None
    images: int | None = None
    makespan_s: float | None = None
    images_per_s: float | None = None
    job_loop_s: list | None = None
    job_start_lag_s: list | None = None
    job_cpu_cores: list | None = None
    job_minor_faults: list | None = None
    job_major_faults: list | None = None
    job_minor_faults_per_step: list | None = None
    single_job_loop_s: float | None = None
    slowdown: list | None = None
    slowdown_unavailable: str | None = None
    mps: dict | None = None


@dataclass
class EnsembleInfo(Case):
    """bench/test_ensemble.py: M models trained together, one step of all of them per round."""
    language: str | None = None
    reference: str | None = None
    note: str | None = None
    models: int | None = None
    ensemble: str | None = None
    seeds: str | None = None
    threads: int | None = None
    timer_floor_s: float | None = None
    clock: str | None = None  # what the clock holds
    step_median_s: float | None = None
    model_step_median_s: float | None = None
    phase_thread_cpu_cores: float | None = None
    phase_cpu_cores: float | None = None


# -- the run's machine_info["phasebench"] ---------------------------------------------------------------------

@dataclass
class MachineInfo(Record):
    """Where and how a run ran (phasebench/plugin/machine.py; the count mode's keys from
    phasebench/plugin/counting.py; gpu_sampling from phasebench/utilization.py's Monitor)."""
    method: int | None = None  # phasebench/method.py's METHOD_VERSION; none recorded is method 1
    method_sources: str | None = None  # method_sources_hash() of the sources that ran (phasebench/method.py)
    metric: str | None = None  # "time", or "instructions" under --count; none recorded is time
    unit: str | None = None
    count: dict | None = None  # the count mode's bracket, Valgrind and pins; with caches simulated their geometry
    # ("caches": {"I1", "D1", "LL": [size bytes, ways, line bytes]}), with branches simulated "branch_sim": true
    torch: str | None = None
    torchvision: str | None = None
    cuda: str | None = None
    cudnn: object = None
    gpu: dict | None = None
    gpu_unavailable: str | None = None
    gpu_sampling: str | None = None  # why no GPU was sampled; None while sampling works
    cpu: str | None = None
    threads: int | None = None
    implementations: list | None = None
    workloads: list | None = None
    dataset: str | None = None
    dataset_path: str | None = None
    dataset_origin: str | None = None
    rounds: int | None = None
    warmup_rounds: int | None = None
    processes: int | None = None
    order_seed: int | None = None  # each phase's run order's seed (--order-seed); none: the fixed rotation's order
    testing: dict | None = None  # the test knobs a testing run used; None in a real run
    round_checks: str | None = None  # "on" or "off" (--round-checks, phasebench/plugin/switches.py); none: on
    omp_wait_policy: str | None = None  # the timed workers' OMP_WAIT_POLICY, lower case ("default": none set)
    pins: dict | None = None  # --pins count: what the timed workers ran under, and could not; null: none
    # The pytest process's (and so its workers') CUDA settings that change what a cuda phase does; null: unset
    cublas_workspace_config: str | None = None  # CUBLAS_WORKSPACE_CONFIG
    pytorch_cuda_alloc_conf: str | None = None  # PYTORCH_CUDA_ALLOC_CONF


# Keys older methods saved that the current records no longer have: read (and dropped) in results of those
# methods only.
RETIRED = {
    TrainingRunInfo: {"setup_holds": 3},  # a sentence saying what set-up held; the method says it
    DistTrainingRunInfo: {"setup_holds": 3},
    MachineInfo: {"test_slow_phase": 3},  # the slowed phase of a testing run; now in `testing`
}
CASE_KINDS = (WorkerOverheadInfo, LossItemInfo, PhaseInfo, CountedPhaseInfo, TrainingRunInfo, ConcurrentJobsInfo,
              EnsembleInfo, DistPhaseInfo, DistTrainingRunInfo, TorchrunInfo)


def kind_of(info: dict) -> type[Case] | None:
    """The record kind of an extra_info, from its phase (None: no phase recorded yet)."""
    phase = info.get("phase")
    if not isinstance(phase, str):
        return None
    if phase == "torchrun":
        return TorchrunInfo
    if info.get("world_size"):
        return DistTrainingRunInfo if phase == "training_run" else DistPhaseInfo
    if phase == "training_run":
        return TrainingRunInfo
    if phase.startswith("concurrent_jobs-"):
        return ConcurrentJobsInfo
    if phase.startswith("ensemble-"):
        return EnsembleInfo
    if phase in ("loss_item", "worker_overhead"):
        return LossItemInfo if phase == "loss_item" else WorkerOverheadInfo
    return CountedPhaseInfo if info.get("metric") == "instructions" else PhaseInfo


def _refuse_unknown(kind: type[Record], saved: dict, method: int | None, where: str) -> dict:
    """`saved` less the retired keys its method may hold; SchemaError naming `where` for any other unknown key."""
    retired = RETIRED.get(kind, {})
    allowed = {key for key, last in retired.items() if method is None or method <= last}
    unknown = sorted(set(saved) - set(kind.keys()) - allowed)
    if unknown:
        hint = "".join(f" ('{key}' was last saved by method {retired[key]})" for key in unknown if key in retired)
        raise SchemaError(f"{where}: {kind.__name__} has no key {', '.join(map(repr, unknown))}{hint} "
                          f"(phasebench/schema.py)")
    return {key: value for key, value in saved.items() if key not in allowed}


def _bench_name(bench: dict) -> str:
    return bench.get("fullname") or bench.get("name") or "a benchmark"


def info_of(bench: dict, method: int | None = None, source: str = "") -> Case | None:
    """The typed extra_info of a saved benchmark; None for one with no phase (not a phasebench case). With
    `method`, keys only that method saved are refused; without it, any method's are read."""
    info = bench.get("extra_info") or {}
    kind = kind_of(info)
    if kind is None:
        return None
    where = f"{source + ': ' if source else ''}{_bench_name(bench)}"
    return kind(**_refuse_unknown(kind, info, method, where))


def machine_of(result: dict, source: str = "") -> MachineInfo:
    """The typed machine_info["phasebench"] of a saved result (method 1 where none is recorded)."""
    saved = (result.get("machine_info") or {}).get("phasebench") or {}
    method = saved.get("method") or 1
    machine = MachineInfo(**_refuse_unknown(MachineInfo, saved, method, f"{source or 'a result'}: machine_info"))
    machine.method = method
    if saved.get("test_slow_phase"):  # a method-3 testing run's knob, read where `testing` holds it now
        machine.testing = {"slow_phase": saved["test_slow_phase"]}
    return machine


def check_result(result: dict, source: str = "") -> None:
    """SchemaError, naming `source` and the benchmark, unless every record of a saved result is known to its
    method, and the method to this code."""
    machine = machine_of(result, source)
    if machine.method > METHOD_VERSION:
        raise SchemaError(f"{source or 'a result'}: measured by phasebench method {machine.method}; this code knows "
                          f"methods up to {METHOD_VERSION} (phasebench/schema.py): read it with the code that made it")
    for bench in result.get("benchmarks") or []:
        if isinstance(bench, dict):
            info_of(bench, machine.method, source)


def problem(result: dict, source: str = "") -> str | None:
    """check_result's reason in a few words, or None."""
    try:
        check_result(result, source)
    except SchemaError as error:
        return str(error).removeprefix(f"{source}: ") if source else str(error)
    return None


def check_saved(output_json: dict) -> None:
    """For the plugin's pytest_benchmark_update_json: every record of the run about to be saved is the current
    method's, with no key its kind does not have."""
    machine = (output_json.get("machine_info") or {}).get("phasebench") or {}
    _refuse_unknown(MachineInfo, machine, METHOD_VERSION, "this run's machine_info")
    for bench in output_json.get("benchmarks") or []:
        info = bench.get("extra_info") or {}
        kind = kind_of(info) or Utilization
        _refuse_unknown(kind, info, METHOD_VERSION, f"this run's {_bench_name(bench)}")


# -- writing ----------------------------------------------------------------------------------------------------

def write(benchmark, record: Record | type[Record], **values) -> None:
    """Put a record into benchmark.extra_info: a whole record, or some keys of a kind (`write(benchmark,
    PhaseInfo, phase=...)`). A key the kind does not have is a TypeError naming both."""
    kind = record if isinstance(record, type) else type(record)
    if not isinstance(record, type):
        values = record.as_dict() | values
    unknown = sorted(set(values) - set(kind.keys()))
    if unknown:
        raise TypeError(f"{kind.__name__} has no key {', '.join(map(repr, unknown))} (phasebench/schema.py)")
    merged = dict(benchmark.extra_info) | values
    found = kind_of(merged)
    if found is not None:
        _refuse_unknown(found, merged, METHOD_VERSION, f"{kind.__name__} written into a {found.__name__}")
    benchmark.extra_info.update(values)


# -- what is in them --------------------------------------------------------------------------------------------

def workload_of(info: Case) -> spec.Workload:
    """The workload a case ran; results from before workloads existed are the default."""
    return spec.of_info({"width": info.width, "batch_size": info.batch_size})
