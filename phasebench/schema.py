"""The saved-result format: one typed record for each kind of case's extra_info and one for the run's
machine_info["phasebench"], the format's version, and the one way to write a record.

A benchmark case writes its record through write(), which saves the record's kind with it; a key its record does not
have is refused there, and again when the run is saved (check_saved, from the plugin's pytest_benchmark_update_json,
which also requires every required key). Saved files are read by phasebench/saved.py (SavedResult), which brings an
older format to this one first. A leaf: it imports no torch and nothing of the suite beyond phasebench.record (the
base records: a saved dict's typed form, and what every case records) and phasebench.distributed_records (the
data-parallel cases' records, which it re-exports as it does the base; tests/test_schema.py, tests/test_layers.py).

What each key means, and its unit, is its field's (saved_field), published as docs/reference/saved-results.md (a key
added without them fails tests/test_reference_pages.py)."""

from __future__ import annotations

from dataclasses import dataclass

from phasebench.distributed_records import (
    DistPhaseInfo,
    DistTrainingRunInfo,
    TorchrunInfo,
)
from phasebench.record import Case, Record, SchemaError, Utilization, saved_field

# The layout of a saved result, saved in machine_info["phasebench"]["format"]. Results saved before it was recorded
# have the layout of their method's version (1 to 5); phasebench/saved.py migrates each to the next. Raise it whenever
# a key is renamed, moved or retired, or a required key added, and give phasebench/saved.py the migration.
# 6: every case's record saves its kind; the format is recorded.
FORMAT_VERSION = 6
LAST_UNRECORDED_FORMAT = 5  # a result that records no format has its method's layout, up to this one

# -- every case's extra_info (its base: phasebench/record.py; data parallel: phasebench/distributed_records.py) ---

@dataclass
class WorkerOverheadInfo(Case):
    """bench/test_worker_overhead.py: an empty phase's round trip against its in-worker time."""
    in_worker_noop_median_ns: float | None = saved_field("ns", "the median time of an empty phase, timed inside the "
                                                               "worker")
    round_trip_median_ns: float | None = saved_field("ns", "the median time of the same request seen from pytest: "
                                                           "sent, run, answered")


@dataclass
class LossItemInfo(Case):
    """bench/test_examples_differences.py: reading loss.item(), timed as a phase."""
    threads: int | None = saved_field("count", "the worker's intra-op threads")
    timer_floor_s: float | None = saved_field("s", "the worker's timer floor: what its clock reads around an empty "
                                                   "phase")
    phase_thread_cpu_cores: float | None = saved_field("cores", "CPU time of the thread that ran the timed bodies over "
                                                                "their wall time; null where the bodies are too short "
                                                                "to tell")
    phase_cpu_cores: float | None = saved_field("cores", "CPU time of the whole worker process (every intra-op thread) "
                                                         "over the timed bodies' wall time; null where the bodies are "
                                                         "too short to tell")


