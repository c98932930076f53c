"""phasebench.report on small saved results that these tests own (tests/fixtures/): complete.json has both
implementations on cpu and cuda with utilization and timer floors (method 2); missing.json has what a
machine without a C++ toolchain or GPU saved by method 1 (python on cpu only), without utilization keys;
graphs-before-step-in-run.json has python-graphs and cpp-graphs on cuda as the tree saved them before the training
run's in-loop total of a whole step was named step_in_run (method 3, phase_total_s["train_step"])."""

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from pytest_benchmark.utils import get_machine_id

from phasebench.data import SYNTHETIC_WARNING
from phasebench.report import charts, cli, findings, tables
from phasebench.report.cases import PHASES
from phasebench.repository import ROOT
from phasebench.saved import SavedResult

FIXTURES = Path(__file__).parent / "fixtures"
COMPLETE, MISSING = FIXTURES / "complete.json", FIXTURES / "missing.json"
GRAPHS_BEFORE_STEP_IN_RUN = FIXTURES / "graphs-before-step-in-run.json"
PUBLISHED_ROWS = ["Total Time", "Summed Time", "Step Count", "Data Loading", "Copying To Device", "Optimizer Init",
                  "Model Forward", "Loss Calculation", "Backward Pass", "Parameter Update", "Progress Printing"]


def typed(result: dict, name: str = "result.json") -> SavedResult:
    """A result these tests built or changed, read as a saved file is."""
    return SavedResult.from_json(result, name)


def run_report(capsys, *args) -> tuple[str, str]:
    assert cli.main([str(arg) for arg in args]) == 0
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


# The facts of a line of prose: what it names and the figures it gives, whatever words join them.
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
RATIO = re.compile(r"([\w-]+/[\w-]+) (\d+\.\d+)×")
FIGURE = re.compile(r"([\w-]+) (\d+\.\d+) ms")


def line_naming(lines, *names: str) -> str:
    """The one line (of a text, or of a list of lines) that names every one of `names`."""
    lines = lines.splitlines() if isinstance(lines, str) else lines
    found = [line for line in lines if all(name in line for name in names)]
    assert len(found) == 1, f"{len(found)} lines name {names}: {found or lines}"
    return found[0]


def numbers(line: str) -> list[float]:
    """The figures of a line, in order (a percentage without its sign)."""
    return [float(number) for number in NUMBER.findall(line)]


def ratios(line: str) -> dict[str, float]:
    """{"a/b": the ratio} of every "a/b R×" in a line."""
    return {pair: float(value) for pair, value in RATIO.findall(line)}


def test_published_table_from_a_complete_result(capsys, tmp_path):
    out, err = run_report(capsys, COMPLETE, "--out", tmp_path)

    rows = markdown_rows(section(out, "cpu"), "**Training run on cpu")
    assert rows[0] == ["index", "Func", "Python(s)", "CPP(s)", "diff(s)", "Python / CPP"]
    assert [row[1] for row in rows[2:]] == PUBLISHED_ROWS + [
        "Process Total (spawn to exit)", "Worker Start-up", "Program Set-up", "Training Loop", "Worker Exit",
        "Free-running Total Time", "Free-running Training Loop", "Free-running Process Total", "Phase CPU (cores)"]
    assert [row[0] for row in rows[2:]] == [str(i) for i in range(20)]
    by_label = {row[1]: row[2:] for row in rows[2:]}
    # complete.json: Total Time (the program's, the benchmark's median) 12.5 s vs 5.0 s: 2.50× slower, written as the
    # terminal writes every ratio (the published table's percent, 150 %, is the same figure)
    assert by_label["Total Time"] == ["12.5000", "5.0000", "7.5000", "2.50× slower"]
    assert by_label["Summed Time"] == ["9.1000", "4.1000", "5.0000", "2.22× slower"]
    assert by_label["Step Count"] == ["938", "938", "0", "1.00× the same"]
    assert by_label["Data Loading"] == ["4.5000", "0.2800", "4.2200", "16.07× slower"]
    assert by_label["Process Total (spawn to exit)"] == ["15.5000", "5.6000", "9.9000", "2.77× slower"]
    assert by_label["Worker Start-up"] == ["2.5000", "0.5000", "2.0000", "5.00× slower"]
    assert by_label["Free-running Total Time"] == ["12.0000", "4.8000", "7.2000", "2.50× slower"]
    assert "not run" not in out

    table_path, chart_path = tmp_path / "complete.md", tmp_path / "complete.png"
    assert f"table: {table_path}" in err and f"chart: {chart_path}" in err
    assert table_path.read_text() + "\n" == out
    assert chart_path.read_bytes().startswith(b"\x89PNG") and chart_path.stat().st_size > 20_000


