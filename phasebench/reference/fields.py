"""What each key of a saved result means, and its unit: the text of docs/reference/saved-results.md. One entry per
field of each record in phasebench/schema.py, under the record that defines it (a record's inherited fields are its
base's); tests/test_reference_pages.py checks that the two hold the same keys, both ways.

Each entry is (unit, meaning). Units: s (seconds), ns (nanoseconds), bytes, cores (CPU time over wall time), count
(a whole number of things), a list or object of those where the value is one, "text" for words, "flag" for a boolean.
"""

from __future__ import annotations

from phasebench import schema
from phasebench.distributed_records import DataParallel, DistRunParts
from phasebench.record import Case, Utilization

FIELDS: dict[type, dict[str, tuple[str, str]]] = {
    Utilization: {
        "gpu": ("object", "the GPU's use while the rounds ran, sampled through NVML: `source`, `interval_s`, "
                "`samples`, `gaps` (each sampling error with its `at_s`) and, for `utilization_pct`, "
                "`memory_utilization_pct`, `memory_used_mib`, `power_w`, `sm_clock_mhz` and `temperature_c`, each its "
                "`mean`, `median` "
                "and `max`; null on cpu, without NVML, or with `--no-utilization`"),
        "cpu": ("object", "the case's worker processes' CPU across the rounds: `cores` (their CPU time over the wall "
                "time), `cpu_s`, `user_s`, `system_s`, `cores_available`, `wall_s`, `machine_other_cores` (what the "
                "rest of the machine used meanwhile, in cores; null for a short window), and with several processes "
                "each one's figures in `processes`; null where no worker is the case's own, or with "
                "`--no-utilization`"),
    },
    Case: {
        "implementation": ("text", "the registered implementation that ran (`python`, `cpp`, a variant: "
                           "docs/implementations.md)"),
        "device": ("text", "`cpu` or `cuda`"),
        "phase": ("text", "what was timed: a training phase, `training_run`, `concurrent_jobs-N`, `ensemble-M`, "
                  "`loss_item`, `worker_overhead` or `torchrun`; with `world_size` and `metric` it decides the "
                  "record's kind"),
        "width": ("count", "the workload's multiplier of the Net's hidden sizes (`--width`)"),
        "batch_size": ("count", "the workload's images per batch (`--batch-size`)"),
        "workload": ("text", "the workload's id suffix: empty for the published workload, else e.g. `w4-b256`"),
        "rounds": ("count", "the counted rounds (`--rounds`; a training run's: `--run-rounds`)"),
        "warmup_rounds": ("count", "the uncounted rounds before them (`--warmup-rounds`; 0 for a training run)"),
    },
    schema.WorkerOverheadInfo: {
        "in_worker_noop_median_ns": ("ns", "the median time of an empty phase, timed inside the worker"),
        "round_trip_median_ns": ("ns", "the median time of the same request seen from pytest: sent, run, answered"),
    },
    schema.LossItemInfo: {
        "threads": ("count", "the worker's intra-op threads"),
        "timer_floor_s": ("s", "the worker's timer floor: what its clock reads around an empty phase"),
        "phase_thread_cpu_cores": ("cores", "CPU time of the thread that ran the timed bodies over their wall time; "
                                   "null where the bodies are too short to tell"),
        "phase_cpu_cores": ("cores", "CPU time of the whole worker process (every intra-op thread) over the timed "
                            "bodies' wall time; null where the bodies are too short to tell"),
    },
    schema.PhaseInfo: {
        "language": ("text", "`python` or `cpp`: the language of the implementation's training code"),
        "reference": ("text", "the implementation it is compared with (`cpp` for `python`)"),
        "note": ("text", "the registry's note on the implementation for this device, or null"),
        "threads": ("count", "the workers' intra-op threads (`--threads`, or the number torch picked)"),
        "processes": ("count", "fresh worker processes that shared the rounds (`--processes`)"),
        "order": ("count", "its place in its phase's run order, 0 first, drawn from machine_info's `order_seed`"),
        "timer_floor_s": ("s", "the median of the workers' timer floors: what the clock reads around an empty phase"),
        "timer_floors_s": ("list of s", "each worker's timer floor"),
        "phase_thread_cpu_cores": ("cores", "CPU time of the thread that ran the timed bodies over their wall time; "
                                   "null where the bodies are too short to tell"),
        "phase_cpu_cores": ("cores", "CPU time of the whole worker process over the timed bodies' wall time; null "
                            "where the bodies are too short to tell"),
        "minor_faults_per_round": ("count", "the worker's minor page faults across one timed body, median of the "
                                   "counted rounds (docs/page-faults.md)"),
        "major_faults_per_round": ("count", "the same for major page faults (pages read from disk)"),
        "host_cpu_s": ("list of s", "cuda only: each counted round's host CPU time, the CPU time of the thread that "
                       "ran the body up to its end, read before the closing synchronize (docs/method.md#what-is-measured)"),
        "host_cpu_median_s": ("s", "cuda only: their median; near the wall time, the phase is host-bound"),
        "gpu_s": ("list of s", "cuda only: each counted round's GPU time, between CUDA events recorded just before and "
                  "just after the body on the current stream"),
        "gpu_median_s": ("s", "cuda only: their median: the stream's span across the body, the device's idle time "
                         "between launches included (docs/gpu.md#host-cpu-and-gpu-time)"),
        "rounds_window_s": ("s", "wall time of the window around the counted rounds, read outside the clocks: the "
                            "rounds, their untimed preparation and their requests; null under `--count`"),
        "worker_threads": ("list of objects", "each worker thread across the window: `pid`, `tid`, `name`, `cpu_s` "
                           "(its own CPU seconds), `voluntary_ctxt_switches`, `nonvoluntary_ctxt_switches`, "
                           "`cpu_migrations` (count or null), `started` and `ended` (flags: it began or ended inside "
                           "the window)"),
        "steal_s": ("s", "the machine's steal time across the window, all CPUs summed: time the hypervisor gave "
                    "these CPUs to others"),
        "cpu_migrations": ("count", "the worker threads' moves between CPUs across the window, summed; null where "
                           "they could not be read"),
        "cpu_migrations_source": ("text", "where `cpu_migrations` comes from: `sched` (the kernel's per-thread "
                                  "counter) or `perf` (a software perf counter per thread)"),
        "cpu_migrations_unavailable": ("text", "why `cpu_migrations` is null"),
        "hardware_counters": ("text", "`absent` (the machine exposes no CPU performance counters) or `present` "
                              "(present, not counted)"),
        "hardware_counters_reason": ("text", "what the kernel lists of its event sources, the ground for "
                                     "`hardware_counters`"),
        "gc_collections": ("count", "Python's garbage collections in the workers during the counted rounds' "
                           "requests, their untimed preparation included: an upper bound on those inside the clock"),
        "gc_collections_by_generation": ("list of count", "the same for generations 0, 1 and 2"),
        "canary_start_s": ("s", "a fixed pure-Python loop's time in the worker just before the window (best of 3): "
                           "the machine's speed when the rounds began"),
        "canary_end_s": ("s", "the same just after the window: whether the machine's speed moved"),
        "round_checks": ("text", "what the worker did of the per-round checks (`--round-checks`): `on` or `off`; "
                         "null is on"),
    },
    schema.CountedPhaseInfo: {
        "metric": ("text", "`instructions`"),
        "unit": ("text", "`instructions`"),
        "instructions": ("list of count", "each counted round's instructions"),
        "instructions_median": ("count", "their median"),
        "count_floor": ("count", "the empty bracket's count, the median of the workers'"),
        "count_floors": ("list of count", "each worker's empty-bracket count"),
        "count_labels": ("list of text", "each counted round's label in callgrind's dumps"),
        "split": ("object of count", "where the median round's instructions went: interpreter, bindings, "
                  "dispatcher and autograd, kernels, C library and allocator, MKL, oneDNN and JIT code, …"),
        "top_functions": ("list", "the last round's functions with the most instructions of their own: [object "
                          "file, function, count]"),
        "cpu_capability": ("text", "the CPU capability ATen dispatched to under the count mode's pins"),
        "count_events": ("object of lists of count", "with caches or branches simulated: each event callgrind "
                         "names (Ir, Dr, Dw, I1mr, D1mr, D1mw, ILmr, DLmr, DLmw, Bc, Bcm, Bi, Bim) with each counted "
                         "round's total, a model's events, not the machine's; absent where nothing was simulated"),
    },
    schema.TrainingRunInfo: {
        "language": ("text", "`python` or `cpp`"),
        "reference": ("text", "the implementation it is compared with"),
        "threads": ("count", "the workers' intra-op threads"),
        "epochs": ("count", "epochs trained each round (`--epochs`)"),
        "steps": ("count", "training steps each round"),
        "summed_s": ("list of s", "each round's Summed Time: the phase timers added up"),
        "summed_median_s": ("s", "their median"),
        "program_s": ("list of s", "each round's Total Time, inside the worker: set-up and loop; the benchmark's "
                      "statistics are of these"),
        "process_total_s": ("list of s", "each round's worker process from spawn to exit, seen from pytest"),
        "program_median_s": ("s", "the median Total Time (set-up and loop)"),
        "setup_median_s": ("s", "the median set-up inside the worker: on cuda CUDA's initialization, then its "
                           "trainer built (model, optimizer, data), its imports done before"),
        "startup_median_s": ("s", "the median start-up, seen from pytest: spawn until the worker is ready to "
                             "train, its set-up included"),
        "loop_median_s": ("s", "the median training loop, inside the worker"),
        "stopping_median_s": ("s", "the median stop, seen from pytest: asked to stop until the process exited"),
        "total_median_s": ("s", "the median of `process_total_s`"),
        "phase_total_s": ("object of s", "each timed phase's total over a round, the median of the rounds"),
        "phase_cpu_cores": ("cores", "the worker process's CPU time over the timed phases' summed wall time"),
        "free_running": ("object", "with `--free-running`: the run without phase timers: `total_s`, `loop_s`, "
                         "`process_total_s`, `one_shot` and `one_shot_s` (a phase run once, e.g. a compile), and its "
                         "own `gpu` and `cpu`; null without it"),
        "peak_rss_bytes": ("list of bytes", "the worker's peak resident memory, per round, then the free-running "
                           "run's"),
        "peak_rss_median_bytes": ("bytes", "their median"),
        "peak_device_bytes": ("list of bytes", "on cuda, the peak allocated device memory, per round then the "
                              "free-running run's; not measured on cpu"),
        "peak_device_median_bytes": ("bytes", "their median; null on cpu"),
        "minor_faults": ("list of count", "the worker's minor page faults across each round's training, then the "
                         "free-running run's"),
        "major_faults": ("list of count", "the same for major page faults"),
        "minor_faults_per_step_median": ("count", "minor page faults per training step, median of the rounds"),
        "free_running_minor_faults_per_step": ("count", "the same in the free-running run; null without it"),
        "startup_parts_s": ("list of object of s", "each round's worker start-up in parts, as the worker reports it: "
                            "`imports` (the process's creation to its libraries loaded), `cuda_init` (cuda only), "
                            "`trainer` (its construction), `timer_floor`, `pci_bus_id` (cuda only); "
                            "docs/method.md#a-workers-start-up-in-parts"),
        "startup_parts_median_s": ("object of s", "each part's median over the rounds"),
    },
    schema.ConcurrentJobsInfo: {
        "language": ("text", "`python` or `cpp`"),
        "reference": ("text", "the implementation it is compared with"),
        "note": ("text", "the registry's note for this device, or null"),
        "jobs": ("count", "jobs released together on the device (`--jobs`)"),
        "threads": ("count", "the run's intra-op threads (`--threads`, or torch's pick)"),
        "threads_per_job": ("count", "each job's intra-op threads: on cpu the run's split between the jobs"),
        "threads_split": ("text", "how the threads were shared, in words"),
        "trained": ("text", "what each job trained: its epochs, or under `--benchmark-disable` a few steps"),
        "steps_per_job": ("count", "training steps each job took"),
        "images": ("count", "images trained by all jobs together"),
        "makespan_s": ("s", "from the release to the last job's end; the benchmark's value"),
        "images_per_s": ("images/s", "`images` over `makespan_s`: the device's throughput"),
        "job_loop_s": ("list of s", "each job's training loop, timed inside its worker"),
        "job_start_lag_s": ("list of s", "each job's start after the release"),
        "job_cpu_cores": ("list of cores", "each job's process CPU time over its request's wall time"),
        "job_minor_faults": ("list of count", "each job's minor page faults across its request"),
        "job_major_faults": ("list of count", "each job's major page faults across its request"),
        "job_minor_faults_per_step": ("list of count", "each job's minor page faults per step"),
        "single_job_loop_s": ("s", "the loop of the one-job case of the same implementation, device and workload "
                              "in the same session; the slowdown's basis"),
        "slowdown": ("list of ratios", "each job's loop over `single_job_loop_s`"),
        "slowdown_unavailable": ("text", "why there is no slowdown (no one-job case ran before it)"),
        "mps": ("object", "whether NVIDIA MPS would serve the jobs on cuda: its control pipe, processes and the "
                "GPU's compute mode, found by looking only"),
    },
    schema.EnsembleInfo: {
        "language": ("text", "`python` or `cpp`"),
        "reference": ("text", "the implementation it is compared with"),
        "note": ("text", "the registry's note for this device, or null"),
        "models": ("count", "models trained together (`--models`)"),
        "ensemble": ("text", "how the implementation trains them together (its registry entry)"),
        "seeds": ("text", "the members' seeds, `1..M`"),
        "threads": ("count", "the worker's intra-op threads"),
        "timer_floor_s": ("s", "the worker's timer floor"),
        "clock": ("text", "what the clock holds: one step of every member, the batch loaded and copied before it"),
        "step_median_s": ("s", "the median step of all members"),
        "model_step_median_s": ("s", "`step_median_s` over `models`: one member's share"),
        "phase_thread_cpu_cores": ("cores", "CPU of the thread that ran the steps over their wall time"),
        "phase_cpu_cores": ("cores", "CPU of the worker process over the steps' wall time"),
    },
    DataParallel: {
        "language": ("text", "`python` or `cpp`"),
        "reference": ("text", "the implementation it is compared with"),
        "world_size": ("count", "ranks in the process group (`--world-size`)"),
        "sync": ("text", "how the gradients are synchronized (the registry's `sync`: docs/distributed.md)"),
        "threads": ("count", "the run's intra-op threads"),
        "threads_per_rank": ("count", "each rank's intra-op threads: on cpu the run's split between the ranks"),
        "threads_split": ("text", "how the threads were shared, in words"),
    },
    schema.DistPhaseInfo: {
        "note": ("text", "the registry's note for this device, or null"),
        "sync_how": ("text", "the synchronization in words"),
        "backend": ("text", "the process group's backend: `gloo` on cpu, `nccl` on cuda"),
        "clock": ("text", "what the clock holds: every rank leaves an untimed barrier just before its clock starts"),
        "dist_timeout_s": ("s", "the process group's timeout (`--dist-timeout`)"),
        "rank_median_s": ("list of s", "each rank's median phase time"),
        "rank_cpu_cores": ("list of cores", "each rank's CPU time over its timed wall time"),
        "slowest_rank_rounds": ("list of count", "how many rounds each rank was the slowest; a round's value is "
                                "the slowest rank's"),
    },
    DistRunParts: {
        "epochs": ("count", "epochs trained each round (`--epochs`)"),
        "steps": ("count", "global steps each round"),
        "images": ("count", "images trained each round, all ranks together"),
        "total_median_s": ("s", "the median of the slowest rank's Total Time: set-up, joining the group and loop"),
        "summed_median_s": ("s", "the median of the slowest rank's summed step times"),
        "loop_median_s": ("s", "the median of the slowest rank's training loop"),
        "ranks": ("list of objects", "each rank's figures: `rank`, `total_s`, `join_s` and, as each kind has them, "
                  "`summed_s`, `setup_s`, `steps`, `step_p50_s`, `step_p95_s`, or torchrun's `group_rank`, "
                  "`local_rank`, `master`, `agent_store`, `threads`"),
        "step_p50_s": ("s", "the median step, each step the slowest rank's"),
        "step_p95_s": ("s", "the 95th percentile step, each step the slowest rank's"),
        "images_per_s": ("images/s", "`images` over the median loop"),
        "single_rank_images_per_s": ("images/s", "the world-size-1 case's rate in the same session; null where it "
                                     "did not run first"),
        "scaling_efficiency": ("ratio", "`images_per_s` over `world_size` × `single_rank_images_per_s`; 1 is "
                               "perfect scaling"),
    },
    schema.DistTrainingRunInfo: {
        "trained": ("text", "what each round trained, in words"),
        "total_s": ("list of s", "each round's slowest rank's Total Time"),
        "scaling_unavailable": ("text", "why `scaling_efficiency` is null"),
    },
    schema.TorchrunInfo: {
        "nodes": ("count", "torchrun agents (`--nnodes`): 2"),
        "nproc_per_node": ("count", "ranks per agent"),
        "network": ("text", "how the agents reached each other: network namespaces where the machine allows"),
        "namespaces": ("flag", "whether the agents ran in network namespaces of their own"),
        "rendezvous": ("text", "the c10d rendezvous the agents used: its address, port and id"),
        "command": ("text", "the torchrun command line"),
    },
    schema.MachineInfo: {
        "method": ("count", "the measurement method's version (phasebench/method.py); results of different "
                   "methods are never compared"),
        "method_sources": ("text", "a hash of the sources that define the clocks, as they ran"),
        "metric": ("text", "`time`, or `instructions` under `--count instructions`"),
        "unit": ("text", "the metric's unit under `--count`"),
        "count": ("object", "under `--count`: the bracket, Valgrind's and glibc's versions, Valgrind's options, the "
                  "pins, `aslr_off`, the pinned `cpu_capability`, what could not be pinned, and with simulations "
                  "`caches` ({I1, D1, LL: [size bytes, ways, line bytes]}) and `branch_sim`"),
        "torch": ("text", "torch's version"),
        "torchvision": ("text", "torchvision's version"),
        "cuda": ("text", "the CUDA version torch was built with; null for a CPU build"),
        "cudnn": ("number", "cuDNN's version as torch reports it; null for a collection or without cuDNN"),
        "gpu": ("object", "the GPU's `name` and `driver`; null where cuda cannot run"),
        "gpu_unavailable": ("text", "why cuda cases cannot run (a CPU build, no GPU NVML lists, torch cannot use "
                            "one); null where they can"),
        "gpu_sampling": ("text", "why no GPU was sampled; null while sampling works"),
        "cpu": ("text", "the CPU model"),
        "threads": ("count", "the workers' intra-op threads"),
        "implementations": ("list of text", "the implementations the run selected (`--impl`)"),
        "workloads": ("list of objects", "the workloads the run selected: each its `width`, `batch_size` and "
                      "`workload` id"),
        "dataset": ("text", "the data source used: `mnist`, `fashion-mnist` or `synthetic`"),
        "dataset_path": ("text", "the folder of IDX files both trainers read"),
        "dataset_origin": ("text", "where the data came from, and for synthetic data why no real data was found"),
        "rounds": ("count", "counted rounds per phase benchmark (`--rounds`)"),
        "warmup_rounds": ("count", "warm-up rounds per phase benchmark (`--warmup-rounds`)"),
        "processes": ("count", "worker processes per phase case (`--processes`)"),
        "order_seed": ("count", "the seed of each phase's run order (`--order-seed` runs the cases in it again)"),
        "testing": ("object", "the test knobs a testing run used; null in a real run"),
        "round_checks": ("text", "`on` or `off` (`--round-checks`); null is on"),
        "omp_wait_policy": ("text", "the timed workers' OMP_WAIT_POLICY, lower case; `default` where none is set"),
        "cublas_workspace_config": ("text", "CUBLAS_WORKSPACE_CONFIG as the run (and its workers) had it; null where "
                                    "unset"),
        "pytorch_cuda_alloc_conf": ("text", "PYTORCH_CUDA_ALLOC_CONF as the run (and its workers) had it; null where "
                                    "unset"),
        "pins": ("object", "with `--pins count`: what the timed workers ran under (`conditions`, `env`, `aslr_off`, "
                 "`threads`, `gc`, `type_cache`, `cpu_capability`) and what of the count mode they could not have "
                 "(`not_applied`); null without it"),
    },
}

# Keys the current method no longer writes (schema.RETIRED), with what they held.
RETIRED = {
    "setup_holds": "a sentence saying what the training run's set-up held; the method says it now",
    "test_slow_phase": "the phase a testing run slowed; now in `testing`",
}

# What the plugin adds to pytest-benchmark's commit_info (phasebench/provenance.py commit_info).
COMMIT_INFO = {
    "dirty": ("flag", "whether `git status` lists anything, untracked files included; null without git"),
    "porcelain": ("list of text", "`git status --porcelain`'s lines, the first 50"),
    "sources_hash": ("text", "a hash of the sources that ran (phasebench/, bench/, cpp/, the pytest files)"),
    "commit_source": ("text", "present where the commit came from PHASEBENCH_COMMIT: a copy without git history"),
}
