"""The history page (--html): one self-contained file, nothing fetched from the network, every point drawn once as
server-side SVG.

The first screen answers what changed: per machine (a series group: machine, method, metric, device, workload, and
whether it runs along commits or torch releases), its change points newest first, each with its phase,
implementation, metric, commit range (the commit linked where the page knows the repository's address), size with
its descriptive spread (history/changes.py's bootstrap on the runs the change was found in; the method is said under
the list), confirmed or not, a regression (▲, dearer) told apart from an improvement (▼, cheaper), and a change of
measurement (△ ▽: the count bracket or the method's sources differ between the neighbours' runs) listed after the
changes of code and marked as such; filters over them. Under the list, each series group's newest commit, its date
and its method, beside the method of the code that drew the page. Below, one chart at a time,
for the selected case (a phase of one metric, device and workload): both implementations along the commits, the
series of other methods, pins or machines on the same time line, never joined by a line, their boundary marked with
what changed; change points marked; each point naming its commit, value, method and machine on hover or focus.
The torch releases' chart of the same case follows, with each release's ratio and the interpreter's share.

Axes (`Axis`): at most six labels at round values (1-2-5 steps, or decades on a log axis), the labelled span
holding every point drawn, and a span at least the series' measured run-to-run spread (±2 σ), so that noise draws
flat.

What the tests read: the list is `table#changes`, each change point a `tr.change-row` with data-case, data-range,
data-phase, data-impl, data-metric, data-direction, data-confirmed and data-kind (code, release or measurement); the
newest points are `table#newest`, a row per series group and newest commit (data-commit, data-date, data-method), and
each chart's `p.newest` says its series'; every chart is `.chart` with data-case,
data-phase, data-metric and data-points (JSON: {implementation: points}); every point a `circle.point` inside
`g.series[data-impl]`; every change point drawn a `g.change` with data-range and its label in a <text>; a method,
pin or machine boundary a `g.key-change`; every axis label a `text.tick`.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from html import escape

from phasebench.history import changes as changes_mod
from phasebench.history.series import Found, Newest, Position, Series, version_order
from phasebench.history.units import amount
from phasebench.method import METHOD_VERSION

WIDTH, HEIGHT, RATIO_HEIGHT = 960, 250, 130
LEFT, RIGHT, TOP, BOTTOM = 86, 16, 16, 26
MOST_TICKS = 6
LABEL_GAP = 84  # pixels between the middles of two commit labels (a short hash is some 50 wide)
COLOURS = {"python": "#1f77b4", "cpp": "#d95f02"}
PALETTE = ("#7570b3", "#1b9e77", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")

STYLE = """
body{font:13px system-ui,sans-serif;margin:.8em 1.2em;color:#222;max-width:1240px}
h1{font-size:1.2em;margin:.2em 0 .4em}h2{font-size:1em;margin:1.2em 0 .3em;border-bottom:1px solid #ccc}
#filters{margin:.3em 0}#filters label{margin-right:.8em}
table#changes{border-collapse:collapse;width:100%}
#changes td,#changes th{padding:1px .5em;text-align:left;white-space:nowrap}
#changes th.group{font-weight:600;background:#f3f3f3;white-space:normal;font-size:.92em}
#changes td.num{text-align:right;font-variant-numeric:tabular-nums}
#changes tr.change-row{cursor:pointer}#changes tr.change-row:hover,#changes tr.change-row:focus{background:#eef}
#changes tr.selected{outline:2px solid #88a}
.up .size{color:#b00}.down .size{color:#070}.measurement .size{color:#777}
#newest{border-collapse:collapse;margin:.4em 0}#newest td,#newest th{padding:1px .5em;text-align:left}
#newest tr.older td.method{color:#b00}
.notes,.method{color:#555;font-size:.9em}
section.group:not(:has(.chart:not([hidden]))){display:none}
.chart{margin:.6em 0;border:1px solid #ddd;padding:.4em}.chart h3{margin:.2em 0;font-size:1em}
.shares{border-collapse:collapse;font-size:.85em;margin:.3em 0}.shares td,.shares th{padding:0 .6em;text-align:right}
svg text{font:11px system-ui,sans-serif;fill:#333}
.change line{stroke:#c00;stroke-dasharray:4 3}.change text{fill:#c00}.change.unconfirmed line{stroke:#e88}
.change.measurement line{stroke:#777}.change.measurement text{fill:#777}
.key-change line{stroke:#555}.key-change text{fill:#555}
circle.point:focus,circle.ratio-point:focus{stroke:#000;stroke-width:2;outline:none}
.legend span{margin-right:1em}
"""

SCRIPT = """
const rows=[...document.querySelectorAll('#changes tr.change-row')], pick=document.getElementById('f-case');
function show(name){
  pick.value=name;
  document.querySelectorAll('.chart').forEach(card=>{card.hidden=card.dataset.case!==name;});
  rows.forEach(row=>row.classList.toggle('selected',row.dataset.case===name));
}
function applyFilters(){
  const want={};
  document.querySelectorAll('#filters select[data-field]').forEach(s=>{want[s.dataset.field]=s.value;});
  let shown=0;
  rows.forEach(row=>{
    const ok=Object.entries(want).every(([field,value])=>!value||row.dataset[field]===value);
    row.hidden=!ok; shown+=ok;
  });
  document.querySelectorAll('#changes tr.group').forEach(head=>{
    head.hidden=!rows.some(row=>row.dataset.group===head.dataset.group&&!row.hidden);
  });
  document.getElementById('none-shown').hidden=shown>0||rows.length===0;
}
rows.forEach(row=>{
  row.addEventListener('click',()=>show(row.dataset.case));
  row.addEventListener('keydown',event=>{if(event.key==='Enter')show(row.dataset.case);});
});
pick.addEventListener('change',()=>show(pick.value));
document.querySelectorAll('#filters select[data-field]').forEach(s=>s.addEventListener('change',applyFilters));
"""


def colour(name: str, names) -> str:
    """python's and cpp's own colours; the palette's, in order, for the other names drawn together."""
    if name in COLOURS:
        return COLOURS[name]
    others = sorted(n for n in names if n not in COLOURS)
    return PALETTE[others.index(name) % len(PALETTE)] if name in others else PALETTE[0]


# -- axes ----------------------------------------------------------------------------------------------------

def _clean(value: float) -> float:
    return float(f"{value:.12g}")


def linear_ticks(low: float, high: float, most: int = MOST_TICKS) -> tuple[list[float], float]:
    """At most `most` ticks at multiples of a 1-2-5 step, the first at or below `low`, the last at or above `high`;
    and the step."""
    if high <= low:
        pad = abs(low) * 0.01 or 1.0
        low, high = low - pad, high + pad
    exponent = math.floor(math.log10((high - low) / most)) - 1
    while True:
        for mantissa in (1, 2, 5):
            step = mantissa * 10.0 ** exponent
            first, last = math.floor(low / step), math.ceil(high / step)
            if first * step > low:
                first -= 1
            if last * step < high:
                last += 1
            if last - first + 1 <= most:
                return [_clean(i * step) for i in range(first, last + 1)], step
        exponent += 1


def log_ticks(low: float, high: float, most: int = MOST_TICKS) -> list[float]:
    """At most `most` ticks at 1, 2 and 5 times powers of ten (or at powers of ten, every one, every second, …), the
    first at or below `low`, the last at or above `high`."""
    exponents = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 2)
    for decades in range(1, 10):
        for mantissas in ([(1, 2, 5), (1,)] if decades == 1 else [(1,)]):
            values = sorted(_clean(m * 10.0 ** e) for e in exponents if e % decades == 0 for m in mantissas)
            below = [v for v in values if v <= low * (1 + 1e-12)]
            above = [v for v in values if v >= high * (1 - 1e-12)]
            if not below or not above:
                continue
            ticks = [v for v in values if below[-1] <= v <= above[0]]
            if len(ticks) <= most:
                return ticks
    return [low, high]


class Axis:
    """Values to y pixels over round labels (linear_ticks; log_ticks where the values span more than a factor of 3):
    the span is at least `spread` either side of the middle, twice over (±2 σ), then widened to the round ticks
    that hold every value."""

    def __init__(self, values: list[float], top: float, bottom: float, spread: float = 0.0):
        low, high = min(values), max(values)
        self.log = low > 0 and high / low > 3
        if not self.log and spread > 0 and low > 0:
            middle = math.sqrt(low * high)
            low, high = min(low, middle * (1 - 2 * spread)), max(high, middle * (1 + 2 * spread))
        if self.log:
            self.ticks = log_ticks(low, high)
            self.step = None
            self.low, self.high = math.log(self.ticks[0]), math.log(self.ticks[-1])
        else:
            self.ticks, self.step = linear_ticks(low, high)
            self.low, self.high = self.ticks[0], self.ticks[-1]
        self.top, self.bottom = top, bottom

    def y(self, value: float) -> float:
        v = math.log(value) if self.log and value > 0 else value
        return self.bottom - (v - self.low) / (self.high - self.low) * (self.bottom - self.top)


def _decimals(step: float) -> int:
    return max(0, -math.floor(math.log10(step) + 1e-9))


def tick_labels(axis: Axis, metric: str, ratio: bool = False) -> list[str]:
    """Each tick's label, in the unit of the largest, with the decimals the step between ticks needs (a log axis:
    each tick's own, one significant digit)."""
    ticks = axis.ticks
    if ratio:
        unit, scale, suffix = "×", 1.0, True
    elif metric == "instructions":
        unit, scale, suffix = ("M instr", 1e6, False) if max(ticks) >= 1e5 else ("instr", 1.0, False)
    else:
        top = max(abs(t) for t in ticks)
        unit, scale = next(((u, s) for u, s in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)) if top >= s), ("ns", 1e-9))
        suffix = False
    labels = []
    for tick in ticks:
        step = axis.step if axis.step else (tick or 1.0)
        digits = _decimals(step / scale)
        text = f"{tick / scale:,.{digits}f}"
        labels.append(f"{text}×" if suffix else f"{text} {unit}")
    return labels


# -- charts --------------------------------------------------------------------------------------------------

def x_of(index: int, count: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + (span / 2 if count == 1 else span * index / (count - 1))


class Line:
    """One series drawn: its name (the implementation, or an implementation pair), positions and values, method
    and machine (said by each point), and its change points."""

    def __init__(self, name: str, positions: list[Position], values: list[float], method: int, machine: str,
                 found: list[Found] | None = None):
        self.name, self.positions, self.values = name, positions, values
        self.method, self.machine, self.found = method, machine, found or []


def key_marks(lines: list[tuple[Line, Series]], by: str) -> list[tuple[Position, Position, str]]:
    """Where one implementation's series ends and its next begins (another method, pins or machine): the last
    position before, the first after, and what changed."""
    order = axis_order(by)
    marks = {}
    by_name: dict[str, list[tuple[Line, Series]]] = defaultdict(list)
    for line, s in lines:
        by_name[line.name].append((line, s))
    for members in by_name.values():
        members.sort(key=lambda pair: order(pair[0].positions[0]))
        for (a, sa), (b, sb) in zip(members, members[1:]):
            if order(a.positions[-1]) >= order(b.positions[0]):
                continue  # overlapping series (two machines at once): drawn side by side, no boundary
            old = dict(sa.key.machine) | {"method": str(sa.key.method)}
            new = dict(sb.key.machine) | {"method": str(sb.key.method)}
            what = [what_changed(name, old.get(name, "unrecorded"), new.get(name, "unrecorded"))
                    for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)]
            marks[(a.positions[-1].x, b.positions[0].x)] = (a.positions[-1], b.positions[0], "; ".join(what))
    return list(marks.values())


def what_changed(name: str, before: str, after: str) -> str:
    """A key field's change in words; pins (one setting of many): the settings dropped and added."""
    if name != "pins":
        return f"{name} {before} → {after}"
    gone = [w for w in before.split() if w not in after.split()]
    came = [w for w in after.split() if w not in before.split()]
    return "pins" + "".join(f" −{w}" for w in gone) + "".join(f" +{w}" for w in came)


def chart(lines: list[Line], axis_positions: list[Position], metric: str, height: int, title: str = "",
          ratio: bool = False, spread: float = 0.0, marks: list[tuple[Position, Position, str]] = ()) -> str:
    """One SVG: a polyline and points per line (`g.series[data-impl]` of `circle.point`; with `ratio`,
    `g.ratio-series[data-pair]` of `circle.ratio-point`), change points and key boundaries marked."""
    every = [v for line in lines for v in line.values]
    axis = Axis(every, TOP, height - BOTTOM, spread)
    index = {p.x: i for i, p in enumerate(axis_positions)}
    count = len(axis_positions)

    def shown(value: float) -> str:
        return f"{value:.4f}×" if ratio else amount(value, metric)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" role="img" '
             f'aria-label="{escape(title)}">',
             f'<line x1="{LEFT}" y1="{height - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{height - BOTTOM}" stroke="#999"/>']
    for tick, label in zip(axis.ticks, tick_labels(axis, metric, ratio)):
        y = axis.y(tick)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text class="tick" x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" data-value="{tick!r}">'
                     f'{escape(label)}</text>')
    last_x, kept = x_of(count - 1, count), None
    for i, position in enumerate(axis_positions):
        x = x_of(i, count)
        # Labels at least a label's width apart: the first, the last, and those between with room on both sides.
        if not (i == count - 1 or (kept is None or x - kept >= LABEL_GAP) and last_x - x >= LABEL_GAP):
            continue
        kept = x
        anchor = "middle" if count == 1 or 0 < i < count - 1 else "start" if i == 0 else "end"
        parts.append(f'<text x="{x:.1f}" y="{height - 8}" text-anchor="{anchor}">{escape(position.short)}</text>')
    for before, after, what in marks:
        x = (x_of(index[before.x], count) + x_of(index[after.x], count)) / 2
        parts.append(f'<g class="key-change" data-range="{escape(before.short)}..{escape(after.short)}">'
                     f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{height - BOTTOM}"/>'
                     f'<text x="{x - 3:.1f}" y="{height - BOTTOM - 4}" text-anchor="end">{escape(what[:60])}'
                     f'</text><title>{escape(before.short)}..{escape(after.short)}: {escape(what)}</title></g>')
    names = sorted({line.name for line in lines})
    labelled: list[float] = []
    for line in lines:
        paint = colour(line.name.split(" / ")[0], names)
        coords = [(x_of(index[p.x], count), axis.y(v)) for p, v in zip(line.positions, line.values)]
        parts.append(f'<g class="ratio-series" data-pair="{escape(line.name)}">' if ratio else
                     f'<g class="series" data-impl="{escape(line.name)}">')
        if len(coords) > 1:
            parts.append(f'<polyline fill="none" stroke="{paint}" stroke-width="1.5" points="'
                         + " ".join(f"{x:.1f},{y:.1f}" for x, y in coords) + '"/>')
        said = f"method {line.method}; machine: {line.machine}"
        for (x, y), position, value in zip(coords, line.positions, line.values):
            when = f", {position.date}" if position.date else ""
            parts.append(f'<circle class="{"ratio-point" if ratio else "point"}" cx="{x:.1f}" cy="{y:.1f}" r="3.5" '
                         f'fill="{paint}" tabindex="0" data-x="{escape(position.x)}"><title>{escape(line.name)} at '
                         f'{escape(position.label + when)}: {escape(shown(value))}; {escape(said)}</title></circle>')
        parts.append("</g>")
        for found in line.found:
            x = (x_of(index[found.before.x], count) + x_of(index[found.after.x], count)) / 2
            row = sum(1 for other in labelled if abs(other - x) < 150)  # labels close together, one under another
            labelled.append(x)
            label = f"{found.range} {found.change.change_pct:+.1f} %" + (" (measurement)" if found.measurement else "")
            detail = (f"{line.name}: {label}, {changes_mod.INTERVAL_HEADING} {found.change.interval_text()} "
                      f"({shown(found.change.before)} to {shown(found.change.after)})"
                      + (f"; a change of measurement: {', '.join(found.measurement)} changed, not the code measured"
                         if found.measurement else "")
                      + ("" if found.confirmed else "; unconfirmed: re-run both neighbours")
                      + "".join(f"; {k} changed: {a} to {b}" for k, (a, b) in found.also_changed.items()))
            parts.append(f'<g class="change{"" if found.confirmed else " unconfirmed"}'
                         f'{" measurement" if found.measurement else ""}" '
                         f'data-impl="{escape(line.name)}" data-range="{escape(found.range)}"><line x1="{x:.1f}" '
                         f'y1="{TOP}" x2="{x:.1f}" y2="{height - BOTTOM}"/><text x="{x + 3:.1f}" y="{TOP + 10 + 12 * row}">'
                         f'{escape(label)}</text><title>{escape(detail)}</title></g>')
    parts.append("</svg>")
    return "".join(parts)


def recorded(series: Series, name: str) -> str | None:
    """A point attribute of a series as its runs recorded it (older results lack some), None where none did."""
    return next((value for runs in series.runs for point in runs if (value := getattr(point, name))), None)


def ratios(members: list[Series]) -> list[tuple[Line, float]]:
    """A 'python / cpp' line for each implementation whose reference, of the other language, has a series of the
    same group here: the ratio at each position both have; with the larger of the two series' spreads."""
    by_key = {(s.key.group(), s.key.implementation): s for s in members}
    found = []
    for s in members:
        reference, language = recorded(s, "reference"), recorded(s, "language")
        other = by_key.get((s.key.group(), reference)) if reference else None
        if other is None or language != "python" or recorded(other, "language") in (None, language):
            continue
        theirs = dict(zip((p.x for p in other.positions), other.values))
        pairs = [(p, v / theirs[p.x]) for p, v in zip(s.positions, s.values) if theirs.get(p.x)]
        if pairs:
            found.append((Line(f"{s.key.implementation} / {reference}", [p for p, _ in pairs],
                               [r for _, r in pairs], s.key.method, s.key.machine_label()),
                          max(s.spread, other.spread)))
    return found


def shares(ratio_lines: list[Line]) -> str:
    """Per release, each pair's ratio and the interpreter's share: the part of the Python implementation's cost
    that its reference of the other language does not have, 1 - 1/ratio (negative where Python costs less)."""
    rows = []
    for line in ratio_lines:
        rows += [f'<tr data-pair="{escape(line.name)}" data-x="{escape(p.x)}"><td>{escape(line.name)}</td>'
                 f'<td>{escape(p.short)}</td><td>{v:.3f}×</td><td>{100 * (1 - 1 / v):.1f} %</td></tr>'
                 for p, v in zip(line.positions, line.values)]
    return ('<table class="shares"><tr><th>pair</th><th>release</th><th>ratio</th><th>interpreter\'s share</th></tr>'
            + "".join(rows) + "</table>")


def case_of(series: Series) -> str:
    """The case a chart shows: metric, device, workload and phase (both implementations, every method and machine)."""
    key = series.key
    return "|".join((key.metric, key.device, key.workload or "default", key.phase))


def axis_order(by: str):
    return (lambda p: version_order(p.x)) if by == "torch" else (lambda p: p.order)


def newest_words(newest: Newest) -> str:
    """A series' newest point in words, escaped: its commit, the commit's date and the method."""
    commit = newest.commit[:7] if newest.commit else "commit unrecorded"
    release = "" if newest.at.date or newest.at.x == newest.commit else f"{newest.at.short} at "
    return escape(f"{release}{commit} of {newest.date or 'an unrecorded date'}, method {newest.method}")


def card(phase: str, members: list[Series], metric: str, by: str, hidden: bool) -> str:
    """A case's chart: its implementations' series of every method, pins and machine on one axis (every position
    any of them has), boundaries marked; under it their ratios."""
    axis = sorted({p.x: p for s in members for p in s.positions}.values(), key=axis_order(by))
    pairs = [(Line(s.key.implementation, s.positions, s.values, s.key.method, s.key.machine_label(), s.changes), s)
             for s in members]
    counts: dict[str, int] = defaultdict(int)
    for s in members:
        counts[s.key.implementation] += len(s.positions)
    spread = max((s.spread for s in members), default=0.0)
    case = case_of(members[0])
    html = [f'<div class="chart" data-case="{escape(case)}" data-by="{escape(by)}-chart" data-phase="{escape(phase)}" '
            f'data-metric="{escape(metric)}" data-points=\'{escape(json.dumps(dict(counts)))}\''
            f'{" hidden" if hidden else ""}><h3>{escape(phase)}, {escape(metric)} by {escape(by)}</h3>',
            '<p class="newest notes">' + "; ".join(dict.fromkeys(
                f"{escape(s.key.implementation)}: newest {newest_words(s.newest())}" for s in members)) + "</p>",
            chart([line for line, _ in pairs], axis, metric, HEIGHT, f"{phase} {metric}", spread=spread,
                  marks=key_marks(pairs, by))]
    found = ratios(members)
    if found:
        lines = [line for line, _ in found]
        html.append(f'<div class="ratio"><span class="notes">ratio {escape(", ".join(sorted({ratio.name for ratio in lines})))}'
                    f' (its axis spans at least the run-to-run spread)</span>'
                    + chart(lines, axis, metric, RATIO_HEIGHT, f"{phase} ratio", ratio=True,
                            spread=max(s for _, s in found)) + "</div>")
        if by == "torch":
            html.append(shares(lines))
    names = sorted({s.key.implementation for s in members})
    legend = " ".join(f'<span style="color:{colour(name, names)}">● {escape(name)}</span>' for name in names)
    html.append(f'<div class="legend">{legend}</div></div>')
    return "".join(html)


def sections(all_series: list[Series], by: str, selected: str) -> list[str]:
    """One section per metric, device and workload; in it a chart per phase, all hidden but the selected case's."""
    groups: dict[tuple, dict[str, list[Series]]] = defaultdict(lambda: defaultdict(list))
    for s in all_series:
        groups[(s.key.metric, s.key.device, s.key.workload)][s.key.phase].append(s)
    body = []
    for (metric, device, workload), phases in groups.items():
        body.append(f'<section class="group" data-metric="{escape(metric)}" data-by="{escape(by)}"><h2>'
                    f'{escape(metric)} on {escape(device)}{", workload " + escape(workload) if workload else ""}, '
                    f'by {escape(by)}</h2>')
        body += [card(phase, members, metric, by, case_of(members[0]) != selected)
                 for phase, members in phases.items()]
        body.append("</section>")
    return body


# -- the list of change points -------------------------------------------------------------------------------

def group_label(series: Series, by: str) -> str:
    key = series.key
    return (f"{key.metric} on {key.device}{', workload ' + key.workload if key.workload else ''}, method "
            f"{key.method}, by {by}: {key.machine_label()}")


def change_rows(all_series: list[Series], by: str) -> list[tuple[str, list[tuple[Series, Found]]]]:
    """The change points, per series group: its changes of code (or of release) newest first, then its changes of
    measurement newest first; the groups in the order of their newest change point."""
    grouped: dict[str, list[tuple[Series, Found]]] = defaultdict(list)
    order = axis_order(by)
    for s in all_series:
        for found in s.changes:
            grouped[group_label(s, by)].append((s, found))
    for rows in grouped.values():
        rows.sort(key=lambda pair: (not pair[1].measurement, order(pair[1].after), abs(pair[1].change.change_pct)),
                  reverse=True)
    return sorted(grouped.items(), key=lambda item: max(order(found.after) for _, found in item[1]), reverse=True)


def commit_link(found: Found, by: str, commit_url: str | None) -> str:
    if by != "commit" or not commit_url:
        return escape(found.range)
    url = commit_url.replace("{sha}", found.after.x)
    return f'{escape(found.before.short)}..<a href="{escape(url)}">{escape(found.after.short)}</a>'


# A change of measurement is drawn hollow: it is neither a regression nor an improvement of the code.
MARKS = {("up", "code"): "▲", ("down", "code"): "▼", ("up", "release"): "▲", ("down", "release"): "▼",
         ("up", "measurement"): "△", ("down", "measurement"): "▽"}


def change_table(every: list[tuple[list[Series], str]], commit_url: str | None) -> str:
    head = ("<tr><th></th><th>phase</th><th>implementation</th><th>metric</th><th>commits</th><th>change</th>"
            f"<th>{escape(changes_mod.INTERVAL_HEADING)}</th><th>status</th><th>also changed</th><th>a change of</th>"
            "</tr>")
    rows = [head]
    for all_series, by in every:
        for number, (label, members) in enumerate(change_rows(all_series, by)):
            group = f"{by}-{number}"
            rows.append(f'<tr class="group" data-group="{group}"><th class="group" colspan="10">{escape(label)}</th></tr>')
            for s, found in members:
                change = found.change
                direction = "up" if change.change_pct > 0 else "down"
                kind = found.kind(by)
                also = ", ".join(found.also_changed)
                rows.append(
                    f'<tr class="change-row {direction} {kind}" tabindex="0" data-group="{group}" '
                    f'data-case="{escape(case_of(s))}" data-range="{escape(found.range)}" '
                    f'data-phase="{escape(s.key.phase)}" data-impl="{escape(s.key.implementation)}" '
                    f'data-metric="{escape(s.key.metric)}" data-axis="{escape(by)}" data-direction="{direction}" '
                    f'data-confirmed="{"yes" if found.confirmed else "no"}" data-kind="{kind}">'
                    f'<td class="size">{MARKS[direction, kind]}</td><td>{escape(s.key.phase)}</td>'
                    f'<td>{escape(s.key.implementation)}</td><td>{escape(s.key.metric)}</td>'
                    f'<td>{commit_link(found, by, commit_url)}</td>'
                    f'<td class="num size">{change.change_pct:+.1f} %</td><td class="num">{change.interval_text()}</td>'
                    f'<td>{"confirmed" if found.confirmed else "unconfirmed"}</td><td>{escape(also)}</td>'
                    f'<td>{escape(found.kind_words(by))}</td></tr>')
    listed = len(rows) > 1
    return (f'<table id="changes">{"".join(rows)}</table>'
            f'<p id="none-shown" class="notes" hidden>No change point matches the filters.</p>'
            + ("" if listed else '<p id="no-changes"><b>No change points</b>: no series stepped beyond its '
                                 'threshold (counts) or its detector\'s penalty (times).</p>'))


def newest_table(every: list[tuple[list[Series], str]], commit_url: str | None) -> str:
    """Per series group, its series' newest commit, the commit's date and their method, one row per newest commit
    (series of one group that stop at different commits get a row each); beside them, the method of the code that
    drew the page, so that a history that stops at an older method says so."""
    rows, methods = [], set()
    for all_series, by in every:
        held: dict[tuple, list[Series]] = defaultdict(list)
        for s in all_series:
            newest = s.newest()
            held[(group_label(s, by), newest.commit, newest.date, newest.method, newest.at.x)].append(s)
        for (label, commit, date, method, _), members in held.items():
            newest = members[0].newest()
            methods.add(method)
            short = escape(commit[:7]) if commit else "unrecorded"
            if commit and commit_url:
                short = f'<a href="{escape(commit_url.replace("{sha}", commit))}">{short}</a>'
            where = "" if newest.at.date or newest.at.x == commit else f"{escape(newest.at.short)} at "
            rows.append(f'<tr class="{"older" if method < METHOD_VERSION else "current"}" '
                        f'data-commit="{escape(commit or "")}" data-date="{escape(date or "")}" data-method="{method}">'
                        f'<td>{escape(label)}</td><td class="num">{len(members)}</td><td>{where}{short}</td>'
                        f'<td>{escape(date or "unrecorded")}</td><td class="method">{method}</td></tr>')
    said = (f" The history's newest series are of method {max(methods)}, older than the code's: a run of the code now "
            "measures otherwise and joins none of them." if methods and max(methods) < METHOD_VERSION else "")
    return (f'<p class="method">The code that drew this page measures with method {METHOD_VERSION} '
            f'(phasebench/method.py).{said}</p>'
            '<table id="newest"><tr><th>series group</th><th>series</th><th>newest commit</th><th>its date</th>'
            "<th>method</th></tr>" + "".join(rows) + "</table>")


def select(field: str, label: str, values: set[str], names: dict[str, str] | None = None) -> str:
    options = "".join(f'<option value="{escape(v)}">{escape((names or {}).get(v, v))}</option>' for v in sorted(values))
    return (f'<label>{label} <select id="f-{field}" data-field="{field}"><option value="">all</option>{options}'
            f'</select></label>')


def render(all_series: list[Series], split_lines: list[str], notes: list[str], by: str,
           releases: list[Series] | None = None, release_splits: list[str] | None = None,
           commit_url: str | None = None) -> str:
    """The page: the change points first, then the selected case's chart along `by` (commit or torch version)
    and, with `releases`, along torch releases. `commit_url`: a commit's address with {sha} for its hash."""
    every = all_series + (releases or [])
    kinds = [(all_series, by)] + ([(releases, "torch")] if releases else [])
    newest = [members[0][0] for series, axis in kinds for _, members in change_rows(series, axis)[:1]]
    selected = case_of(newest[0]) if newest else case_of(every[0]) if every else ""
    filters = (select("metric", "metric", {s.key.metric for s in every})
               + select("phase", "phase", {s.key.phase for s in every})
               + select("impl", "implementation", {s.key.implementation for s in every})
               + select("direction", "direction", {"up", "down"}, {"up": "▲ dearer", "down": "▼ cheaper"})
               + select("kind", "a change of", {found.kind(axis) for series, axis in kinds for s in series
                                                for found in s.changes},
                        {"code": "code", "release": "torch release", "measurement": "measurement"})
               + select("confirmed", "confirmed", {"yes", "no"}))
    cases = sorted({case_of(s) for s in every})
    chooser = ('<label>chart <select id="f-case">' + "".join(
        f'<option value="{escape(c)}"{" selected" if c == selected else ""}>{escape(c.replace("|", " "))}</option>'
        for c in cases) + "</select></label>")
    body = sections(all_series, by, selected)
    if releases:
        body += ['<h1 id="releases">Across torch releases</h1>',
                 '<ul class="notes">' + "".join(f"<li>{escape(line)}</li>" for line in release_splits or [])
                 + "</ul>"] + sections(releases, "torch", selected)
    listed = "".join(f"<li>{escape(line)}</li>" for line in split_lines + [f"left out: {n}" for n in notes])
    across = "commits" if by == "commit" else "torch releases"
    if releases:
        across += ' and <a href="#releases">torch releases</a>'
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><title>phasebench history</title>"
            f"<style>{STYLE}</style></head><body><h1>phasebench: change points across {across}</h1>"
            f'<div id="filters">{filters}</div>{change_table(kinds, commit_url)}'
            f'<p class="method">▲ dearer (a regression), ▼ cheaper (an improvement), newest first per machine; △ ▽ a '
            f'change of measurement, listed after them: the count bracket or the method\'s sources differ between the '
            f'neighbours\' runs, so the step is the measurement\'s, not the code\'s. A row selects its chart. '
            f'Counts: a step beyond the count gate\'s threshold; times: Pelt\'s change points. '
            f'{escape(changes_mod.INTERVAL_METHOD)}.</p>{newest_table(kinds, commit_url)}'
            f'<div id="chooser">{chooser}</div>' + "".join(body)
            + f'<details class="notes"><summary>How the series were split, and what was left out</summary><ul>'
              f'{listed}</ul></details>'
            + f"<script>{SCRIPT}</script></body></html>\n")
