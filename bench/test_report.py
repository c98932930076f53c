"""bench.report on small saved results that these tests own (bench/fixtures/): complete.json has both
implementations on cpu and cuda with utilization and timer floors (method 2); missing.json has what a
machine without a C++ toolchain or GPU saved by method 1 (python on cpu only), without utilization keys."""

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from pytest_benchmark.utils import get_machine_id

from bench import report

FIXTURES = Path(__file__).parent / "fixtures"
COMPLETE, MISSING = FIXTURES / "complete.json", FIXTURES / "missing.json"
PUBLISHED_ROWS = ["Total Time", "Summed Time", "Step Count", "Data Loading", "Copying To Device", "Optimizer Init",
                  "Model Forward", "Loss Calculation", "Backward Pass", "Parameter Update", "Progress Printing"]


def run_report(capsys, *args) -> tuple[str, str]:
    assert report.main([str(arg) for arg in args]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def section(text: str, device: str) -> str:
    return text.split(f"### {device}\n", 1)[1].split("\n### ", 1)[0]


def markdown_rows(text: str, title_start: str) -> list[list[str]]:
    """The cells of the first Markdown table after the line starting with title_start."""
    block = text.split(title_start, 1)[1].split("\n\n", 2)[1]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in block.splitlines()]


def csv_blocks(text: str) -> list[list[list[str]]]:
    return [list(csv.reader(io.StringIO(block))) for block in text.strip().split("\n\n")]


def test_published_table_from_a_complete_result(capsys, tmp_path):
    out, err = run_report(capsys, COMPLETE, "--out", tmp_path)

    rows = markdown_rows(section(out, "cpu"), "**Training run on cpu")
    assert rows[0] == ["index", "Func", "Python(s)", "CPP(s)", "diff(s)", "Time Difference (%)"]
    assert [row[1] for row in rows[2:]] == PUBLISHED_ROWS + [
        "Process Total (spawn to exit)", "Worker Start-up", "Program Set-up", "Training Loop", "Worker Exit",
        "Free-running Total Time", "Free-running Training Loop", "Free-running Process Total", "Phase CPU (cores)"]
    assert [row[0] for row in rows[2:]] == [str(i) for i in range(20)]
    by_label = {row[1]: row[2:] for row in rows[2:]}
    # complete.json: Total Time (the program's, the benchmark's median) 12.5 s vs 5.0 s; (12.5 - 5) / 5 x 100 = 150 %
    assert by_label["Total Time"] == ["12.5000", "5.0000", "7.5000", "150.00"]
    assert by_label["Summed Time"] == ["9.1000", "4.1000", "5.0000", "121.95"]
    assert by_label["Step Count"] == ["938", "938", "0", "0.00"]
    assert by_label["Data Loading"] == ["4.5000", "0.2800", "4.2200", "1507.14"]
    assert by_label["Process Total (spawn to exit)"] == ["15.5000", "5.6000", "9.9000", "176.79"]
    assert by_label["Worker Start-up"] == ["2.5000", "0.5000", "2.0000", "400.00"]
    assert by_label["Free-running Total Time"] == ["12.0000", "4.8000", "7.2000", "150.00"]
    assert "not run" not in out

    table_path, chart_path = tmp_path / "complete.md", tmp_path / "complete.png"
    assert f"table: {table_path}" in err and f"chart: {chart_path}" in err
    assert table_path.read_text() + "\n" == out
    assert chart_path.read_bytes().startswith(b"\x89PNG") and chart_path.stat().st_size > 20_000


def test_per_phase_table_with_spread_and_utilization(capsys, tmp_path):
    out, _ = run_report(capsys, COMPLETE, "--out", tmp_path)

    cuda = markdown_rows(section(out, "cuda"), "**Per phase on cuda")
    assert cuda[0] == ["Phase", "Python median (ms)", "Python net (ms)", "Python IQR (ms)", "CPP median (ms)",
                       "CPP net (ms)", "CPP IQR (ms)", "diff (ms)", "Time Difference (%)",
                       "Python phase CPU, its thread (cores)", "CPP phase CPU, its thread (cores)",
                       "Python GPU busy in benchmark (%)", "CPP GPU busy in benchmark (%)",
                       "Python worker CPU in benchmark (cores)", "CPP worker CPU in benchmark (cores)"]
    rows = {row[0]: row[1:] for row in cuda[2:]}
    assert rows["Train Step"] == ["6.0000", "5.9998", "0.9000", "1.0000", "1.0000", "0.1500", "4.9998", "500.00",
                                  "1.00", "1.00", "31", "52", "1.00", "1.00"]
    # Bodies too short for the process clock: no all-threads column where no case recorded one.
    assert "Python phase CPU, all threads (cores)" not in cuda[0]
    # The difference is taken on the net medians: loss 0.030 - 0.0002 ms against 0.015 - 0.00003 ms.
    assert rows["Loss Calculation"][6:8] == ["0.0148", "99.06"]  # raw medians: 100.00
    assert "diff and Time Difference compare the net medians." in section(out, "cuda")
    # Nobody samples a GPU on cpu: no GPU columns there, the worker's CPU only.
    cpu_header = markdown_rows(section(out, "cpu"), "**Per phase on cpu")[0]
    assert "Python GPU busy in benchmark (%)" not in cpu_header and "CPP worker CPU in benchmark (cores)" in cpu_header


