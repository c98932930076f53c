"""The suite's trainers held to plain programs of their language (docs/page-faults.md).

    python -m phasebench.plain [--pairs 3] [--epochs 1] [--threads 0] [--out FILE]

Each pair runs, on the same data and epoch, a plain program (cpp/plain/mnist_plain.cpp, phasebench/plain/mnist_plain.py:
the training loop as a user writes it, nothing of the suite around it) and the suite's free-running training
run of the same language in one of its own workers (the `train` request with synchronize off, as
test_training_run's free-running run). Pairs are interleaved, and the order within a pair alternates, so that a
drift of the machine's load falls on both sides. Each side reports its loop's time and the page faults across
it (getrusage, the process's own). The figure that matters is the ratio within each pair: the suite's loop over
the plain program's, and its median over the pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from phasebench import data, registry
from phasebench.repository import ROOT
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.worker import build
from phasebench.worker.client import Worker
from phasebench.worker.protocol import Train

# language: the suite's published implementation of it (the registry's published pair)
LANGUAGES = {registry.get(name).language: name for name in registry.DEFAULT_IMPLS}
ROUND_TIMEOUT_S = 1800.0


def plain_run(language: str, source: data.DataSource, epochs: int, threads: int, log: str, max_steps: int = 0) -> dict:
    """One run of the plain program of `language`: its figures (steps, loop_ns, minor_faults, major_faults)."""
    common = ["--epochs", str(epochs), "--threads", str(threads), "--log", log, "--max-steps", str(max_steps)]
    if language == "cpp":
        command = [str(build.plain_program_path()), source.raw_dir] + common
    else:
        command = [sys.executable, str(Path(__file__).with_name("mnist_plain.py")), source.root] + common
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def suite_run(language: str, source: data.DataSource, epochs: int, threads: int, log: str) -> dict:
    """The suite's free-running training run of `language`'s published implementation, in a fresh worker."""
    impl = LANGUAGES[language]
    options = {"root": source.root, "device": "cpu", "threads": threads, "seed": 1, "log_path": log}
    options |= registry.get(impl).trainer_options() | DEFAULT_WORKLOAD.as_options()
    library = str(build.library_path()) if language == "cpp" else None
    worker = Worker(impl, "cpu", options, ROUND_TIMEOUT_S, library)
    try:
        reply = worker.request(Train(epochs, synchronize=False))
    finally:
        worker.stop()
    return {"language": language, "steps": reply.steps, "loop_ns": reply.loop_ns,
            "minor_faults": reply.minor_faults, "major_faults": reply.major_faults}


def tree_state() -> dict:
    """The commit measured and whether the tree had changes (a figure is published only from a clean one)."""
    def git(*args):
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT)
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


def versions() -> dict:
    """Python's, and torch's and torchvision's as installed (read without importing them)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": sys.version.split()[0]}
    for package in ("torch", "torchvision"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def summary(pairs: list[dict]) -> dict:
    """Per language: each pair's suite/plain loop ratio, their median, and faults per step on each side."""
    out = {}
    for language in LANGUAGES:
        mine = [pair for pair in pairs if pair["language"] == language]
        if not mine:
            continue
        ratios = [pair["suite"]["loop_ns"] / pair["plain"]["loop_ns"] for pair in mine]
        out[language] = {
            "ratios": [round(r, 3) for r in ratios], "median_ratio": round(statistics.median(ratios), 3),
            **{f"{side}_loop_s": [round(pair[side]["loop_ns"] / 1e9, 3) for pair in mine] for side in ("plain", "suite")},
            **{f"{side}_minor_faults_per_step": [round(pair[side]["minor_faults"] / pair[side]["steps"], 2)
                                                 for pair in mine] for side in ("plain", "suite")},
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (default: what torch picks)")
    parser.add_argument("--languages", default="cpp,python")
    parser.add_argument("--dataset", default="auto", choices=data.DATASET_CHOICES)
    parser.add_argument("--mnist-root", default=str(ROOT / "data"))
    parser.add_argument("--out", help="write every run and the summary here as JSON")
    args = parser.parse_args(argv)
    languages = [language for language in args.languages.split(",") if language]
    unknown = set(languages) - set(LANGUAGES)
    if unknown:
        parser.error(f"unknown languages {sorted(unknown)}: {', '.join(LANGUAGES)}")
    source = data.resolve(args.dataset, args.mnist_root)
    if "cpp" in languages:  # built before the first pair, so that no build falls inside one
        build.plain_program_path(quiet=False)
        build.library_path(quiet=False)
    pairs = []
    with tempfile.TemporaryDirectory(prefix="phasebench-plain-") as logs:
        for index in range(args.pairs):
            for language in languages:
                sides = ("plain", "suite") if index % 2 == 0 else ("suite", "plain")
                pair = {"language": language, "pair": index + 1, "order": list(sides)}
                for side in sides:
                    run = plain_run if side == "plain" else suite_run
                    pair[side] = run(language, source, args.epochs, args.threads, os.path.join(logs, f"{side}.log"))
                ratio = pair["suite"]["loop_ns"] / pair["plain"]["loop_ns"]
                print(f"pair {index + 1} {language:6s}: plain {pair['plain']['loop_ns'] / 1e9:6.2f} s "
                      f"({pair['plain']['minor_faults']:>8} faults), suite {pair['suite']['loop_ns'] / 1e9:6.2f} s "
                      f"({pair['suite']['minor_faults']:>8} faults), suite/plain {ratio:.3f}", flush=True)
                pairs.append(pair)
    result = {"tree": tree_state(), "versions": versions(), "dataset": source.name, "epochs": args.epochs,
              "threads": args.threads, "pairs": pairs, "summary": summary(pairs)}
    for language, figures in result["summary"].items():
        print(f"{language}: suite/plain median {figures['median_ratio']:.3f} (pairs {figures['ratios']})")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