@dataclass
class PhaseInfo(Case):
    """bench/test_phases.py: one training phase, timed inside its worker."""
    language: str | None = saved_field("text", "`python` or `cpp`: the language of the implementation's training code")
    reference: str | None = saved_field("text", "the implementation it is compared with (`cpp` for `python`)")
    note: str | None = saved_field("text", "the registry's note on the implementation for this device, or null")
    threads: int | None = saved_field("count", "the workers' intra-op threads (`--threads`, or the number torch "
                                               "picked)")
    processes: int | None = saved_field("count", "fresh worker processes that shared the rounds (`--processes`)")
    order: int | None = saved_field("count", "its place in its phase's run order, 0 first, drawn from machine_info's "
                                             "`order_seed`")
    timer_floor_s: float | None = saved_field("s", "the median of the workers' timer floors: what the clock reads "
                                                   "around an empty phase")
    timer_floors_s: list | None = saved_field("list of s", "each worker's timer floor")
    phase_thread_cpu_cores: float | None = saved_field("cores", "CPU time of the thread that ran the timed bodies over "
                                                                "their wall time; null where the bodies are too short "
                                                                "to tell")
    phase_cpu_cores: float | None = saved_field("cores", "CPU time of the whole worker process over the timed bodies' "
                                                         "wall time; null where the bodies are too short to tell")
    minor_faults_per_round: float | None = saved_field("count", "the worker's minor page faults across one timed body, "
                                                                "median of the counted rounds (docs/page-faults.md)")
    major_faults_per_round: float | None = saved_field("count", "the same for major page faults (pages read from disk)")
    # cuda only (absent on cpu and in results saved before they existed; docs/method.md#what-is-measured): each counted
    # round's host CPU time (the CPU time of the thread that ran the body, up to its end, before the closing
    # synchronize) and GPU time (between CUDA events recorded around the body on the current stream), seconds
    host_cpu_s: list | None = saved_field("list of s", "cuda only: each counted round's host CPU time, the CPU time of "
                                                       "the thread that ran the body up to its end, read before the "
                                                       "closing synchronize (docs/method.md#what-is-measured)")
    host_cpu_median_s: float | None = saved_field("s", "cuda only: their median; near the wall time, the phase is "
                                                       "host-bound")
    gpu_s: list | None = saved_field("list of s", "cuda only: each counted round's GPU time, between CUDA events "
                                                  "recorded just before and just after the body on the current stream")
    gpu_median_s: float | None = saved_field("s", "cuda only: their median: the stream's span across the body, the "
                                                  "device's idle time between launches included "
                                                  "(docs/gpu.md#host-cpu-and-gpu-time)")
    # What the counted rounds went through, read outside the clocks just before the first and just after the last
    # (the window), alike in both languages (docs/method.md#what-the-rounds-went-through); null under --count.
    rounds_window_s: float | None = saved_field("s", "wall time of the window around the counted rounds, read outside "
                                                     "the clocks: the rounds, their untimed preparation and their "
                                                     "requests; null under `--count`")
    # Per worker thread across the window: pid, tid (the main thread's is the pid; in the C++ worker, the host
    # interpreter's thread that calls the library), name (its comm), cpu_s (its own CPU seconds, user and system, from
    # its per-thread CPU clock, to the ns), voluntary_ctxt_switches and nonvoluntary_ctxt_switches (counts),
    # cpu_migrations (count, or null where not counted), started (inside the window: figures from its start), ended
    # (inside the window: figures null).
    worker_threads: list | None = saved_field("list of objects", "each worker thread across the window: `pid`, `tid`, "
                                                                 "`name`, `cpu_s` (its own CPU seconds), "
                                                                 "`voluntary_ctxt_switches`, "
                                                                 "`nonvoluntary_ctxt_switches`, `cpu_migrations` "
                                                                 "(count or null), `started` and `ended` (flags: it "
                                                                 "began or ended inside the window)")
    steal_s: float | None = saved_field("s", "the machine's steal time across the window, all CPUs summed: time the "
                                             "hypervisor gave these CPUs to others")
    cpu_migrations: int | None = saved_field("count", "the worker threads' moves between CPUs across the window, "
                                                      "summed; null where they could not be read")
    cpu_migrations_source: str | None = saved_field("text", "where `cpu_migrations` comes from: `sched` (the kernel's "
                                                            "per-thread counter, nothing added to the rounds) or "
                                                            "`perf` (a software perf counter per thread; a lower bound "
                                                            "where a thread started inside the window)")
    cpu_migrations_unavailable: str | None = saved_field("text", "why `cpu_migrations` is null")
    hardware_counters: str | None = saved_field("text", "`absent` (the machine exposes no CPU performance counters) or "
                                                        "`present` (present, not counted)")
    hardware_counters_reason: str | None = saved_field("text", "what the kernel lists of its event sources, the ground "
                                                               "for `hardware_counters`")
    gc_collections: int | None = saved_field("count", "Python's garbage collections in the workers during the counted "
                                                      "rounds' requests, their untimed preparation included: an upper "
                                                      "bound on those inside the clock")
    gc_collections_by_generation: list | None = saved_field("list of count", "the same for generations 0, 1 and 2")
    canary_start_s: float | None = saved_field("s", "a fixed pure-Python loop's time in the worker just before the "
                                                    "window (best of 3): the machine's speed when the rounds began")
    canary_end_s: float | None = saved_field("s", "the same just after the window: whether the machine's speed moved")
    round_checks: str | None = saved_field("text", "what the worker did of the per-round checks (`--round-checks`): "
                                                   "`on` or `off`; null is on (a C++ case saved with C ABI 7, which "
                                                   "had no switch, says `computed`: its rounds kept their checks)")
    iterations: int | None = saved_field("count", "calls of the phase per counted round, as pytest-benchmark's "
                                                  "`stats.iterations`: its statistics are per call "
                                                  "(docs/method.md#calls-per-round); 1 under `--benchmark-disable`, "
                                                  "`--count` and for a one-shot phase")
    iterations_from: str | None = saved_field("text", "`calibrated`: from the warm-up calls against the target round; "
                                                      "`phase`: those the phase's first-timed implementation calibrated "
                                                      "in an unpaired run; `pair`: from every side's warm-up, the "
                                                      "fastest side's median call against the target round; `baseline`: the baseline's of `--benchmark-compare`; "
                                                      "null where a round is one call by rule")