def test_per_phase_table_with_spread_and_utilization(capsys, tmp_path):
    out, _ = run_report(capsys, COMPLETE, "--out", tmp_path)

    cuda = markdown_rows(section(out, "cuda"), "**Per phase on cuda")
    assert cuda[0] == ["Phase", "Python median (ms)", "Python net (ms)", "Python IQR (ms)", "CPP median (ms)",
                       "CPP net (ms)", "CPP IQR (ms)", "diff (ms)", "Python / CPP",
                       "Python phase CPU, its thread (cores)", "CPP phase CPU, its thread (cores)",
                       "Python GPU busy in benchmark (%)", "CPP GPU busy in benchmark (%)",
                       "Python worker CPU in benchmark (cores)", "CPP worker CPU in benchmark (cores)"]
    rows = {row[0]: row[1:] for row in cuda[2:]}
    assert rows["Train Step"] == ["6.0000", "5.9998", "0.9000", "1.0000", "1.0000", "0.1500", "4.9998", "6.00× slower",
                                  "1.00", "1.00", "31", "52", "1.00", "1.00"]
    # Bodies too short for the process clock: no all-threads column where no case recorded one.
    assert "Python phase CPU, all threads (cores)" not in cuda[0]
    # The difference is taken on the net medians: loss 0.030 - 0.0002 ms against 0.015 - 0.00003 ms.
    assert rows["Loss Calculation"][6:8] == ["0.0148", "1.99× slower"]  # raw medians: 2.00×
    assert "net" in line_naming(section(out, "cuda"), "diff and Python / CPP compare")
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
    assert "process" in line_naming(cpu, "method 1", "Total Time")
    line_naming(cpu, "CPP", "not run", "training_run")
    phase_rows = markdown_rows(cpu, "**Per phase on cpu")
    assert phase_rows[0][-1] == "Python / CPP"  # no utilization recorded, no columns for it
    assert phase_rows[2][:5] == ["Data Loading", "4.8000", "—", "0.7200", "not run"]
    line_naming(cpu, "CPP", "not run", "per-phase benchmarks")
    # cuda did not run, for the reason the result saved.
    cuda = section(out, "cuda").strip().splitlines()
    assert len(cuda) == 1 and "not run" in cuda[0] and "no usable GPU: torch.cuda.is_available() is False" in cuda[0]
    assert (tmp_path / "missing.png").read_bytes().startswith(b"\x89PNG")


