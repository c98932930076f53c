"""The measurement method that made a saved result, beside its format (phasebench/schema.py). Results measured by
different methods are never compared (phasebench/results.py's mismatch). Raise METHOD_VERSION whenever what a clock holds changes, and say what the new version means here:

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
4. The training run's set-up (Total Time's first part) no longer holds torchvision's import in Python: the
   worker loads its libraries before the clock in both languages, so set-up is opening both splits and building
   the model and optimizer alike. Saved results record the hash of the sources that define the clocks.
5. On cuda each clock also holds a CUDA event recorded on each side of the body and a read of the thread's CPU time
   before the closing synchronize, in both languages: a phase records its host CPU and GPU times beside its wall
   time (docs/method.md#what-is-measured). The clocks on cpu are those of method 4.
6. A phase whose call is shorter than a round's target is timed several calls a round (pytest-benchmark's
   iterations), calibrated from its warm-up calls or taken from the compared baseline, and recorded
   (docs/method.md#calls-per-round): such a phase's median is a median of per-round means. The clocks are those of
   method 5.
7. A phase's implementations are measured side by side in time, in alternating blocks of rounds, and a training
   run's rounds alternate fresh workers (docs/method.md#paired-in-time); a phase's calls per round follow one rule,
   the faster side's median warm-up call, whatever the draw; every ratio is saved with its 95 % interval. The clocks
   are those of method 6.
8. A paired phase's sweeps of blocks rotate through several long-lived workers a side (--pair-workers, 6), and its
   ratio's draws are those pairs of workers, each the median of its blocks' ratios: the interval holds the spread
   between worker processes (docs/method.md#every-ratio-with-its-interval). The clocks are those of method 7.
9. A paired phase's block runs its calls back to back in one request to its worker, as a program's loop runs them,
   with no round trip between calls (docs/method.md#paired-in-time), and its calls per round are bounded by what the
   costlier side's calls cost, preparation included (docs/method.md#calls-per-round); its machine fitness reads the
   run-queue wait in the worker across each block, not the wait to be woken for a request. A training run's ratios are the geometric
   mean of its pairs of rounds with a t interval, four pairs by default (docs/method.md#every-ratio-with-its-interval).
   The clocks are those of method 8.

METHOD_SOURCES are those sources; METHOD_SOURCES_HASH is their hash when METHOD_VERSION was last set, and
tests/test_method.py fails when they change without it being recorded again (`python -m phasebench.method
--hash` prints the current one). Every saved result records the method and the hash of the sources
that ran (machine_info["phasebench"]["method"], ["method_sources"]).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from phasebench.repository import ROOT

METHOD_VERSION = 9
METHOD_SOURCES = (
    "phasebench/train/timing.py",  # the clock around a body, its synchronization, its CPU and fault reads
    "phasebench/train/phases.py",  # what each phase prepares (untimed) and times
    "phasebench/train/run.py",  # the training run's loop, each phase timed in place
    "phasebench/train/trainer.py",  # the trainer's set-up: what Total Time's set-up holds
    "phasebench/worker/server.py",  # the worker: what it loads before any clock
    "phasebench/worker/startup.py",  # the set-up's clock: CUDA's initialization and the trainer's construction
    "phasebench/plugin/calibration.py",  # how many calls a round a short phase is timed as
    "phasebench/plugin/pairing.py",  # which sides are measured together, and in what sequence of blocks
    "cpp/src/clock.cpp",
    "cpp/src/phases.cpp",
    "cpp/src/run.cpp",
    "cpp/src/trainer.cpp",
    "cpp/src/model.h",  # the Net, and the update the param_update clock holds
    "cpp/src/model.cpp",  # the model and optimizer built in set-up and in optimizer_init
    "cpp/src/step.h",  # the step's pieces the forward, loss and backward clocks hold
)
METHOD_SOURCES_HASH = "63ff9aeeb0274f13"


def method_sources_hash(root: Path = ROOT) -> str:
    """The sha256 (first 16 hex digits) of METHOD_SOURCES, each named and with its line endings made LF."""
    digest = hashlib.sha256()
    for name in METHOD_SOURCES:
        try:
            text = (Path(root) / name).read_bytes().replace(b"\r\n", b"\n")
        except OSError:
            text = b"(missing)"
        digest.update(name.encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:16]


def main(argv: list[str]) -> int:
    if argv == ["--hash"]:
        print(method_sources_hash())
        return 0
    print("usage: python -m phasebench.method --hash  (the hash of METHOD_SOURCES now)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
