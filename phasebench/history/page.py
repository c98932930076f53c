"""The history page (--html): one self-contained file, nothing fetched from the network. Per machine, method,
metric, device and workload, one card per phase: each implementation's series as an inline SVG chart, every point
naming its commit (or release) in its <title>, each change point marked with its range and size, and under it the
ratio of each implementation to its reference of the other language. A small inline script filters the cards by
phase, implementation and metric.

What the browser smoke test (tests/test_history_page.py) reads: every card is `.chart` with data-phase, data-metric
and data-points (JSON: {implementation: points}); every point a `circle.point` inside `g.series[data-impl]`; every
change point a `g.change` with data-range and its label in a <text>.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from html import escape

from phasebench.history.series import Position, Series, version_order
from phasebench.history.units import amount

WIDTH, HEIGHT, RATIO_HEIGHT = 720, 240, 110
LEFT, RIGHT, TOP, BOTTOM = 78, 16, 14, 26
COLOURS = {"python": "#1f77b4", "cpp": "#d95f02"}
PALETTE = ("#7570b3", "#1b9e77", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")

STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
h2{font-size:1.05em;margin-top:2em;border-bottom:1px solid #ccc}
.chart{display:inline-block;vertical-align:top;margin:0 1em 1em 0;border:1px solid #ddd;padding:.4em}
.chart h3{margin:.2em 0;font-size:1em}
#filters label{margin-right:1em}
.notes{color:#555;font-size:.9em}
.shares{border-collapse:collapse;font-size:.85em;margin:.3em 0}.shares td,.shares th{padding:0 .6em;text-align:right}
svg text{font:11px system-ui,sans-serif;fill:#333}
.change line{stroke:#c00;stroke-dasharray:4 3}
.change text{fill:#c00}
.change.unconfirmed line{stroke:#e88}
.legend span{margin-right:1em}
.ratio span{display:block}
"""

SCRIPT = """
function applyFilters(){
  const phase=document.getElementById('f-phase').value, impl=document.getElementById('f-impl').value,
        metric=document.getElementById('f-metric').value;
  document.querySelectorAll('.chart').forEach(card=>{
    const impls=JSON.parse(card.dataset.points);
    const shown=(!phase||card.dataset.phase===phase)&&(!metric||card.dataset.metric===metric)&&(!impl||impl in impls);
    card.style.display=shown?'':'none';
    card.querySelectorAll('[data-impl]').forEach(g=>{g.style.display=(!impl||g.dataset.impl===impl)?'':'none';});
  });
  document.querySelectorAll('section.group').forEach(section=>{
    const any=[...section.querySelectorAll('.chart')].some(card=>card.style.display!=='none');
    section.style.display=any?'':'none';
  });
}
document.querySelectorAll('#filters select').forEach(s=>s.addEventListener('change',applyFilters));
"""


def colour(name: str, names) -> str:
    """python's and cpp's own colours; the palette's, in order, for the other names drawn together."""
    if name in COLOURS:
        return COLOURS[name]
    others = sorted(n for n in names if n not in COLOURS)
    return PALETTE[others.index(name) % len(PALETTE)] if name in others else PALETTE[0]


class Scale:
    """Values to y pixels: logarithmic where the values span more than a factor of 3, else linear."""

    def __init__(self, values: list[float], top: float, bottom: float):
        low, high = min(values), max(values)
        self.log = low > 0 and high / low > 3
        if self.log:
            low, high = math.log(low), math.log(high)
        pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
        self.low, self.high, self.top, self.bottom = low - pad, high + pad, top, bottom

    def y(self, value: float) -> float:
        v = math.log(value) if self.log and value > 0 else value
        return self.bottom - (v - self.low) / (self.high - self.low) * (self.bottom - self.top)

    def ticks(self, count: int = 4) -> list[float]:
        steps = [self.low + (self.high - self.low) * (i + 0.5) / count for i in range(count)]
        return [math.exp(s) if self.log else s for s in steps]


