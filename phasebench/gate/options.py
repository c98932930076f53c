"""What the gates' options take: a percentage (--phase-ratio-fail, --threshold). The test-only knob that slows one
phase on purpose to prove that the gates fail (PHASEBENCH_TEST_SLOW_PHASE) is the tests' own: tests/knobs.py."""

from __future__ import annotations

import argparse
import re


def parse_percent(text: str) -> int:
    """--phase-ratio-fail's and --threshold's value: a whole percentage, as pytest-benchmark's median:X% takes it."""
    match = re.fullmatch(r"(\d+)%", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 20%, got {text!r}")
    return int(match[1])
