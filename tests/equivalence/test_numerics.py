"""The numerics each worker trains under (phasebench/determinism.py), as its start reply reports them: every
equivalence test's worker under the deterministic flags, in both languages, and the timed workers, those the bench
cases borrow, at torch's defaults. The C++ worker's flags are LibTorch's own, read back through pb_read_numerics;
the cuBLAS workspace is the worker process's environment."""

from __future__ import annotations

import os

import pytest

from phasebench import determinism
from tests.equivalence.pairs import IMPLEMENTATIONS, POOL_GROUP, equivalence_options


def differences(reported: dict, expected: dict) -> str:
    return ", ".join(f"{name} {reported.get(name)!r} (expected {expected[name]!r})"
                     for name in determinism.FLAG_NAMES if reported.get(name) != expected[name])


@pytest.mark.xdist_group(POOL_GROUP)
@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_equivalence_workers_run_under_the_deterministic_flags(kept_workers, settings, tmp_path, impl):
    """A worker started as the equivalence tests start theirs (pairs.equivalence_options, a trainer of the package's
    kept workers) reports deterministic algorithms, cuDNN deterministic without its benchmark, no TF32 and the
    fixed cuBLAS workspace."""
    worker = kept_workers.fresh(impl, equivalence_options(settings, "cpu", str(tmp_path / f"{impl}.log"), impl))
    try:
        reported = worker.info.flags
    finally:
        kept_workers.give_back(worker)
    assert set(reported) == set(determinism.FLAG_NAMES), f"{impl}: the start reply's flags are {sorted(reported)}"
    assert reported == determinism.DETERMINISTIC, f"{impl} equivalence worker: {differences(reported, determinism.DETERMINISTIC)}"


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_timed_workers_keep_torchs_defaults(worker_for, impl):
    """The worker a bench case of the published pair borrows (the session's pool) sets none of the flags: torch's
    defaults, and the cuBLAS workspace of the environment it inherits, nothing added."""
    reported = worker_for(impl, "cpu").info.flags
    expected = determinism.TORCH_DEFAULTS | {
        "cublas_workspace_config": os.environ.get(determinism.CUBLAS_WORKSPACE_VARIABLE)}
    assert set(reported) == set(determinism.FLAG_NAMES), f"{impl}: the start reply's flags are {sorted(reported)}"
    assert reported == expected, f"{impl} timed worker: {differences(reported, expected)}"