@dataclass
class CountedPhaseInfo(PhaseInfo):
    """A phase under --count instructions (bench/test_phases.py counted_info, docs/instruction-counts.md)."""
    metric: str | None = saved_field("text", "`instructions`")
    unit: str | None = saved_field("text", "`instructions`")
    instructions: list | None = saved_field("list of count", "each counted round's instructions")
    instructions_median: float | None = saved_field("count", "their median")
    count_floor: float | None = saved_field("count", "the empty bracket's count, the median of the workers'")
    count_floors: list | None = saved_field("list of count", "each worker's empty-bracket count")
    count_labels: list | None = saved_field("list of text", "each counted round's label in callgrind's dumps")
    split: dict | None = saved_field("object of count", "where the median round's instructions went: interpreter, "
                                                        "bindings, dispatcher and autograd, kernels, C library and "
                                                        "allocator, MKL, oneDNN and JIT code, …")
    top_functions: list | None = saved_field("list", "the last round's functions with the most instructions of their "
                                                     "own: [object file, function, count]")
    cpu_capability: str | None = saved_field("text", "the CPU capability ATen dispatched to under the count mode's "
                                                     "pins")
    # With caches or branches simulated (--count-i1/-d1/-ll, --count-branches;
    # docs/instruction-counts.md#simulated-caches-and-branches): {event: [each counted round's total]} for every
    # event callgrind's dumps name, in their order; each a number of events (unit: events), a model's, not the
    # machine's. Ir: instructions (the same as `instructions`); Dr, Dw: data reads and writes; I1mr, D1mr, D1mw:
    # first-level misses (instruction reads, data reads, data writes); ILmr, DLmr, DLmw: last-level misses, alike;
    # Bc, Bcm: conditional branches and their mispredictions; Bi, Bim: indirect branches and their mispredictions
    # (phasebench/worker/counting.py EVENTS). Absent where nothing was simulated.
    count_events: dict | None = saved_field("object of lists of count", "with caches or branches simulated: each event "
                                                                        "callgrind names (Ir, Dr, Dw, I1mr, D1mr, "
                                                                        "D1mw, ILmr, DLmr, DLmw, Bc, Bcm, Bi, Bim) "
                                                                        "with each counted round's total, a model's "
                                                                        "events, not the machine's; absent where "
                                                                        "nothing was simulated")


# TrainingRunInfo.phase_ratios' keys beside the phases': the Summed Time's ratio and the process total's.
SUMMED_RATIO, PROCESS_TOTAL_RATIO = "summed", "process_total"


