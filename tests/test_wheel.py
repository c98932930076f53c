"""What a user installs is the product alone (pyproject.toml's packages): the wheel built from this tree holds
phasebench/ and its metadata, and none of the lab (lab/: the studies, their plugin and tests), the suite's cases
(bench/) or its tests. Built offline from a copy of the tree's Python folders, by setuptools' own backend (what `pip
wheel --no-build-isolation` calls), so the checkout's build/ and egg-info are left alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from phasebench.repository import ROOT

# Every top-level folder with Python in it, and what sits beside pyproject.toml: what package discovery could take.
COPIED = ("phasebench", "lab", "bench", "tests", "pyproject.toml", "conftest.py", "README.md")
BUILD = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"


def test_the_wheel_holds_the_product_alone(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "fixtures"))
        else:
            shutil.copy2(source, tree / name)
    out = tmp_path / "dist"
    done = subprocess.run([sys.executable, "-c", BUILD, str(out)], cwd=tree, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [wheel] = out.glob("phasebench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"phasebench", next(top for top in tops if top.endswith(".dist-info"))}, sorted(tops)
    assert "phasebench/plugin/__init__.py" in names and "phasebench/gate/count_spread.json" in names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "phasebench.plugin = phasebench.plugin" in entry_points and "lab" not in entry_points
