"""grad_sync at world size 2, python-allreduce against cpp-allreduce: the paired ratio with its 95 % interval over
interleaved runs (docs/distributed.md#grad_sync-python-against-c).

    .venv/bin/python lab/studies/distributed/paired_grad_sync.py [--runs 6] [--rounds 100] [--out results/distributed/paired]

Each run is one pytest session of the two grad_sync cases (`-k "test_dist_phase and grad_sync" --world-size 2`),
with which implementation goes first alternating from run to run (--impl's order), each case's worlds fresh. A run's
ratio is python-allreduce's grad_sync over cpp-allreduce's (each the slowest rank's median inside its worker), both
from the same session; the interval is Student's t on
the runs' log-ratios (phasebench.stats.paired_change, the gate's own). Target: within 1.1x; "not resolved" when
the interval spans 1.1. Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # this checkout's phasebench, not an installed one

from phasebench.report.distributed import phase_s  # noqa: E402
from phasebench.saved import SavedResult  # noqa: E402
from phasebench.stats import paired_change  # noqa: E402

IMPLS = ("python-allreduce", "cpp-allreduce")
TARGET = 1.1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("results/distributed/paired"))
    parser.add_argument("--reuse", action="store_true", help="read the runs already saved in --out; run only those missing")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    medians = {impl: [] for impl in IMPLS}
    for run in range(args.runs):
        order = IMPLS if run % 2 == 0 else IMPLS[::-1]
        path = args.out / f"run{run}.json"
        command = [sys.executable, "-m", "pytest", "bench/test_distributed.py", "-k", "test_dist_phase and grad_sync",
                   "--world-size", "2", "--device", "cpu", "--impl", ",".join(order), "--benchmark-only",
                   "--rounds", str(args.rounds), "-q", "-p", "no:cacheprovider", f"--benchmark-json={path}"]
        done = None if args.reuse and path.exists() else subprocess.run(command, capture_output=True, text=True)
        if done is not None and done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
            return done.returncode
        # The slowest rank's median inside its worker (phasebench.report.distributed.phase_s).
        found = {key.implementation: phase_s(case) for key, case in SavedResult.load(path).distributed_cases.items()
                 if key.phase == "grad_sync"}
        for impl in IMPLS:
            medians[impl].append(found[impl])
        print(f"run {run} ({' first, '.join(order)} second): python-allreduce {found[IMPLS[0]] * 1e3:.3f} ms, "
              f"cpp-allreduce {found[IMPLS[1]] * 1e3:.3f} ms, ratio {found[IMPLS[0]] / found[IMPLS[1]]:.3f}")
    change = paired_change(medians["cpp-allreduce"], medians["python-allreduce"])
    ratio, low, high = 1 + change.estimate, 1 + change.low, 1 + change.high
    verdict = ("within 1.1x" if high <= TARGET else "not resolved: the interval spans 1.1" if low <= TARGET
               else "above 1.1x")
    summary = {"runs": args.runs, "rounds": args.rounds, "python_allreduce_median_s": medians["python-allreduce"],
               "cpp_allreduce_median_s": medians["cpp-allreduce"], "ratio": ratio, "ci95": [low, high],
               "p_value": change.p_value, "target": TARGET, "verdict": verdict}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"grad_sync at world size 2, python-allreduce / cpp-allreduce over {args.runs} interleaved runs: "
          f"{ratio:.3f}x, 95 % interval {low:.3f} … {high:.3f}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