@dataclass
class TrainingRunInfo(Case):
    """bench/test_training_run.py: the published run end to end; the benchmark's time is its Total Time."""
    language: str | None = saved_field("text", "`python` or `cpp`")
    reference: str | None = saved_field("text", "the implementation it is compared with")
    threads: int | None = saved_field("count", "the workers' intra-op threads")
    epochs: int | None = saved_field("count", "epochs trained each round (`--epochs`)")
    steps: int | None = saved_field("count", "training steps each round")
    summed_s: list | None = saved_field("list of s", "each round's Summed Time: the phase timers added up")
    summed_median_s: float | None = saved_field("s", "their median")
    program_s: list | None = saved_field("list of s", "each round's Total Time, inside the worker: set-up and loop; "
                                                      "the benchmark's statistics are of these")
    process_total_s: list | None = saved_field("list of s", "each round's worker process from spawn to exit, seen from "
                                                            "pytest")
    program_median_s: float | None = saved_field("s", "the median Total Time (set-up and loop)")
    setup_median_s: float | None = saved_field("s", "the median set-up inside the worker: on cuda CUDA's "
                                                    "initialization, then its trainer built (model, optimizer, data), "
                                                    "its imports done before")
    startup_median_s: float | None = saved_field("s", "the median start-up, seen from pytest: spawn until the worker "
                                                      "is ready to train, its set-up included")
    loop_median_s: float | None = saved_field("s", "the median training loop, inside the worker")
    stopping_median_s: float | None = saved_field("s", "the median stop, seen from pytest: asked to stop until the "
                                                       "process exited")
    total_median_s: float | None = saved_field("s", "the median of `process_total_s`")
    phase_total_s: dict | None = saved_field("object of s", "each timed phase's total over a round, the median of the "
                                                            "rounds")
    phase_cpu_cores: float | None = saved_field("cores", "the worker process's CPU time over the timed phases' summed "
                                                         "wall time")
    phase_ratios: dict | None = saved_field("object", "paired runs only: each timed phase's in-run total over its "
                                                      "reference's, from the same pairs of rounds as `ratio`, keyed by "
                                                      "phase, and the Summed Time's (`summed`) and the process "
                                                      "total's (`process_total`), each as `ratio` is")
    free_running: dict | None = saved_field("object", "with `--free-running`: the run without phase timers: `total_s`, "
                                                      "`loop_s`, `process_total_s`, `one_shot` and `one_shot_s` (a "
                                                      "phase run once, e.g. a compile), and its own `gpu` and `cpu`; "
                                                      "null without it")
    peak_rss_bytes: list | None = saved_field("list of bytes", "the worker's peak resident memory, per round, then the "
                                                               "free-running run's")
    peak_rss_median_bytes: float | None = saved_field("bytes", "their median")
    peak_device_bytes: list | None = saved_field("list of bytes", "on cuda, the peak allocated device memory, per "
                                                                  "round then the free-running run's; not measured on "
                                                                  "cpu")
    peak_device_median_bytes: float | None = saved_field("bytes", "their median; null on cpu")
    minor_faults: list | None = saved_field("list of count", "the worker's minor page faults across each round's "
                                                             "training, then the free-running run's")
    major_faults: list | None = saved_field("list of count", "the same for major page faults")
    minor_faults_per_step_median: float | None = saved_field("count", "minor page faults per training step, median of "
                                                                      "the rounds")
    free_running_minor_faults_per_step: float | None = saved_field("count", "the same in the free-running run; null "
                                                                            "without it")
    # The worker's start-up in parts, seconds (docs/method.md#a-workers-start-up-in-parts): per timed round
    # {part: s}, and each part's median over them; cuda_init and pci_bus_id are absent on cpu
    startup_parts_s: list | None = saved_field("list of object of s", "each round's worker start-up in parts, as the "
                                                                      "worker reports it: `imports` (the process's "
                                                                      "creation to its libraries loaded), `cuda_init` "
                                                                      "(cuda only), `trainer` (its construction), "
                                                                      "`timer_floor`, `pci_bus_id` (cuda only); "
                                                                      "docs/method.md#a-workers-start-up-in-parts")
    startup_parts_median_s: dict | None = saved_field("object of s", "each part's median over the rounds")


