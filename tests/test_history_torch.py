""".ci/history-torch: what cannot install, import or build against a release is recorded with its reason, and a
release recorded as run is not run again. The install is a fake (HISTORY_PIP) that writes a stand-in torch into
the release's virtual environment; the runs that succeed are the saved ones under results/history/torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from phasebench.repository import ROOT

SCRIPT = ROOT / ".ci/history-torch"

# The fake install: with "fail" in the version, pip's failure; with "none", nothing installed; else a torch of
# the kind the version's local label names (+cpu or +cu130), and a torchvision.
FAKE_PIP = r'''
python=$1 version=${2#torch==}
case $version in *fail*) echo "ERROR: No matching distribution found for torch==$version"; exit 1;; esac
case $version in *none*) exit 0;; esac
site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cuda=None; case $version in *+cu*) cuda='"13.0"';; esac
mkdir -p "$site/torch" "$site/torchvision"
printf '__version__ = "%s"\nclass version:\n    cuda = %s\n    hip = None\n' "$version" "$cuda" > "$site/torch/__init__.py"
: > "$site/torchvision/__init__.py"
'''


def history_torch(tmp_path: Path, *versions: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HISTORY_")}
    fake = tmp_path / "fake-pip"
    fake.write_text(FAKE_PIP, encoding="utf8")
    # The environment running these tests stands for the one the repository's .venv would be.
    env |= {"HISTORY_OUT": str(tmp_path / "out"), "HISTORY_VENVS": str(tmp_path / "venvs"),
            "HISTORY_PIP": f"bash {fake}", "HISTORY_VENV": str(Path(sys.executable).parents[1])}
    for version in versions:  # made here without pip (the script makes one only where none is)
        venv = tmp_path / "venvs" / f"torch-{version}"
        if not venv.exists():
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return subprocess.run(["bash", str(SCRIPT), *versions], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def states(tmp_path: Path) -> dict[str, list[str]]:
    lines = (tmp_path / "out/torch/runs-instructions.tsv").read_text(encoding="utf8").splitlines()
    assert lines[0].split("\t") == ["torch", "status", "seconds", "why"]
    found: dict[str, list[str]] = {}
    for line in lines[1:]:
        version, status, _, why = line.split("\t")
        found.setdefault(version, []).append(f"{status}: {why}")
    return found


def test_each_release_that_cannot_run_is_recorded_with_its_reason(tmp_path):
    done = history_torch(tmp_path, "1.0fail", "1.1none", "1.2.0+cpu", "1.3.0+cu130")
    assert done.returncode == 0, done.stderr + done.stdout
    found = states(tmp_path)
    assert found["1.0fail"] == ["install-failed: ERROR: No matching distribution found for torch==1.0fail"]
    assert found["1.1none"][0].startswith("import-failed: ModuleNotFoundError: No module named 'torch'")
    if "+cu" in subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                               capture_output=True, text=True).stdout:
        assert found["1.2.0+cpu"] == ["other-build: torch 1.2.0+cpu is a cpu build; .venv's is cuda"]
    # A stand-in torch of the right kind has no C++ headers: the library cannot be built against it.
    assert found["1.3.0+cu130"][0].startswith("build-failed: ")
    assert not list((tmp_path / "out/torch/instructions").glob("*.json"))
    logs = sorted(p.name for p in (tmp_path / "out/torch/logs/instructions").iterdir())
    assert logs == ["torch-1.0fail.log", "torch-1.1none.log", "torch-1.2.0+cpu.log", "torch-1.3.0+cu130.log"]


def test_a_release_recorded_as_run_is_not_run_again_and_a_failed_one_is(tmp_path):
    state = tmp_path / "out/torch/runs-instructions.tsv"
    state.parent.mkdir(parents=True)
    state.write_text("torch\tstatus\tseconds\twhy\n1.4.0\tran\t1\ttorch 1.4.0\n1.0fail\tinstall-failed\t1\tx\n",
                     encoding="utf8")
    done = history_torch(tmp_path, "1.4.0", "1.0fail")
    assert done.returncode == 0, done.stderr
    found = states(tmp_path)
    assert found["1.4.0"] == ["ran: torch 1.4.0"] and len(found["1.0fail"]) == 2
    assert "torch 1.4.0" not in done.stdout


def test_no_release_named_is_a_usage_error(tmp_path):
    done = history_torch(tmp_path)
    assert done.returncode == 2 and "history-torch [--time] VERSION" in done.stderr