def x_of(index: int, count: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + (span / 2 if count == 1 else span * index / (count - 1))


def chart(lines: dict[str, tuple[list[Position], list[float]]], axis: list[Position], metric: str, height: int,
          changes_of: dict[str, list] | None = None, title: str = "", unit_of=None, ratio: bool = False) -> str:
    """One SVG: a polyline and points per line (keyed by implementation: `g.series[data-impl]` of `circle.point`;
    or with `ratio`, by the pair: `g.ratio-series[data-pair]` of `circle.ratio-point`), change markers."""
    shown = unit_of or (lambda v: amount(v, metric))
    every = [v for _, values in lines.values() for v in values]
    scale = Scale(every, TOP, height - BOTTOM)
    index = {p.x: i for i, p in enumerate(axis)}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" role="img" '
             f'aria-label="{escape(title)}">',
             f'<line x1="{LEFT}" y1="{height - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{height - BOTTOM}" stroke="#999"/>']
    for tick in scale.ticks():
        y = scale.y(tick)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{escape(shown(tick))}</text>')
    for i, position in enumerate(axis):
        if len(axis) <= 12 or i in (0, len(axis) - 1) or i % max(1, len(axis) // 8) == 0:
            # The first and the last label end at the chart's edges, not half beyond them.
            anchor = "middle" if len(axis) == 1 or 0 < i < len(axis) - 1 else "start" if i == 0 else "end"
            parts.append(f'<text x="{x_of(i, len(axis)):.1f}" y="{height - 8}" text-anchor="{anchor}">'
                         f'{escape(position.short)}</text>')
    for name, (positions, values) in lines.items():
        paint = colour(name, lines)
        coords = [(x_of(index[p.x], len(axis)), scale.y(v)) for p, v in zip(positions, values)]
        parts.append(f'<g class="ratio-series" data-pair="{escape(name)}">' if ratio else
                     f'<g class="series" data-impl="{escape(name)}">')
        if len(coords) > 1:
            parts.append(f'<polyline fill="none" stroke="{paint}" stroke-width="1.5" points="'
                         + " ".join(f"{x:.1f},{y:.1f}" for x, y in coords) + '"/>')
        for (x, y), position, value in zip(coords, positions, values):
            parts.append(f'<circle class="{"ratio-point" if ratio else "point"}" cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{paint}" '
                         f'data-x="{escape(position.x)}"><title>{escape(name)} at {escape(position.label)}: '
                         f'{escape(shown(value))}</title></circle>')
        parts.append("</g>")
    for name, found_list in (changes_of or {}).items():
        for found in found_list:
            x = (x_of(index[found.before.x], len(axis)) + x_of(index[found.after.x], len(axis))) / 2
            label = f"{found.range} {found.change.change_pct:+.1f} %"
            detail = (f"{name}: {label} ({shown(found.change.before)} to {shown(found.change.after)})"
                      + ("" if found.confirmed else "; unconfirmed: re-run both neighbours")
                      + "".join(f"; {k} changed: {a} to {b}" for k, (a, b) in found.also_changed.items()))
            parts.append(f'<g class="change{"" if found.confirmed else " unconfirmed"}" data-impl="{escape(name)}" '
                         f'data-range="{escape(found.range)}"><line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" '
                         f'y2="{height - BOTTOM}"/><text x="{x + 3:.1f}" y="{TOP + 10}">{escape(label)}</text>'
                         f'<title>{escape(detail)}</title></g>')
    parts.append("</svg>")
    return "".join(parts)


def recorded(series: Series, name: str) -> str | None:
    """A point attribute of a series as its runs recorded it (older results lack some), None where none did."""
    return next((value for runs in series.runs for point in runs if (value := getattr(point, name))), None)


def ratios(members: list[Series]) -> dict[str, tuple[list[Position], list[float]]]:
    """{'python / cpp': (positions, ratios)} for each implementation whose reference, of the other language, has a
    series here: the ratio at each position both have."""
    by_impl = {s.key.implementation: s for s in members}
    found = {}
    for s in members:
        reference, language = recorded(s, "reference"), recorded(s, "language")
        other = by_impl.get(reference) if reference else None
        if other is None or language != "python" or recorded(other, "language") in (None, language):
            continue
        theirs = dict(zip((p.x for p in other.positions), other.values))
        pairs = [(p, v / theirs[p.x]) for p, v in zip(s.positions, s.values) if theirs.get(p.x)]
        if pairs:
            found[f"{s.key.implementation} / {reference}"] = ([p for p, _ in pairs], [r for _, r in pairs])
    return found


def ratio_unit(ratio_lines: dict[str, tuple[list[Position], list[float]]]):
    """A ratio's label with as many decimals as its chart's range needs (a ratio moving by 0.1 % is not 1.00×
    on every tick)."""
    values = [v for _, found in ratio_lines.values() for v in found]
    span = max(values) - min(values) if values else 0.0
    digits = 2 if span == 0 or span >= 0.05 else min(6, 1 - math.floor(math.log10(span)))
    return lambda v: f"{v:.{digits}f}×"


def shares(ratio_lines: dict[str, tuple[list[Position], list[float]]]) -> str:
    """Per release, each pair's ratio and the interpreter's share: the part of the Python implementation's cost
    that its reference of the other language does not have, 1 - 1/ratio (negative where Python costs less)."""
    rows = []
    for name, (positions, values) in ratio_lines.items():
        rows += [f'<tr data-pair="{escape(name)}" data-x="{escape(p.x)}"><td>{escape(name)}</td>'
                 f'<td>{escape(p.short)}</td><td>{v:.3f}×</td><td>{100 * (1 - 1 / v):.1f} %</td></tr>'
                 for p, v in zip(positions, values)]
    return ('<table class="shares"><tr><th>pair</th><th>release</th><th>ratio</th><th>interpreter\'s share</th></tr>'
            + "".join(rows) + "</table>")


def card(phase: str, members: list[Series], metric: str, by: str) -> str:
    """A phase's card: its implementations' series on one axis (every position any of them has), their ratios."""
    axis = sorted({p.x: p for s in members for p in s.positions}.values(),
                  key=lambda p: version_order(p.x) if by == "torch" else p.order)
    lines = {s.key.implementation: (s.positions, s.values) for s in members}
    counts = {s.key.implementation: len(s.positions) for s in members}
    marks = {s.key.implementation: s.changes for s in members if s.changes}
    html = [f'<div class="chart" data-phase="{escape(phase)}" data-metric="{escape(metric)}" '
            f"data-points='{escape(json.dumps(counts))}'><h3>{escape(phase)}</h3>",
            chart(lines, axis, metric, HEIGHT, marks, title=f"{phase} {metric}")]
    ratio_lines = ratios(members)
    if ratio_lines:
        html.append(f'<div class="ratio"><span class="notes">ratio {escape(", ".join(ratio_lines))}</span>' + chart(ratio_lines, axis, metric, RATIO_HEIGHT, None,
                                                  title=f"{phase} ratio", unit_of=ratio_unit(ratio_lines), ratio=True) + "</div>")
    if ratio_lines and by == "torch":
        html.append(shares(ratio_lines))
    legend = " ".join(f'<span style="color:{colour(s.key.implementation, sorted(lines))}">●'
                      f' {escape(s.key.implementation)}</span>' for s in members)
    html.append(f'<div class="legend">{legend}</div></div>')
    return "".join(html)


def select(name: str, label: str, values: set[str]) -> str:
    options = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in sorted(values))
    return f'<label>{label} <select id="f-{name}"><option value="">all</option>{options}</select></label>'