@dataclass
class ConcurrentJobsInfo(Case):
    """bench/test_concurrent_jobs.py: N jobs released together on one device."""
    language: str | None = saved_field("text", "`python` or `cpp`")
    reference: str | None = saved_field("text", "the implementation it is compared with")
    note: str | None = saved_field("text", "the registry's note for this device, or null")
    jobs: int | None = saved_field("count", "jobs released together on the device (`--jobs`)")
    threads: int | None = saved_field("count", "the run's intra-op threads (`--threads`, or torch's pick)")
    threads_per_job: int | None = saved_field("count", "each job's intra-op threads: on cpu the run's split between "
                                                       "the jobs")
    threads_split: str | None = saved_field("text", "how the threads were shared, in words")
    trained: str | None = saved_field("text", "what each job trained: its epochs, or under `--benchmark-disable` a few "
                                              "steps")
    steps_per_job: int | None = saved_field("count", "training steps each job took")
    images: int | None = saved_field("count", "images trained by all jobs together")
    makespan_s: float | None = saved_field("s", "from the release to the last job's end; the benchmark's value")
    images_per_s: float | None = saved_field("images/s", "`images` over `makespan_s`: the device's throughput")
    job_loop_s: list | None = saved_field("list of s", "each job's training loop, timed inside its worker")
    job_start_lag_s: list | None = saved_field("list of s", "each job's start after the release")
    job_cpu_cores: list | None = saved_field("list of cores", "each job's process CPU time over its request's wall "
                                                              "time")
    job_minor_faults: list | None = saved_field("list of count", "each job's minor page faults across its request")
    job_major_faults: list | None = saved_field("list of count", "each job's major page faults across its request")
    job_minor_faults_per_step: list | None = saved_field("list of count", "each job's minor page faults per step")
    single_job_loop_s: float | None = saved_field("s", "the loop of the one-job case of the same implementation, "
                                                       "device and workload in the same session; the slowdown's basis")
    slowdown: list | None = saved_field("list of ratios", "each job's loop over `single_job_loop_s`")
    slowdown_unavailable: str | None = saved_field("text", "why there is no slowdown (no one-job case ran before it)")
    mps: dict | None = saved_field("object", "whether NVIDIA MPS would serve the jobs on cuda: its control pipe, "
                                             "processes and the GPU's compute mode, found by looking only")


@dataclass
class EnsembleInfo(Case):
    """bench/test_ensemble.py: M models trained together, one step of all of them per round."""
    language: str | None = saved_field("text", "`python` or `cpp`")
    reference: str | None = saved_field("text", "the implementation it is compared with")
    note: str | None = saved_field("text", "the registry's note for this device, or null")
    models: int | None = saved_field("count", "models trained together (`--models`)")
    ensemble: str | None = saved_field("text", "how the implementation trains them together (its registry entry)")
    seeds: str | None = saved_field("text", "the members' seeds, `1..M`")
    threads: int | None = saved_field("count", "the worker's intra-op threads")
    timer_floor_s: float | None = saved_field("s", "the worker's timer floor")
    clock: str | None = saved_field("text", "what the clock holds: one step of every member, the batch loaded and "
                                            "copied before it")
    step_median_s: float | None = saved_field("s", "the median step of all members")
    model_step_median_s: float | None = saved_field("s", "`step_median_s` over `models`: one member's share")
    phase_thread_cpu_cores: float | None = saved_field("cores", "CPU of the thread that ran the steps over their wall "
                                                                "time")
    phase_cpu_cores: float | None = saved_field("cores", "CPU of the worker process over the steps' wall time")


# -- the run's machine_info["phasebench"] ---------------------------------------------------------------------

