"""A plugin that keeps the extra_info of every benchmark of a run as pytest-benchmark's fixture held it when the
test's call ended: tests/test_utilization_recorded.py reads this session's (tests/conftest.py registers it) instead of
running the benchmarks again. A child pytest started with `-p tests.recorder` and PHASEBENCH_TEST_EXTRA_INFO=FILE
appends its own to FILE, a JSON line each."""

from __future__ import annotations

import json
import os

import pytest

OUT_ENV = "PHASEBENCH_TEST_EXTRA_INFO"
SAVED: dict[str, dict] = {}  # {node id: extra_info}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    finally:
        benchmark = getattr(item, "funcargs", {}).get("benchmark")
        if benchmark is not None:
            SAVED[item.nodeid] = dict(benchmark.extra_info)
            if os.environ.get(OUT_ENV):
                with open(os.environ[OUT_ENV], "a") as out:
                    out.write(json.dumps({"test": item.nodeid, **benchmark.extra_info}) + "\n")
