"""Run-to-run spread of the run medians in results/gate/rounds-and-threads: sd of log(median) over the runs
of each setting, per case, read from rounds.tar.xz and threads.tar.xz there (or from their unpacked folders).
python lab/studies/gate-rounds-and-threads/spread.py"""
import collections
import fnmatch
import glob
import json
import math
import os
import statistics
import tarfile

from phasebench.saved import SavedResult

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "results", "gate", "rounds-and-threads")


def saved(experiment, setting):
    """The saved runs of one setting (SavedResult): the unpacked files, else the archive's members."""
    paths = sorted(glob.glob(os.path.join(HERE, experiment, f"{setting}-*.json")))
    if paths:
        return [SavedResult.load(path) for path in paths]
    with tarfile.open(os.path.join(HERE, f"{experiment}.tar.xz")) as tar:
        members = sorted(m.name for m in tar.getmembers() if fnmatch.fnmatch(m.name, f"{experiment}/{setting}-*.json"))
        return [SavedResult.from_json(json.load(tar.extractfile(name)), name) for name in members]


for experiment, settings in (("rounds", ("r20", "r200")), ("threads", ("t2", "t1"))):
    medians = collections.defaultdict(lambda: collections.defaultdict(list))
    for setting in settings:
        for run in saved(experiment, setting):
            for bench in run.benchmarks:
                medians[bench.name][setting].append(bench.median)
    print(f"\n{experiment}: median of the run medians (µs), sd of log(run median) (%), runs\n")
    print("| case | " + " | ".join(f"{s} median | {s} sd | {s} runs" for s in settings) + " |")
    print("|---|" + "---:|" * 3 * len(settings))
    for name, by_setting in sorted(medians.items()):
        cells = []
        for s in settings:
            values = by_setting[s]
            sd = statistics.stdev(math.log(v) for v in values) * 100
            cells += [f"{statistics.median(values) * 1e6:.1f}", f"{sd:.1f}", str(len(values))]
        print(f"| {name} | " + " | ".join(cells) + " |")
