"""Whether the machine could measure a paired case (docs/method.md#a-machine-unfit-to-measure): how long the worker's
threads waited on a run queue for a core while its blocks ran, against how long they ran (/proc/PID/task/TID/schedstat:
the scheduler's own nanoseconds, which it keeps anyway), read by the worker itself at each block's start and end
(phasebench/worker/server.py's phase_calls), so that the wait to be woken for a request, which a worker sleeping
between short requests has before every one, is not counted; and the load average per core at the start and the end.
Nothing is read between a block's calls.

On a machine with as many cores as the worker has busy threads, a thread that waits on a run queue holds up the
whole parallel region: a wait of a quarter of the threads' run time is more than the paired blocks can cancel."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# Above this, summed over a side's blocks, the threads waited for a core a quarter as long as they ran.
UNFIT_WAIT_SHARE = 0.25


def run_and_wait_ns(pid: int) -> tuple[int, int]:
    """The process's threads' summed time on a CPU and waiting on a run queue (ns, since each thread started); (0, 0)
    where the kernel shows no schedstat."""
    run = wait = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            fields = stat.read_text().split()
        except OSError:  # the thread ended meanwhile
            continue
        run, wait = run + int(fields[0]), wait + int(fields[1])
    return run, wait


def load_per_core() -> float:
    return round(os.getloadavg()[0] / (os.cpu_count() or 1), 2)


@dataclass
class Fitness:
    """One side's record across its blocks: begin() before a block, add() with what its worker read after it."""

    run_ns: int = 0
    wait_ns: int = 0
    load: list = field(default_factory=list)  # load per core at the first block's start and the last block's end

    def begin(self) -> None:
        if not self.load:
            self.load.append(load_per_core())

    def add(self, run_ns: int, wait_ns: int) -> None:
        """A block's run and wait, as its worker read them."""
        self.run_ns += max(0, run_ns)  # a thread that ended between the reads takes its share away: none counted
        self.wait_ns += max(0, wait_ns)
        self.load[1:] = [load_per_core()]

    @property
    def wait_share(self) -> float | None:
        return round(self.wait_ns / self.run_ns, 3) if self.run_ns else None

    def as_info(self) -> dict:
        """A case's `machine_fit` (phasebench/record.py Case)."""
        share = self.wait_share
        unfit = share is not None and share > UNFIT_WAIT_SHARE
        return {"run_queue_wait_share": share, "load_per_core": self.load, "fit": not unfit,
                "why": (f"its worker's threads waited for a core {share:.0%} as long as they ran, more than "
                        f"{UNFIT_WAIT_SHARE:.0%}: other work held the cores") if unfit else None}
