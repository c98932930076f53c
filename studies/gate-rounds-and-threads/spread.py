"""Run-to-run spread of the run medians in docs/gate/rounds-and-threads: sd of log(median) over the runs
of each setting, per case. python docs/gate/rounds-and-threads/spread.py"""
import collections
import glob
import json
import math
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
for experiment, settings in (("rounds", ("r20", "r200")), ("threads", ("t2", "t1"))):
    medians = collections.defaultdict(lambda: collections.defaultdict(list))
    for setting in settings:
        for path in sorted(glob.glob(os.path.join(HERE, experiment, f"{setting}-*.json"))):
            for bench in json.load(open(path))["benchmarks"]:
                medians[bench["name"]][setting].append(bench["stats"]["median"])
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
