"""The lab's tests' one arrangement: the child pytests they start are runs of their own, not pytest-xdist workers
(tests/child_runs.py forget_xdist), as in the README's test command."""

from __future__ import annotations

from tests.child_runs import forget_xdist


def pytest_configure(config):
    forget_xdist()
