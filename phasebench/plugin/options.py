"""phasebench's command-line options (docs/options.md#options); the gate's and the count mode's own are declared in
phasebench/plugin/gating.py and counting.py."""

from __future__ import annotations

from phasebench import data, registry
from phasebench.plugin.cases import SELECTIONS
from phasebench.plugin.session import DEFAULT_DATA


def pytest_addoption(parser):
    group = parser.getgroup("phasebench", "phasebench: Python vs C++ training phases")
    group.addoption("--impl", default=None,
                    help=f"implementations to run, comma-separated, or all: {', '.join(registry.NAMES)} "
                         f"(default: {','.join(registry.DEFAULT_IMPLS)}, the published pair)")
    group.addoption("--width", default="1",
                    help="workload: the Net's hidden sizes multiplied by W, comma-separated (default: 1, as published)")
    group.addoption("--batch-size", default="64",
                    help="workload: batch sizes, comma-separated (default: 64, as published); every width runs "
                         "every batch size")
    group.addoption("--device", default=None,
                    help="devices to run, comma-separated: cpu,cuda (default: both; cuda skips without a GPU; a device "
                         "left out is deselected, and naming only devices that cannot run here is a usage error)")
    group.addoption("--threads", type=int, default=0,
                    help="intra-op threads for both workers (default: what torch picks on this machine)")
    group.addoption("--mnist-root", default=None, help=f"data folder (default: {DEFAULT_DATA})")
    group.addoption("--dataset", default="auto",
                    help=f"data source: {', '.join(data.DATASET_CHOICES)} (default: auto; docs/data.md#data)")
    group.addoption("--rounds", type=int, default=100, help="counted rounds per phase benchmark (default: 100)")
    group.addoption("--warmup-rounds", type=int, default=10,
                    help="uncounted rounds before them (default: 10)")
    group.addoption("--processes", type=int, default=1,
                    help="fresh worker processes per phase case, each timing its share of the rounds after its own "
                         "warm-up, as pyperf does (default: 1, the long-lived worker of each implementation and device)")
    group.addoption("--order-seed", type=int, default=None,
                    help="the seed of each phase's run order, the random order its implementations run in on each "
                         "device and workload (default: one drawn for the run; machine_info order_seed records it, "
                         "and the header prints it, so that --order-seed N runs the cases in that order again)")
    group.addoption("--round-timeout", type=float, default=300.0,
                    help="seconds a worker may take to answer one request before it is killed (default: 300)")
    group.addoption("--epochs", type=int, default=1,
                    help="epochs of each training_run (default: 1; 10 is the published run)")
    group.addoption("--run-rounds", type=int, default=1,
                    help="rounds of each training_run, each a fresh worker process (default: 1; the published figures "
                         "take 3)")
    group.addoption("--free-running", action="store_true",
                    help="also train each training_run once with no phase timers (the loop alone)")
    group.addoption("--jobs", default=None,
                    help="run test_concurrent_jobs: how many jobs share the device, comma-separated (--extra jobs: 1,2 "
                         "on cpu, the intra-op threads split between them; 1,2,4 on cuda)")
    group.addoption("--models", default=None,
                    help="run test_ensemble: how many models train together, comma-separated (--extra ensembles: "
                         "1,4,16)")
    group.addoption("--extra", default=None,
                    help=f"benchmarks the default run leaves out, comma-separated, or all: {', '.join(SELECTIONS)} "
                         f"(docs/options.md#what-the-default-run-leaves-out); the test command (--benchmark-disable) "
                         f"checks them all")
    group.addoption("--world-size", default=None,
                    help="data parallel: world sizes, comma-separated (e.g. 1,2); without it no distributed case "
                         "exists (docs/distributed.md). On cpu the ranks split the intra-op threads; on cuda one GPU "
                         "a rank")
    group.addoption("--dist-timeout", type=float, default=60.0,
                    help="data parallel: the process group's timeout in seconds: a rank that dies or hangs makes "
                         "its peers fail within it (default: 60)")
    group.addoption("--no-utilization", action="store_true",
                    help="do not sample GPU and worker CPU utilization (extra_info gpu and cpu are null)")