@dataclass
class MachineInfo(Record):
    """Where and how a run ran (phasebench/plugin/machine.py; the count mode's keys from
    phasebench/plugin/counting.py; gpu_sampling from phasebench/utilization.py's Monitor)."""
    format: int | None = saved_field("count", "the saved result's format version (phasebench/schema.py "
                                              "FORMAT_VERSION); a result saved before it was recorded has its "
                                              "method's number as its format", required=True)
    method: int | None = saved_field("count", "the measurement method's version (phasebench/method.py); results of "
                                              "different methods are never compared (a result that records none is "
                                              "of method 1)", required=True)
    method_sources: str | None = saved_field("text", "a hash of the sources that define the clocks, as they ran")
    metric: str | None = saved_field("text", "`time`, or `instructions` under `--count instructions`")
    unit: str | None = saved_field("text", "the metric's unit under `--count`")
    count: dict | None = saved_field("object", "under `--count`: the bracket, Valgrind's and glibc's versions, "
                                               "Valgrind's options, the pins, `aslr_off`, the pinned `cpu_capability`, "
                                               "what could not be pinned, and with simulations `caches` ({I1, D1, LL: "
                                               "[size bytes, ways, line bytes]}) and `branch_sim`")
    torch: str | None = saved_field("text", "torch's version")
    torchvision: str | None = saved_field("text", "torchvision's version")
    cuda: str | None = saved_field("text", "the CUDA version torch was built with; null for a CPU build")
    cudnn: object = saved_field("number", "cuDNN's version as torch reports it; null for a collection or without cuDNN")
    gpu: dict | None = saved_field("object", "the GPU's `name` and `driver`; null where cuda cannot run")
    gpu_unavailable: str | None = saved_field("text", "why cuda cases cannot run (a CPU build, no GPU NVML lists, "
                                                      "torch cannot use one); null where they can")
    gpu_sampling: str | None = saved_field("text", "why no GPU was sampled; null while sampling works")
    cpu: str | None = saved_field("text", "the CPU model")
    threads: int | None = saved_field("count", "the workers' intra-op threads")
    implementations: list | None = saved_field("list of text", "the implementations the run selected (`--impl`)")
    workloads: list | None = saved_field("list of objects", "the workloads the run selected: each its `width`, "
                                                            "`batch_size` and `workload` id")
    dataset: str | None = saved_field("text", "the data source used: `mnist`, `fashion-mnist` or `synthetic`")
    dataset_path: str | None = saved_field("text", "the folder of IDX files both trainers read")
    dataset_origin: str | None = saved_field("text", "where the data came from, and for synthetic data why no real "
                                                     "data was found")
    rounds: int | None = saved_field("count", "counted rounds per phase benchmark (`--rounds`)")
    warmup_rounds: int | None = saved_field("count", "warm-up rounds per phase benchmark (`--warmup-rounds`)")
    processes: int | None = saved_field("count", "worker processes per phase case (`--processes`)")
    pair_workers: int | None = saved_field("count", "long-lived workers a side that a paired phase's sweeps run in "
                                                   "(`--pair-workers`)")
    order_seed: int | None = saved_field("count", "the seed of each phase's run order (`--order-seed` runs the cases "
                                                  "in it again)")
    testing: dict | None = saved_field("object", "the test knobs a testing run used; null in a real run")
    round_checks: str | None = saved_field("text", "`on` or `off` (`--round-checks`); null is on")
    omp_wait_policy: str | None = saved_field("text", "the timed workers' OMP_WAIT_POLICY, lower case; `default` where "
                                                      "none is set")
    pins: dict | None = saved_field("object", "with `--pins count`: what the timed workers ran under (`conditions`, "
                                              "`env`, `aslr_off`, `threads`, `gc`, `type_cache`, `cpu_capability`) and "
                                              "what of the count mode they could not have (`not_applied`); null "
                                              "without it")
    # The pytest process's (and so its workers') CUDA settings that change what a cuda phase does; null: unset
    cublas_workspace_config: str | None = saved_field("text", "CUBLAS_WORKSPACE_CONFIG as the run (and its workers) "
                                                              "had it; null where unset")
    pytorch_cuda_alloc_conf: str | None = saved_field("text", "PYTORCH_CUDA_ALLOC_CONF as the run (and its workers) "
                                                              "had it; null where unset")


