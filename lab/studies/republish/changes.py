"""What changed, case by case, between two saved default runs: each case's median (per-phase cases, loss_item,
worker_overhead, ensembles, concurrent jobs) and each training run's Total Time and phase totals, old against new.

    python lab/studies/republish/changes.py OLD.json NEW.json > results/republish/changes.md
"""
import sys

from phasebench.saved import SavedResult


def load(path):
    result = SavedResult.read(path, "changes.py")
    return result, {bench.name: bench for bench in result.benchmarks}


def main(old_path, new_path):
    old_result, old = load(old_path)
    new_result, new = load(new_path)
    print(f"Old: `{old_path}` (commit {old_result.commit_info['id'][:7]}); new: `{new_path}` "
          f"(commit {new_result.commit_info['id'][:7]}). Medians; new / old below 1 is faster.\n")
    print("| case | old median | new median | new / old |\n|---|---:|---:|---:|")
    for name in sorted(set(old) & set(new)):
        a, b = old[name].median, new[name].median
        unit, scale = ("s", 1) if a > 1 else ("ms", 1e3)
        print(f"| `{name}` | {a * scale:.4g} {unit} | {b * scale:.4g} {unit} | {b / a:.2f} |")
    only = sorted(set(old) ^ set(new))
    if only:
        print(f"\nIn one result only: {', '.join(f'`{name}`' for name in only)}.")
    print("\nTraining runs, median of the timed rounds (s):\n")
    print("| run | quantity | old | new | new / old |\n|---|---|---:|---:|---:|")
    for name in sorted(n for n in set(old) & set(new) if n.startswith("test_training_run")):
        a, b = old[name].info, new[name].info
        rows = [("Total Time", a.program_median_s, b.program_median_s),
                ("Summed Time", a.summed_median_s, b.summed_median_s)]
        rows += [(phase, a.phase_total_s[phase], b.phase_total_s.get(phase)) for phase in a.phase_total_s]
        rows.append(("free-running loop", a.free_running["loop_s"], b.free_running["loop_s"]))
        for label, x, y in rows:
            ratio = f"{y / x:.2f}" if x and y is not None else "—"
            print(f"| `{name}` | {label} | {x:.4f} | {y if y is None else f'{y:.4f}'} | {ratio} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
