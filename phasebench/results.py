"""The measurement method's version, recorded in every saved result (machine_info["phasebench"]["method"]).

Results measured by different methods are not compared: `--benchmark-compare`, `python -m phasebench.gate`
and the ratio gate refuse them in one line. Raise the version whenever what a clock holds changes.

1. (no "method" recorded) Phases timed with what earlier rounds left freed inside the clock; training
   run Total Time from spawning the worker to its exit.
2. Each phase's preparation releases what earlier rounds left; the lean timer (nothing but the body
   between the clock reads on cpu, the cheapest synchronization on cuda) with its floor recorded;
   dropout masks drawn alike in both languages; training run Total Time is the program's own time in
   the worker, from before its dataset is opened to its last step.
3. Each trainer opens the test split at creation, as the published programs do: the worker's heap is no
   longer returned to the kernel after every step and faulted back in inside the clocks (docs/page-faults.md);
   python-tensor normalizes per index as LibTorch does (no torchvision argument checks); the page faults
   across every round and run are recorded.
"""

METHOD_VERSION = 3


def method_of(result: dict) -> int:
    """The method a saved pytest-benchmark result was measured by (1 where none is recorded)."""
    return ((result.get("machine_info") or {}).get("phasebench") or {}).get("method") or 1


def mismatch(baseline_path, baseline: dict, current_method: int) -> str | None:
    """One line when a baseline was measured by another method than `current_method`, else None."""
    method = method_of(baseline)
    if method == current_method:
        return None
    return (f"{baseline_path} was measured by phasebench method {method}, this run by method {current_method} "
            f"(see bench/results.py): their timings are not comparable; measure a new baseline")