def test_missing_cases_are_shown_not_crashed_on(capsys, tmp_path):
    out, _ = run_report(capsys, MISSING, "--out", tmp_path)

    cpu = section(out, "cpu")
    run_rows = markdown_rows(cpu, "**Training run on cpu")
    assert run_rows[2][1:] == ["Summed Time", "9.1000", "not run", "—", "—"]
    labels = [row[1] for row in run_rows[2:]]
    # Method 1 timed the process, not the program: no Total Time, the process total instead.
    assert labels[:10] == PUBLISHED_ROWS[1:] and labels[10] == "Process Total (spawn to exit)"
    assert "Worker Start-up" not in labels  # saved before it was recorded
    assert "Measured by method 1 (bench/method.py): its Total Time is the process's, spawn to exit." in cpu
    assert "CPP: not run, no training_run in this result." in cpu
    phase_rows = markdown_rows(cpu, "**Per phase on cpu")
    assert phase_rows[0][-1] == "Time Difference (%)"  # no utilization recorded, no columns for it
    assert phase_rows[2][:5] == ["Data Loading", "4.8000", "—", "0.7200", "not run"]
    assert "CPP: not run, no per-phase benchmarks in this result." in cpu
    assert section(out, "cuda").strip() == "cuda: not run (no usable GPU: torch.cuda.is_available() is False)."
    assert (tmp_path / "missing.png").read_bytes().startswith(b"\x89PNG")


def test_csv(capsys, tmp_path):
    out, _ = run_report(capsys, COMPLETE, "--format", "csv", "--out", tmp_path)
    blocks = csv_blocks(out)
    assert [(block[0][0], block[1][0], block[0][1]) for block in blocks] == [
        ("device", "cpu", "index"), ("device", "cpu", "Phase"), ("device", "cuda", "index"), ("device", "cuda", "Phase")]
    run = {row[2]: row for row in blocks[0][1:]}
    assert [float(value) for value in run["Total Time"][3:]] == pytest.approx([12.5, 5.0, 7.5, 150.0])
    assert (tmp_path / "complete.csv").read_text() + "\n" == out

    out, err = run_report(capsys, MISSING, "--format", "csv", "--out", tmp_path)
    total = csv_blocks(out)[0][1]
    assert total[2:] == ["Summed Time", "9.1", "not run", "", ""]
    assert "cpu: CPP: not run, no training_run in this result" in err
    assert "cuda: not run (no usable GPU" in err


def test_newest_saved_result_by_default_and_by_number(capsys, tmp_path):
    saved = tmp_path / "storage" / get_machine_id()
    saved.mkdir(parents=True)
    shutil.copy(MISSING, saved / "0001_older.json")
    shutil.copy(COMPLETE, saved / "0002_newer.json")
    storage = ["--storage", f"file://{tmp_path / 'storage'}", "--out", tmp_path / "out"]

    out, _ = run_report(capsys, *storage)
    assert out.startswith("## 0002_newer.json")
    out, _ = run_report(capsys, "0001", *storage)
    assert out.startswith("## 0001_older.json")


@pytest.mark.parametrize("content, message", [
    ("{not json", "cannot read it as JSON"),
    (json.dumps({"machine_info": {}}), "not a pytest-benchmark result"),
])
def test_unreadable_result_is_one_line_naming_the_file(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        report.main([str(bad), "--out", str(tmp_path)])
    assert str(bad) in str(exit_info.value) and message in str(exit_info.value)

    with pytest.raises(SystemExit, match="no such file"):
        report.main([str(tmp_path / "absent.json"), "--storage", f"file://{tmp_path}", "--out", str(tmp_path)])