def test_csv(capsys, tmp_path):
    out, _ = run_report(capsys, COMPLETE, "--format", "csv", "--out", tmp_path)
    blocks = csv_blocks(out)
    assert [(block[0][0], block[1][0], block[0][1]) for block in blocks] == [
        ("device", "cpu", "index"), ("device", "cpu", "Phase"), ("device", "cuda", "index"), ("device", "cuda", "Phase")]
    run = {row[2]: row for row in blocks[0][1:]}
    assert [float(value) for value in run["Total Time"][3:6]] == pytest.approx([12.5, 5.0, 7.5])
    assert run["Total Time"][6] == "2.50× slower"
    assert (tmp_path / "complete.csv").read_text() + "\n" == out

    out, err = run_report(capsys, MISSING, "--format", "csv", "--out", tmp_path)
    total = csv_blocks(out)[0][1]
    assert total[2:] == ["Summed Time", "9.1", "not run", "", ""]
    line_naming(err, "cpu", "CPP", "not run", "training_run")
    line_naming(err, "cuda", "not run", "no usable GPU")


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
    ("{not json", "not JSON"),
    (json.dumps({"machine_info": {}}), "not a pytest-benchmark result"),
])
def test_unreadable_result_is_one_line_naming_the_file(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([str(bad), "--out", str(tmp_path)])
    assert str(bad) in str(exit_info.value) and message in str(exit_info.value)

    with pytest.raises(SystemExit, match="no such file"):
        cli.main([str(tmp_path / "absent.json"), "--storage", f"file://{tmp_path}", "--out", str(tmp_path)])


# -- every implementation and workload (docs/implementations.md#implementations-and-workloads) ----------------------

def phase_bench(phase: str, impl: str, median_ms: float, device: str = "cpu", width: int = 1, batch_size: int = 64,
                **info) -> dict:
    workload = "" if (width, batch_size) == (1, 64) else f"w{width}-b{batch_size}"
    suffix = f"-{workload}" if workload else ""
    seconds = median_ms / 1e3
    return {"name": f"test_phase[{phase}-{impl}-{device}{suffix}]",
            "fullname": f"bench/test_phases.py::test_phase[{phase}-{impl}-{device}{suffix}]",
            "group": phase, "stats": {"median": seconds, "iqr": 0.0, "q1": seconds, "q3": seconds, "rounds": 20},
            "extra_info": {"phase": phase, "implementation": impl, "device": device, "width": width,
                           "batch_size": batch_size, "workload": workload, "timer_floor_s": 0.0} | info}


def variants_result() -> dict:
    """A small run of every implementation at two workloads, with made-up medians the sentences must echo."""
    benches = [phase_bench("data_loading", impl, ms) for impl, ms in
               (("python", 4.8), ("cpp", 0.3), ("python-tensor", 1.8), ("python-batched", 0.006),
                ("cpp-batched", 0.003), ("python-workers", 4.0), ("python-foreach", 4.8), ("python-fused", 4.8))]
    benches += [phase_bench("train_step", impl, ms, width=w, batch_size=b) for impl, ms, w, b in
                (("python", 10.0, 1, 64), ("cpp", 5.0, 1, 64), ("python-batched", 5.5, 1, 64),
                 ("cpp-batched", 5.0, 1, 64), ("python", 40.0, 4, 64), ("cpp", 32.0, 4, 64),
                 ("python-batched", 33.0, 4, 64), ("cpp-batched", 32.0, 4, 64))]
    benches += [phase_bench("param_update", impl, ms) for impl, ms in
                (("python", 0.28), ("cpp", 0.07), ("python-foreach", 0.1), ("python-fused", 0.05))]
    benches.append({"name": "test_training_run[python-batched-cpu]", "fullname": "x::test_training_run[python-batched-cpu]",
                    "group": "training_run", "stats": {"median": 6.0, "iqr": 0.0, "q1": 6.0, "q3": 6.0, "rounds": 1},
                    "extra_info": {"phase": "training_run", "implementation": "python-batched", "device": "cpu",
                                   "width": 1, "batch_size": 64, "peak_rss_median_bytes": 900 * 2**20,
                                   "peak_device_median_bytes": None, "epochs": 1, "rounds": 1, "steps": 938,
                                   "summed_median_s": 5.0, "phase_total_s": {}, "free_running": {"total_s": 5.9,
                                                                                                  "loop_s": 5.0}}})
    return {"datetime": "2026-11-30T04:00:00", "machine_info": {"phasebench": {"method": 2}}, "benchmarks": benches}


def test_findings_are_drawn_from_the_run():
    cases = typed(variants_result()).cases
    found = findings.findings(cases, "cpu")
    # The data-loading gap 4.8 - 0.3 = 4.5 ms: the design 4.8 - 1.8 = 3.0 ms (67%), the language 1.5 ms (33%).
    loading = line_naming(found, "python-tensor", "cpp")
    assert numbers(loading) == [4.8, 0.3, 4.5, 1.8, 3.0, 67, 1.5, 33], loading
    # Batching: data_loading 800× and 100× less, train_step 1.82× faster and 1.00× the same.
    python_batched = line_naming(found, "python-batched", "data_loading", "train_step")
    assert numbers(python_batched) == [4.8, 0.006, 800, 10.0, 5.5, 1.82] and "less" in python_batched, python_batched
    cpp_batched = line_naming(found, "cpp-batched", "data_loading", "train_step")
    assert numbers(cpp_batched) == [0.3, 0.003, 100, 5.0, 5.0, 1.0], cpp_batched
    update = line_naming(found, "param_update", "python-fused")
    assert dict(FIGURE.findall(update)) == {"python": "0.2800", "python-foreach": "0.1000", "python-fused": "0.0500",
                                            "cpp": "0.0700"}, update
    # Every variant against its reference, generic over the registry, per workload.
    wide = line_naming(found, "train_step", "width 4")
    assert ratios(wide) == {"python/cpp": 1.25, "python-batched/cpp-batched": 1.03, "cpp-batched/cpp": 1.0}, wide
    assert numbers(wide)[2:] == [1.25, 40.0, 32.0, 1.03, 33.0, 32.0, 1.0, 32.0, 32.0], wide  # after width and batch


def test_every_implementation_table_and_memory(tmp_path):
    path = tmp_path / "variants.json"
    path.write_text(json.dumps(variants_result()))
    out, _ = cli.render(path, typed(variants_result()), "markdown")
    rows = markdown_rows(out, "**Every implementation on cpu, width 1, batch 64")
    header = rows[0]
    assert header[:4] == ["Phase", "python (ms)", "cpp (ms)", "python-tensor (ms)"] and "python-fused (ms)" in header
    assert {"python / cpp", "python-tensor / cpp", "python-batched / cpp-batched", "cpp-batched / cpp",
            "python-workers / python", "python-foreach / python", "python-fused / python"} <= set(header)
    loading = {name: value for name, value in zip(header, rows[2])}
    assert loading["Phase"] == "Data Loading" and loading["python-tensor / cpp"] == "6.00"
    memory = markdown_rows(out, "**Peak memory of the training runs on cpu")
    assert memory[2] == ["python-batched", "width 1, batch 64", "900"]
    assert "**Findings on cpu**" in out


def test_workload_chart(tmp_path):
    path = tmp_path / "variants.json"
    path.write_text(json.dumps(variants_result()))
    assert cli.main([str(path), "--out", str(tmp_path)]) == 0
    chart = tmp_path / "variants-workloads.png"
    assert chart.read_bytes().startswith(b"\x89PNG") and chart.stat().st_size > 20_000
    # A result of the published workload alone has one point per line: nothing to compare, no chart.
    assert not charts.scaling_chart(tmp_path / "complete-workloads.png", typed(json.loads(COMPLETE.read_text())), "t")
    assert not (tmp_path / "complete-workloads.png").exists()


# -- the answer at a glance (pytest's terminal summary, phasebench/plugin/__init__.py) -------------------------------------------

def answer_rows(sections, title: str) -> dict[str, list[str]]:
    """{first cell: the other cells} of one section of findings.answer; ratio cells keep their words together."""
    lines = dict(sections)[title]
    return {line.split("  ")[0].strip(): [cell.strip() for cell in line.split("  ")[1:] if cell.strip()]
            for line in lines if line}


def test_direction_in_words():
    assert findings.direction(2.414) == "2.41× slower"
    assert findings.direction(0.96) == "1.04× faster"
    assert findings.direction(0.9991) == "1.00× the same"


def test_the_answer_per_device_with_every_ratio_and_its_direction():
    result = json.loads(COMPLETE.read_text())
    for bench in result["benchmarks"]:  # make C++ the slower at forward on cpu
        info = bench["extra_info"]
        if (info["phase"], info["implementation"], info["device"]) == ("forward", "cpp", "cpu"):
            bench["stats"]["median"] = 0.0035
    sections = findings.answer(typed(result))
    assert [title for title, _ in sections] == ["phasebench: the answer on cpu", "phasebench: the answer on cuda"]
    cpu = answer_rows(sections, "phasebench: the answer on cpu")
    assert cpu["phase: median per call"] == ["python (ms)", "cpp (ms)", "python / cpp"]
    assert cpu["data_loading"] == ["4.8000", "0.3000", "16.00× slower"]
    assert cpu["forward"] == ["2.8000", "3.5000", "1.25× faster"]
    assert set(cpu) >= {phase.name for phase in PHASES}
    # The training run's published rows, in seconds, the same way.
    assert cpu["Total Time"] == ["12.5000", "5.0000", "2.50× slower"]
    assert cpu["Summed Time"] == ["9.1000", "4.1000", "2.22× slower"]
    assert cpu["Data Loading"] == ["4.5000", "0.2800", "16.07× slower"]
    assert cpu["Process Total (spawn to exit)"] == ["15.5000", "5.6000", "2.77× slower"]
    # On cpu a note says why copy_to_device's per-call and in-run ratios differ; on cuda the copy is real.
    lines = dict(sections)
    assert findings.COPY_ON_CPU_NOTE_LINES[0] in lines["phasebench: the answer on cpu"]
    assert findings.COPY_ON_CPU_NOTE_LINES[0] not in lines["phasebench: the answer on cuda"]
    # The verdict comes first (wrapped over two lines): the Total Time ratio, its direction and its medians (1 epoch,
    # median of 3 runs), then the phase that makes most of the gap, with its seconds and share.
    verdict = " ".join(line.strip() for line in lines["phasebench: the answer on cpu"][:2])
    assert verdict.startswith("Verdict:") and "Total Time" in verdict and "2.50× slower" in verdict, verdict
    assert verdict.index("python") < verdict.index("cpp") < verdict.index("data_loading"), verdict
    assert numbers(verdict) == [2.5, 12.5, 5.0, 1, 3, 4.22, 7.5, 56], verdict
    assert not lines["phasebench: the answer on cpu"][2].strip()  # a blank line, then the table


def test_the_answer_has_one_row_per_other_implementation_within_100_columns():
    """Beside the published pair, every other implementation is one row with its ratio to its reference, so that an
    --impl all run stays readable in a terminal."""
    from phasebench import registry

    result = json.loads(COMPLETE.read_text())
    variants = []
    for impl in registry.NAMES:
        if impl in ("python", "cpp"):
            continue
        for bench in result["benchmarks"]:
            if bench["extra_info"]["implementation"] == "python":  # each variant twice as fast as python
                copy = json.loads(json.dumps(bench))
                copy["extra_info"].update(implementation=impl, reference=registry.get(impl).reference)
                copy["stats"]["median"] /= 2
                variants.append(copy)
    sections = findings.answer(typed(result | {"benchmarks": result["benchmarks"] + variants}))
    lines = dict(sections)["phasebench: the answer on cpu"]
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    cpu = answer_rows(sections, "phasebench: the answer on cpu")
    assert cpu["phase: median per call"] == ["python (ms)", "cpp (ms)", "python / cpp"]
    assert cpu["data_loading"] == ["4.8000", "0.3000", "16.00× slower"]
    assert cpu["implementation"] == ["against", "data_loading", "train_step", "Total Time"]
    # python-tensor is compared with cpp: half of python's data_loading, 4.8 / 2 / 0.3 = 8×
    step = {bench["extra_info"]["implementation"]: bench["stats"]["median"] for bench in result["benchmarks"]
            if (bench["extra_info"]["phase"], bench["extra_info"]["device"]) == ("train_step", "cpu")}
    assert cpu["python-tensor"] == ["cpp", "8.00× slower", findings.direction(step["python"] / 2 / step["cpp"]),
                                    "1.25× slower"]
    assert cpu["python-foreach"] == ["python", "2.00× faster", "2.00× faster", "2.00× faster"]
    assert sum(line.split("  ")[0] in registry.NAMES for line in lines) == len(registry.NAMES) - 2


def test_chart_shows_every_direction_names_what_was_not_measured_and_leaves_out_a_device_that_did_not_run(tmp_path):
    result = json.loads(COMPLETE.read_text())
    kept = []
    for bench in result["benchmarks"]:
        info = bench["extra_info"]
        case = (info["phase"], info["implementation"], info["device"])
        if info["device"] == "cuda" or case == ("loss", "python", "cpu") or info["phase"] == "progress_print":
            continue  # cuda did not run; python's loss and both progress_print cases were not measured
        if case == ("forward", "cpp", "cpu"):
            bench["stats"].update(median=0.0035, q1=0.0034, q3=0.0036)  # C++ the slower: Python / C++ 0.80
        kept.append(bench)
    result["benchmarks"] = kept
    result["machine_info"]["phasebench"]["gpu_unavailable"] = "no usable GPU: test"
    drawn = charts.chart(tmp_path / "chart.png", typed(result), "t")
    assert drawn["panels"] == ["cpu: per phase, one call", "cpu: training run, whole program and each phase's total"]
    assert "cuda: not run (no usable GPU: test)" in drawn["caption"]
    annotations = dict(drawn["annotations"][:len(PHASES)])  # the per-phase panel
    assert annotations["Data Loading"] == "16.00× slower"
    assert annotations["Model Forward"] == "1.25× faster"
    assert annotations["Loss Calculation"] == "Python: not measured"
    assert annotations["Progress Printing"] == "Python and C++: not measured"
    assert ("Total Time", "2.50× slower") in drawn["annotations"]  # the training run's rows
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG")


def test_synthetic_data_is_a_warning_in_the_report(tmp_path):
    result = json.loads(COMPLETE.read_text())
    assert "SYNTHETIC" not in tables.describe(COMPLETE, typed(result))
    result["machine_info"]["phasebench"]["dataset"] = "synthetic"
    assert "WARNING" in line_naming(tables.describe(COMPLETE, typed(result)), SYNTHETIC_WARNING)
    assert "apt-get install dataset-fashion-mnist" in SYNTHETIC_WARNING


def test_a_testing_run_is_named_in_the_report():
    """The slowed phase of a testing run: method 3 saved it as test_slow_phase, later methods in `testing`."""
    result = json.loads(COMPLETE.read_text())
    assert "TEST KNOB" not in tables.describe(COMPLETE, typed(result))
    result["machine_info"]["phasebench"] |= {"method": 3, "test_slow_phase": "python/forward:5ms"}
    line_naming(tables.describe(COMPLETE, typed(result)), "TEST KNOB", "python/forward:5ms")
    del result["machine_info"]["phasebench"]["test_slow_phase"]
    result["machine_info"]["phasebench"] |= {"method": 4, "testing": {"slow_phase": "cpp/loss:2ms", "fault": None}}
    line_naming(tables.describe(COMPLETE, typed(result)), "TEST KNOB", "cpp/loss:2ms")


# -- filling the device: every training loop, concurrent jobs, ensembles ---------------------------------------

def fill_result() -> dict:
    """Made-up cuda results of the loops, concurrent jobs and ensembles that the tables must echo."""
    def case(name: str, group: str, median_s: float, impl: str, **info) -> dict:
        return {"name": name, "fullname": f"x::{name}", "group": group,
                "stats": {"median": median_s, "iqr": 0.0, "q1": median_s, "q3": median_s, "rounds": 1},
                "extra_info": {"implementation": impl, "device": "cuda", "width": 1, "batch_size": 64, "workload": "",
                               "phase": group} | info}
    benches = [case(f"test_concurrent_jobs[{impl}-cuda-{n}]", f"concurrent_jobs-{n}", 60_000 * n / ips, impl, jobs=n,
                    threads_per_job=16, images_per_s=ips, slowdown=slowdown, job_loop_s=[60_000 / ips] * n,
                    job_cpu_cores=[0.9] * n, trained="1 epoch(s) free-running", mps={"running": n == 4},
                    gpu={"utilization_pct": {"mean": 10.0 * n}})
               for impl, n, ips, slowdown in (("python", 1, 1000.0, [1.0]), ("python", 2, 1500.0, [1.3, 1.4]),
                                             ("cpp", 1, 3000.0, [1.0]), ("cpp", 4, 3000.0, [4.0, 4.0, 4.0, 4.1]))]
    benches += [case(f"test_ensemble[{impl}-cuda-{m}]", f"ensemble-{m}", ms / 1e3, impl, models=m)
                for impl, m, ms in (("python", 1, 2.0), ("python", 16, 32.0), ("python-vmap", 1, 2.5),
                                    ("python-vmap", 16, 4.8), ("cpp", 16, 16.0))]
    benches += [case(f"test_training_run[{impl}-cuda]", "training_run", loop, impl, epochs=1, rounds=1, steps=938,
                     summed_median_s=loop, phase_total_s={}, free_running={"total_s": loop, "loop_s": loop, "one_shot_s": one_shot},
                     gpu={"utilization_pct": {"mean": busy}})
                for impl, loop, one_shot, busy in (("python", 20.0, None, 2.0), ("cpp", 10.0, None, 10.0),
                                                   ("python-graphs", 1.0, 0.2, 80.0))]
    return {"datetime": "2026-11-30T04:00:00", "machine_info": {"phasebench": {"method": 2}}, "benchmarks": benches}


def test_loops_concurrent_jobs_and_ensembles_are_tabled(tmp_path):
    out, _ = cli.render(tmp_path / "fill.json", typed(fill_result()), "markdown")
    loops = {row[0]: row for row in markdown_rows(out, "**The free-running training loop of every implementation on cuda")}
    assert loops["python-graphs"][2:] == ["1.000", "0.200", "0.800", "10.00", "80", "—"]
    assert loops["python"][5] == "0.50" and loops["cpp"][5] == "1.00"
    jobs = {(row[0], row[2]): row for row in markdown_rows(out, "**Concurrent jobs on cuda")}
    assert jobs["python", "2"][4:] == ["1500", "1.50", "1.35", "40.00", "0.90", "20", "not running"]
    assert jobs["cpp", "4"][5:7] == ["1.00", "4.00"] and jobs["cpp", "4"][-1] == "running"
    ensembles = {(row[0], row[2]): row for row in markdown_rows(out, "**Ensembles on cuda")}
    # python-vmap, 16 models: 4.8 ms a step, 0.3 ms a model-step, 0.12 of its own 1-model step, 0.15 of the loop's.
    assert ensembles["python-vmap", "16"][3:7] == ["4.800", "0.300", "0.12", "0.15"]
    assert ensembles["python", "16"][5:7] == ["1.00", "2.00"]  # a loop stays flat; python's reference is cpp's loop
    assert ensembles["cpp", "16"][5] == "—"  # no 1-model case of cpp in this result


def test_page_faults_are_tabled_where_implementations_differ(tmp_path):
    result = json.loads(COMPLETE.read_text())
    faults = {("forward", "python"): 1.0, ("forward", "cpp"): 980.0, ("loss", "python"): 0.0, ("loss", "cpp"): 1.0}
    for bench in result["benchmarks"]:
        info = bench["extra_info"]
        if info.get("device") == "cpu" and (info.get("phase"), info.get("implementation")) in faults:
            info["minor_faults_per_round"] = faults[info["phase"], info["implementation"]]
        if info.get("device") == "cpu" and info.get("phase") == "training_run":
            info["free_running_minor_faults_per_step"] = {"python": 0.6, "cpp": 1040.0}[info["implementation"]]
    out, _ = cli.render(tmp_path / "faults.json", typed(result), "markdown")
    cpu = section(out, "cpu")
    rows = {row[0]: row for row in markdown_rows(cpu, "**Page faults on cpu where implementations differ")}
    assert rows["forward"][2:] == ["1.0", "980.0"]
    assert rows["training_run (per step, free-running)"][2:] == ["0.6", "1040.0"]
    assert "loss" not in rows  # one fault apart: alike
    assert "alike in every implementation (within one fault or half): loss" in cpu


# -- step_in_run: the training run's in-loop total of a step replayed whole (phasebench.spec.STEP_IN_RUN) -----------

def test_step_in_run_is_read_from_results_saved_under_its_old_name(tmp_path):
    """Results saved before step_in_run had its name recorded it as phase_total_s["train_step"]: the report reads
    that key through phasebench.spec.run_total and shows it as Step In Run, as it shows a result with the new key."""
    old = json.loads(GRAPHS_BEFORE_STEP_IN_RUN.read_text())
    runs = [bench for bench in old["benchmarks"] if bench["extra_info"]["phase"] == "training_run"]
    assert runs and all("train_step" in bench["extra_info"]["phase_total_s"] and "step_in_run" not in
                        bench["extra_info"]["phase_total_s"] for bench in runs)
    out, _ = cli.render(GRAPHS_BEFORE_STEP_IN_RUN, typed(old), "markdown")

    rows = markdown_rows(section(out, "cuda"), "**The timed training run of every implementation on cuda")
    header = rows[0]
    assert header[:5] == ["Implementation", "Workload", "Steps", "Total Time (s)", "Summed Time (s)"]
    assert "Step In Run (s)" in header and "Graph Capture (s)" in header and "Train Step (s)" not in header
    by_impl = {row[0]: dict(zip(header, row)) for row in rows[2:]}
    assert by_impl["python-graphs"]["Step In Run (s)"] == "0.900" and by_impl["cpp-graphs"]["Step In Run (s)"] == "0.750"
    assert by_impl["python-graphs"]["Graph Capture (s)"] == "0.400"
    # train_step stays the name of the per-phase case, whose median is per call.
    phases = {row[0]: row[1:] for row in markdown_rows(section(out, "cuda"), "**Every implementation on cuda")[2:]}
    assert phases["Train Step"] == ["1.2000", "1.0000", "1.20"]
    # The answer at a glance (pytest's terminal summary) reads it the same way.
    cuda = answer_rows(findings.answer(typed(old)), "phasebench: the answer on cuda")
    assert cuda["Step In Run"] == ["0.9000", "0.7500", "1.20× slower"]
    assert cuda["train_step"] == ["1.2000", "1.0000", "1.20× slower"]

    # The same result saved under the new key reads alike.
    new = json.loads(GRAPHS_BEFORE_STEP_IN_RUN.read_text())
    for bench in new["benchmarks"]:
        totals = bench["extra_info"].get("phase_total_s")
        if totals:
            totals["step_in_run"] = totals.pop("train_step")
    assert cli.render(GRAPHS_BEFORE_STEP_IN_RUN, typed(new), "markdown")[0] == out
    assert findings.answer(typed(new)) == findings.answer(typed(old))
    # And the command takes it, charts included.
    assert cli.main([str(GRAPHS_BEFORE_STEP_IN_RUN), "--out", str(tmp_path)]) == 0
    written = markdown_rows(section((tmp_path / "graphs-before-step-in-run.md").read_text(), "cuda"),
                            "**The timed training run of every implementation on cuda")
    assert {row[0]: row[1:4] for row in written[2:]}["python-graphs"] == ["width 1, batch 64", "938", "1.600"]


def test_the_workers_start_up_parts_are_tabled_where_saved(tmp_path):
    """A training run saved with its worker's start-up parts (docs/method.md#a-workers-start-up-in-parts) gets a row
    of them beside the start seen from pytest; a part no run on that device has (CUDA's on cpu) gets no column, and a
    result saved without them gets no table."""
    result = json.loads(COMPLETE.read_text())
    out, _ = cli.render(COMPLETE, typed(result), "markdown")
    assert "Worker start-up of the training runs" not in out
    parts = {"cpu": {"imports": 2.1, "trainer": 0.2, "timer_floor": 0.05},
             "cuda": {"imports": 2.2, "cuda_init": 0.4, "trainer": 0.25, "timer_floor": 0.06, "pci_bus_id": 0.001}}
    for bench in result["benchmarks"]:
        info = bench["extra_info"]
        if info.get("phase") == "training_run" and info["implementation"] == "python":
            info["startup_parts_s"] = [parts[info["device"]]]
            info["startup_parts_median_s"] = parts[info["device"]]
    path = tmp_path / "with-parts.json"
    path.write_text(json.dumps(result))
    out, _ = cli.render(path, typed(result), "markdown")
    cpu = markdown_rows(section(out, "cpu"), "**Worker start-up of the training runs on cpu")
    assert cpu[0] == ["Implementation", "Workload", "Start-up seen from pytest (s)", "Imports (s)", "Trainer (s)",
                      "Timer floor (s)"]
    assert cpu[2:] == [["python", "width 1, batch 64", "2.500", "2.100", "0.200", "0.050"]]
    cuda = markdown_rows(section(out, "cuda"), "**Worker start-up of the training runs on cuda")
    assert cuda[0][3:] == ["Imports (s)", "CUDA init (s)", "Trainer (s)", "Timer floor (s)", "Bus id (s)"]
    assert cuda[2:] == [["python", "width 1, batch 64", "3.000", "2.200", "0.400", "0.250", "0.060", "0.001"]]


def test_the_report_reproduces_the_readmes_answer_byte_for_byte():
    """results/answer/default-run-paired.md is `python -m phasebench.report results/answer/default-run-paired.json`'s table file
    (results/answer/README.md): the same saved result, read through SavedResult, gives the same bytes."""
    saved = Path("results/answer/default-run-paired.json")
    text, _ = cli.render(saved, SavedResult.load(ROOT / saved), "markdown")
    assert text == (ROOT / "results/answer/default-run-paired.md").read_text(encoding="utf8")