CASE_KINDS = (WorkerOverheadInfo, LossItemInfo, PhaseInfo, CountedPhaseInfo, TrainingRunInfo, ConcurrentJobsInfo,
              EnsembleInfo, DistPhaseInfo, DistTrainingRunInfo, TorchrunInfo)
KINDS = {kind.__name__: kind for kind in CASE_KINDS}


def kind_of(info: dict) -> type[Case] | None:
    """The record kind an extra_info saved (its `kind`, written by write()); None for one with none (no phasebench
    case, or one still being written). A kind this code does not know is a SchemaError."""
    name = info.get("kind")
    if name is None:
        return None
    if name not in KINDS:
        raise SchemaError(f"no record kind {name!r} (phasebench/schema.py CASE_KINDS)")
    return KINDS[name]


def refuse_unknown(kind: type[Record], saved: dict, where: str) -> None:
    """SchemaError naming `where` for a key of `saved` that `kind` does not have."""
    unknown = sorted(set(saved) - set(kind.keys()))
    if unknown:
        raise SchemaError(f"{where}: {kind.__name__} has no key {', '.join(map(repr, unknown))} (phasebench/schema.py)")


def bench_name(bench: dict) -> str:
    return bench.get("fullname") or bench.get("name") or "a benchmark"


def info_of(bench: dict, source: str = "") -> Case | None:
    """The typed extra_info of a benchmark in the current format; None for one with no record kind (not a phasebench
    case). A key its kind does not have is a SchemaError naming `source` and the benchmark. Saved files are read
    through phasebench.saved.SavedResult, which brings older formats to this one first."""
    info = bench.get("extra_info") or {}
    where = f"{source + ': ' if source else ''}{bench_name(bench)}"
    try:
        kind = kind_of(info)
    except SchemaError as error:
        raise SchemaError(f"{where}: {error}") from None
    if kind is None:
        return None
    refuse_unknown(kind, info, where)
    return kind(**info)


def machine_of(result: dict, source: str = "") -> MachineInfo:
    """The typed machine_info["phasebench"] of a result in the current format."""
    saved = (result.get("machine_info") or {}).get("phasebench") or {}
    refuse_unknown(MachineInfo, saved, f"{source or 'a result'}: machine_info")
    return MachineInfo(**saved)


def check_saved(output_json: dict) -> None:
    """For the plugin's pytest_benchmark_update_json: every record of the run about to be saved is the current
    format's, with no key its kind does not have, its kind saved where it is a case, and every required key set."""
    machine = machine_of(output_json, "this run")
    if machine.missing():
        raise SchemaError(f"this run's machine_info: no {', '.join(machine.missing())} (phasebench/schema.py)")
    for bench in output_json.get("benchmarks") or []:
        info = bench.get("extra_info") or {}
        where = f"this run's {bench_name(bench)}"
        if "phase" in info and "kind" not in info:
            raise SchemaError(f"{where}: its extra_info has no 'kind' (write it through phasebench.schema.write)")
        record = info_of(bench, "this run")
        if record is None:
            refuse_unknown(Utilization, info, where)
        elif record.missing():
            raise SchemaError(f"{where}: {type(record).__name__} has no {', '.join(record.missing())} "
                              f"(phasebench/schema.py)")


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
    # The kind is saved with the record: the most specific kind written so far (CountedPhaseInfo over PhaseInfo).
    if kind in CASE_KINDS and (found is None or issubclass(kind, found)):
        found = kind
        values["kind"] = kind.__name__
        merged["kind"] = kind.__name__
    if found is not None:
        refuse_unknown(found, merged, f"{kind.__name__} written into a {found.__name__}")
    benchmark.extra_info.update(values)
