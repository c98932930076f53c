"""phasebench/report/headline.py: the headline table of a training run per device (`python -m phasebench.report FILE
--headline`), from the report's own fixtures and from the GPU preview's saved run (results/gpu-preview/), whose
table the README shows (tests/test_docs.py checks it there)."""

from __future__ import annotations

import copy
import json
import tarfile
from pathlib import Path

from phasebench.report import cli
from phasebench.report.headline import GPU_BUSY, gpu_busy, headline_table
from phasebench.repository import ROOT
from phasebench.saved import SavedResult
from tests.test_report import COMPLETE, MISSING, markdown_rows

PREVIEW_PACK = ROOT / "results/gpu-preview/run2-setdevice-patched.tar.xz"
PREVIEW_RUN = "run2-setdevice-patched/h-train.json"  # the README's GPU table
PREVIEW_PHASES = "run2-setdevice-patched/h-phases.json"


def unpacked(archive: Path, member: str, folder: Path) -> Path:
    """One member of a results/ pack, extracted under `folder` at its path in the pack."""
    with tarfile.open(archive) as tar:
        tar.extract(member, folder, filter="data")
    return folder / member


def headline_rows(text: str, device: str) -> list[list[str]]:
    """The headline table of `device` in the command's output: its header, then its rows (the alignment row
    dropped)."""
    rows = markdown_rows(text, f"**Headline on {device}")
    return [rows[0]] + rows[2:]


def test_the_preview_renders_its_headline(tmp_path, capsys):
    saved = unpacked(PREVIEW_PACK, PREVIEW_RUN, tmp_path)
    assert cli.main([str(saved), "--headline", "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert "commit 24f072d6 (dirty); method 4" in out and "SYNTHETIC" in out
    assert headline_rows(out, "cuda") == [
        ["one epoch on NVIDIA H200 (s)", "Python", "C++", "Python / C++"],
        ["Total Time", "15.00", "2.89", "5.19× slower"],
        ["Data Loading", "9.87", "0.57", "17.17× slower"],
        ["Model Forward", "1.87", "0.68", "2.76× slower"],
        ["Backward Pass", "1.91", "1.03", "1.85× slower"],
        ["Parameter Update", "0.48", "0.25", "1.96× slower"],
        ["Free-running Total Time", "12.45", "2.89", "4.31× slower"],
        [GPU_BUSY, "1–2 %", "10–11 %", "—"]]
    assert not (tmp_path / "report").exists()  # the headline writes no files


def test_each_device_has_its_headline_and_the_gpu_row_only_where_sampled():
    result = SavedResult.load(COMPLETE)
    cpu, cuda = headline_table(result, "cpu"), headline_table(result, "cuda")
    assert [row[0] for row in cpu.rows] == ["Total Time", "Data Loading", "Model Forward", "Backward Pass",
                                             "Parameter Update", "Free-running Total Time"]
    assert cpu.rows[0] == ["Total Time", 12.5, 5.0, "2.50× slower"]
    assert cpu.columns[0][0] == "one epoch on cpu (s)" and "median of 3 rounds" in cpu.title
    assert cuda.columns[0][0] == "one epoch on Example GPU (s)"
    assert cuda.rows[-1] == [GPU_BUSY, "31 %", "52 %", None]  # no free-running sample: the timed run's alone


def test_missing_cases_and_method_1_say_what_they_lack():
    raw = json.loads(COMPLETE.read_text())
    raw["benchmarks"] = [bench for bench in raw["benchmarks"] if bench["name"] != "test_training_run[cpp-cuda]"]
    cuda = headline_table(SavedResult.from_json(raw, "no-cpp.json"), "cuda")
    assert cuda.rows == [] and cuda.notes == ["no training run of cpp on cuda in this result"]
    # MISSING holds python alone, saved by method 1 (no Total Time of the program's own).
    assert headline_table(SavedResult.load(MISSING), "cpu").notes == ["no training run of cpp on cpu in this result"]
    method_1 = copy.deepcopy(json.loads(COMPLETE.read_text()))
    del method_1["machine_info"]["phasebench"]["method"]
    cpu = headline_table(SavedResult.from_json(method_1, "method-1.json"), "cpu")
    assert cpu.rows[0][0] == "Data Loading" and "measured by method 1" in cpu.notes[0]


def test_the_gpu_busy_range_rounds_each_run():
    result = SavedResult.load(COMPLETE)
    bench = result.published()[("training_run", "python", "cuda")]
    assert gpu_busy(bench) == "31 %"
    bench.info.free_running["gpu"] = {"utilization_pct": {"mean": 28.6}}
    assert gpu_busy(bench) == "29–31 %"
    bench.info.gpu = None
    bench.info.free_running["gpu"] = None
    assert gpu_busy(bench) is None
