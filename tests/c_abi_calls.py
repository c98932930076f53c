"""Calls of the C ABI (cpp/include/phasebench.h) as the tests of tests/test_c_abi_*.py make them: through ctypes, in
a child process of their own (the test file run as a script), so that a crash fails a test with its signal instead of
taking the suite down."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

from phasebench.repository import ROOT
from phasebench.worker import build, cpp_lib
from phasebench.worker.client import describe_exit

PB_ERROR = 1  # cpp/include/phasebench.h
BATCH = 64
ALL_SIGNATURES = cpp_lib._SIGNATURES | cpp_lib.TESTING_SIGNATURES


def options(raw_dir: str | None, device=b"cpu", log_path=None) -> cpp_lib.Options:
    return cpp_lib.Options(raw_dir and raw_dir.encode(), device, log_path, 0, 1, 0.5, 1, BATCH, b"published")


def with_fields(structure, **fields):
    for name, value in fields.items():
        setattr(structure, name, value)
    return structure


def create(lib, opts, out=True) -> int:
    return lib.pb_create(opts and ctypes.byref(opts), ctypes.byref(cpp_lib._SESSION()) if out else None)


def get_batch(lib, handle, index: int, capacity: int) -> int:
    images = (ctypes.c_float * (BATCH * cpp_lib.IMAGE_FLOATS))()
    labels = (ctypes.c_int64 * BATCH)()
    return lib.pb_get_batch(handle, index, images, labels, capacity, ctypes.byref(ctypes.c_int64()))


def trainer_of(lib, handle) -> cpp_lib.CppTrainer:
    """The bindings' trainer around a session made by hand."""
    trainer = cpp_lib.CppTrainer.__new__(cpp_lib.CppTrainer)
    trainer.lib, trainer.handle, trainer.round_checks = lib, handle, True
    return trainer


def last_error(lib) -> str:
    return lib.pb_last_error().decode()


def run_child(module: str, *args: str, env: dict | None = None) -> dict:
    """`python -m module args...`: the JSON of its last line, or a failure naming how it died."""
    child = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT,
                           env=os.environ | build.sanitizer_runtime_env() | (env or {}), capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == 0, f"the child died with {describe_exit(child.returncode)}:\n{child.stderr[-3000:]}"
    return json.loads(child.stdout.strip().splitlines()[-1])
