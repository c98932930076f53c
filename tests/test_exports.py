"""The production library exports the C functions of its public headers (cpp/include/phasebench.h and
phasebench_count.h) and nothing else: it is built with -fvisibility=hidden and cpp/exports.map. The testing build
(phasebench/worker/build.py's variant "testing") adds cpp/include/phasebench_testing.h's entry points."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from phasebench.repository import ROOT

CPP = ROOT / "cpp"
pytestmark = pytest.mark.skipif(shutil.which("nm") is None, reason="no nm (binutils)")


def _exported(library: str) -> set[str]:
    """The library's defined dynamic symbols (nm -D --defined-only), less what the linker defines in any library."""
    listed = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in listed.splitlines()} - {"_init", "_fini", "__bss_start", "_edata", "_end"}


def _public(*headers: str) -> set[str]:
    text = "".join((CPP / "include" / header).read_text() for header in headers)
    return set(re.findall(r"^(?:int|void|const char\*) (pb_\w+)\(", text, re.M))


PUBLIC = _public("phasebench.h", "phasebench_count.h")
TESTING = _public("phasebench_testing.h")


def test_the_production_library_exports_exactly_its_public_headers_functions(cpp_library):
    assert len(PUBLIC) > 30 and TESTING and not TESTING & PUBLIC
    exported = _exported(cpp_library)
    assert exported == PUBLIC, (f"exported but not in the public headers: {sorted(exported - PUBLIC)}; declared but "
                                f"not exported: {sorted(PUBLIC - exported)}")


def test_the_testing_build_adds_the_testing_entry_points(testing_library):
    testing = testing_library
    assert _exported(testing) == PUBLIC | TESTING
    warnings = Path(testing).parent / "warnings.txt"
    assert not warnings.exists(), f"the testing build printed warnings:\n{warnings.read_text()}"
