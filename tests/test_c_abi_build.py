"""The C ABI's declarations, definitions and build: every function the headers declare is bound, returns a status
and, where it can fail, runs inside guarded() (no C++ exception crosses the ABI); the library builds without
warnings; and `make plain`, which builds the plain program the trainer is held to, leaves the library alone."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from phasebench.repository import ROOT
from phasebench.worker import cpp_lib
from tests.c_abi_calls import ALL_SIGNATURES

CPP = ROOT / "cpp"
HEADERS = ("phasebench.h", "phasebench_count.h", "phasebench_testing.h")


def _declarations(header: str) -> dict[str, str]:
    """{function: its return type} of a public header."""
    text = (CPP / "include" / header).read_text()
    return {name: kind for kind, name in re.findall(r"^(\w[\w ]*?\**)\s*(pb_\w+)\(", text, re.M)}


def test_every_header_function_is_bound():
    """The production ABI and the testing build's, each bound by its own table: no test knob in phasebench.h."""
    assert set(_declarations("phasebench.h")) == set(cpp_lib._SIGNATURES) | {"pb_last_error"}
    assert set(_declarations("phasebench_testing.h")) == set(cpp_lib.TESTING_SIGNATURES)


def test_every_public_function_returns_a_status():
    """PB_OK or PB_ERROR from every call, the instruction-count bracket's included; pb_last_error alone returns the
    message."""
    declared = {name: kind for header in HEADERS for name, kind in _declarations(header).items()}
    assert len(declared) > 35
    others = {name: kind for name, kind in declared.items() if kind != "int" and name != "pb_last_error"}
    assert not others, f"functions that return no status: {others}"
    assert declared["pb_last_error"] == "const char*"


def test_every_extern_c_function_catches_everything():
    """Each C ABI function, in whichever source of cpp/src defines it, runs its body inside guarded(), which turns
    every exception into PB_ERROR; pb_last_error only returns a thread-local string's c_str(). No function of the
    ABI is defined outside an extern "C" block. The instruction-count bracket's calls that cannot fail (they hold no
    session, allocate nothing and throw nothing) return PB_OK outside guarded(), so that the bracket adds as few
    instructions as it can."""
    definitions, starts = {}, {}
    for path in sorted((CPP / "src").glob("*.cpp")):
        source = path.read_text()
        outside, *blocks = source.split('extern "C" {')
        for name in re.findall(r"^\w[\w\s*]*\b(pb_\w+)\([^)]*\)\s*\{", outside, re.M):
            starts[name] = f"{path.name}, outside extern \"C\""
        for block in blocks:
            for name, body in re.findall(r"^int (pb_\w+)\([^)]*\)\s*\{(.*?)^\}", block, re.M | re.S):
                assert name not in definitions, f"{name} defined twice"
                definitions[name], starts[name] = body, path.name
    cannot_fail = {"pb_count_start", "pb_count_begin", "pb_count_end", "pb_count_phases"}
    count = set(_declarations("phasebench_count.h"))
    assert cannot_fail < count
    guarded_ones = set(ALL_SIGNATURES) | (count - cannot_fail)
    assert set(starts) - {"pb_last_error"} == guarded_ones | cannot_fail, (
        f"C ABI functions this test cannot find, or misplaced: {starts}")
    unguarded = [f"{name} ({starts[name]})" for name in guarded_ones
                 if not re.match(r"\s*return (phasebench::)?guarded\(\[", definitions.get(name, ""))]
    assert not unguarded, f"not wrapped in guarded(): {unguarded}"
    for name in cannot_fail:
        body = definitions[name]
        assert "throw" not in body and body.rstrip().endswith("return PB_OK;"), f"{name}: {body}"


def test_the_library_builds_without_warnings(cpp_library):
    """phasebench/worker/build.py compiles with -Wall -Wextra and keeps whatever the compiler printed beside the library."""
    warnings = Path(cpp_library).parent / "warnings.txt"
    assert not warnings.exists(), f"the C++ build printed warnings:\n{warnings.read_text()}"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_plain_builds_its_own_file_and_leaves_the_library_alone(tmp_path):
    """`make plain` (what phasebench/worker/build.py's plain_program_path runs), dry-run with every output named:
    it writes the plain program's file and nothing else, and reads none of the library's sources."""
    outputs = {"OUT": tmp_path / "libphasebench.so", "TESTING_OUT": tmp_path / "libphasebench-testing.so",
               "PLAIN_OUT": tmp_path / "mnist_plain"}
    done = subprocess.run(["make", "--no-print-directory", "-n", "-B", "-C", str(CPP), "plain",
                           *(f"{name}={path}" for name, path in outputs.items())],
                          capture_output=True, text=True, check=True)
    commands = done.stdout
    assert re.findall(r"-o (\S+)", commands) == [str(outputs["PLAIN_OUT"])], commands
    for name in ("OUT", "TESTING_OUT"):
        assert str(outputs[name]) not in commands, f"make plain names the library's {name}:\n{commands}"
    assert "src/" not in commands and "unity" not in commands, commands
