"""Where the repository this package runs from is: its data, build outputs, saved results and sources are found from
here. A leaf: it imports no other phasebench module."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