def sections(all_series: list[Series], by: str) -> list[str]:
    """One section per machine, method, metric, device and workload; in it a card per phase."""
    groups: dict[tuple, dict[str, list[Series]]] = defaultdict(lambda: defaultdict(list))
    for s in all_series:
        groups[s.key.group()][s.key.phase].append(s)
    body = []
    for (_, method, metric, device, workload), phases in groups.items():
        key = next(iter(phases.values()))[0].key
        body.append(f'<section class="group" data-metric="{escape(metric)}" data-by="{escape(by)}"><h2>'
                    f'{escape(metric)} on {escape(device)}{", workload " + escape(workload) if workload else ""}, '
                    f'method {method}, by {escape(by)}</h2><p class="notes">{escape(key.machine_label())}</p>')
        body += [card(phase, members, metric, by) for phase, members in phases.items()]
        body.append("</section>")
    return body


def render(all_series: list[Series], split_lines: list[str], notes: list[str], by: str,
           releases: list[Series] | None = None, release_splits: list[str] | None = None) -> str:
    """The page: the series ordered `by` commit (or torch version) and, with `releases`, the series of the same
    phases ordered by torch release after them, one filter over both."""
    every = all_series + (releases or [])
    body = sections(all_series, by)
    if releases:
        body += ['<h1 id="releases">Across torch releases</h1>',
                 '<ul class="notes">' + "".join(f"<li>{escape(line)}</li>" for line in release_splits or [])
                 + "</ul>"] + sections(releases, "torch")
    filters = (select("phase", "phase", {s.key.phase for s in every})
               + select("impl", "implementation", {s.key.implementation for s in every})
               + select("metric", "metric", {s.key.metric for s in every}))
    listed = "".join(f"<li>{escape(line)}</li>" for line in split_lines + [f"left out: {n}" for n in notes])
    across = "commits" if by == "commit" else "torch releases"
    if releases:
        across += ' and <a href="#releases">torch releases</a>'
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><title>phasebench history</title>"
            f"<style>{STYLE}</style></head><body><h1>phasebench: every phase across {across}</h1>"
            f'<div id="filters">{filters}</div><ul class="notes">{listed}</ul>' + "".join(body)
            + f"<script>{SCRIPT}</script></body></html>\n")
