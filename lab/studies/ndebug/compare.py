"""What -DNDEBUG changes in the C++ trainer's phases (docs/ndebug.md): two builds of the same source, with and
without it, each phase timed in the trainer's own clock, the two builds in fresh processes, interleaved.

    python lab/studies/ndebug/compare.py WITH.so WITHOUT.so [--pairs 3] [--rounds 200]

Each process: one session on the suite's data, for each phase 20 warm-up rounds and then --rounds rounds
(pb_run_phase, as the worker runs them); prints the median of each phase as one JSON line.
"""
import argparse
import json
import statistics
import subprocess
import sys

PHASES = ("data_loading", "copy_to_device", "optimizer_init", "forward", "loss", "backward", "param_update",
          "progress_print", "train_step")


def one_process(library: str, rounds: int) -> None:
    sys.path.insert(0, ".")
    from phasebench import data
    from phasebench.worker import cpp_lib

    source = data.resolve("auto", "data")
    trainer = cpp_lib.CppTrainer(cpp_lib.load(library), source.root, log_path="/dev/null")
    medians = {}
    for phase in PHASES:
        for _ in range(20):
            trainer.run_phase(phase)
        medians[phase] = statistics.median(trainer.run_phase(phase)[0] for _ in range(rounds))
    print(json.dumps(medians))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("libraries", nargs="*")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return one_process(args.one, args.rounds)
    with_lib, without_lib = args.libraries
    runs = {"with": [], "without": []}
    for pair in range(args.pairs):
        order = (("with", with_lib), ("without", without_lib))
        for label, library in order if pair % 2 == 0 else order[::-1]:
            done = subprocess.run([sys.executable, __file__, "--one", library, "--rounds", str(args.rounds)],
                                  capture_output=True, text=True, check=True)
            runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("| phase | with -DNDEBUG (µs, per run) | without (µs, per run) | with / without, per pair | median |")
    print("|---|---|---|---|---:|")
    for phase in PHASES:
        a = [run[phase] / 1e3 for run in runs["with"]]
        b = [run[phase] / 1e3 for run in runs["without"]]
        ratios = [x / y for x, y in zip(a, b)]
        print(f"| {phase} | {' · '.join(f'{x:.1f}' for x in a)} | {' · '.join(f'{y:.1f}' for y in b)} | "
              f"{' · '.join(f'{r:.3f}' for r in ratios)} | {statistics.median(ratios):.3f} |")
    print(json.dumps(runs))


if __name__ == "__main__":
    main()
