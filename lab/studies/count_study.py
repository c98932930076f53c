"""What the instruction-count gate does on this machine (docs/instruction-counts.md; lab/studies/count-study runs it):

    python -m lab.studies.count_study spread OUT.json RESULT ...   the spread per case over counted results of one
                                                                unchanged tree (the gate's thresholds)
    python -m lab.studies.count_study summary STUDY_DIR            the gated runs' verdicts, false alarms, detections
                                                                and times, as Markdown

A case's spread is (max - min) / median of its median count over the results, in percent; the within-run spread
of its rounds is reported beside it. Imports no torch."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from phasebench.gate.counts import counted_cases, spread_percent
from phasebench.gate.verdict import Verdict, short
from phasebench.saved import SavedResult

# The words the gate.json files of the committed studies (results/instruction-counts/study-*/) use for the verdicts
# regressed and improved.
_EARLIER_WORDS = {"regression": Verdict.REGRESSED, "improvement": Verdict.IMPROVED}


def verdict_of(row: dict) -> Verdict:
    """The outcome of one row of a count gate's gate.json."""
    return _EARLIER_WORDS.get(row["verdict"]) or Verdict(row["verdict"])


def spread(paths: list[str]) -> dict:
    runs = [counted_cases(SavedResult.read(path, "lab.studies.count_study")) for path in paths]
    names = sorted(set.intersection(*(set(run) for run in runs)))
    across = {name: spread_percent([run[name]["median"] for run in runs]) for name in names}
    within = {name: max(spread_percent(run[name]["rounds"]) for run in runs) for name in names}
    medians = {name: statistics.median(run[name]["median"] for run in runs) for name in names}
    floors = {name: sorted({run[name]["floor"] for run in runs}) for name in names}
    return {"results": [str(p) for p in paths], "spread_pct": across, "within_run_spread_pct": within,
            "median_instructions": medians, "floors": floors}


def summary(study: Path) -> str:
    """STUDY_DIR/<label>-<i>/gate.json and runs.tsv (label, index, status, seconds) from lab/studies/count-study."""
    rows = [line.split("\t") for line in (study / "runs.tsv").read_text().splitlines()[1:] if line.strip()]
    lines = ["| gated run | injected | exit status | seconds | regressions | improvements | verdict on the injected case |",
             "|---|---|---:|---:|---|---|---|"]
    tally: dict[str, list[int]] = {}
    for label, index, status, seconds, injected, target in rows:
        gate = json.loads((study / f"{label}-{index}" / "gate.json").read_text())
        regressions = [short(r["case"]) for r in gate["rows"] if verdict_of(r).fails]
        better = [short(r["case"]) for r in gate["rows"] if verdict_of(r) is Verdict.IMPROVED]
        hit = next((r for r in gate["rows"] if target and r["case"].endswith(f"[{target}]")), None)
        verdict = (verdict_of(hit).text(f"{hit['change_pct']:+.3f} % against {hit['threshold_pct']:.2f} %") if hit
                   else "—")
        lines.append(f"| {label} {index} | {injected or 'nothing'} | {status} | {seconds} | "
                     f"{', '.join(regressions) or 'none'} | {', '.join(better) or 'none'} | {verdict} |")
        good = (not regressions) if not target else (regressions == [f"test_phase[{target}]"])
        tally.setdefault(label, []).append(int(good))
    lines += [""] + [f"- {label}: {sum(v)} of {len(v)} as expected ("
                     f"{'no false alarm' if label == 'unchanged' else 'the injected case alone failed'})"
                     for label, v in tally.items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 3 and argv[0] == "spread":
        out = spread(argv[2:])
        Path(argv[1]).write_text(json.dumps(out, indent=1) + "\n")
        worst = max(out["spread_pct"].items(), key=lambda item: item[1])
        print(f"{len(out['results'])} results, {len(out['spread_pct'])} cases; widest spread {worst[1]:.4f} % "
              f"({short(worst[0])})")
        return 0
    if len(argv) == 2 and argv[0] == "summary":
        sys.stdout.write(summary(Path(argv[1])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
