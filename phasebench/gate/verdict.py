"""What both gates share (docs/gating.md#baselines-and-ci-gating, docs/instruction-counts.md): the outcome of a
case, one vocabulary whose value is the word the tables and gate.json show; a case's short name; and the phases no
gate judges. Imports nothing of the suite."""

from __future__ import annotations

from enum import Enum

# worker_overhead is our messaging, not training, and its python/cpp ratio moved 71 % between two runs of an
# unchanged tree (docs/gating.md#baselines-and-ci-gating): no gate judges it.
NOT_GATED_PHASES = ("worker_overhead",)


def is_gated(key: tuple) -> bool:
    """Whether a case (its key: phase, implementation, device, workload id) is judged by the gates."""
    return key[0] not in NOT_GATED_PHASES


def short(fullname: str) -> str:
    """A case's name without its file: test_phase[forward-python-cpu]."""
    return fullname.rpartition("::")[2]


class Verdict(Enum):
    """A gate's verdict on one case. Only REGRESSED fails a gate; the others pass, some of them reported."""

    REGRESSED = "regressed"
    IMPROVED = "improved"  # beyond the threshold the other way: reported, never failing
    UNCHANGED = "unchanged"
    WITHIN_THRESHOLD = "within threshold"  # a significant change no larger than the threshold
    BELOW_FLOOR = "below floor"  # a significant slowdown no larger than the clock's own variation
    RATIO_MOVED = "ratio moved, reported"  # a ratio whose loser is not slower in its own medians
    NOT_DECIDED = "not decided"  # too little evidence to judge (one pair)
    ONLY_IN_BASE = "only in base"
    ONLY_IN_HEAD = "only in head"

    @property
    def fails(self) -> bool:
        return self is Verdict.REGRESSED

    def text(self, detail: str = "") -> str:
        """The word, with the detail in parentheses where there is one."""
        return f"{self.value} ({detail})" if detail else self.value

    def cell(self, detail: str = "") -> str:
        """The word for a Markdown table: bold where it fails."""
        return f"**{self.text(detail)}**" if self.fails else self.text(detail)
