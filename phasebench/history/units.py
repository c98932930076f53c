"""A series' values as they are read, in the terminal and on the page."""

from __future__ import annotations


def amount(value: float, metric: str) -> str:
    """Instructions in M (or plain under 100,000), seconds in s, ms, µs or ns."""
    if metric == "instructions":
        return f"{value / 1e6:,.2f} M instr" if value >= 1e5 else f"{value:,.0f} instr"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"
