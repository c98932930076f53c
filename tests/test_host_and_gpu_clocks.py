"""A cuda phase's two clocks beside its wall time (docs/method.md#what-is-measured): the host CPU time, read before
the closing synchronize, and the GPU time, between events recorded around the body. Here on cpu: the real clock with
only its low-level calls replaced, the C ABI's struct against its ctypes mirror, what a case saves and how the report
shows it (with and without them), the CUDA settings machine_info records, and the refusal of blocking launches."""

from __future__ import annotations

import copy
import json
import re
import types

import pytest

from phasebench import results, schema
from phasebench.cpu_windows import phase_host_and_gpu
from phasebench.method import METHOD_VERSION
from phasebench.phase_round import PhaseRound
from phasebench.plugin import guards, machine
from phasebench.report.tables import phase_table
from phasebench.repository import ROOT
from phasebench.saved import SavedResult
from phasebench.worker import cpp_lib
from tests.child_runs import run_suite
from tests.test_report import COMPLETE, markdown_rows, run_report, section
from tests.test_report_headline import PREVIEW_PACK, PREVIEW_PHASES, unpacked


class Calls:
    """The order of the low-level calls the clock makes, each clock read a step of a fake clock."""

    def __init__(self):
        self.log, self.now = [], 0

    def clock(self, name: str, step: int):
        def read() -> int:
            self.now += step
            self.log.append(name)
            return self.now
        return read


class FakeEvent:
    def __init__(self, calls: Calls, name: str):
        self.calls, self.name, self.recorded_on = calls, name, []

    @staticmethod
    def record(event: FakeEvent, stream) -> None:
        event.recorded_on.append(stream)
        event.calls.log.append(f"record {event.name}")

    def elapsed_time(self, end: FakeEvent) -> float:
        self.calls.log.append("elapsed")
        return 0.25  # milliseconds


@pytest.fixture
def fake_cuda(monkeypatch):
    """The clock's time module and CUDA calls replaced by ones that log their order; the synchronize spins 1000 ns
    of thread CPU, as a synchronize can."""
    from phasebench.train import timing  # torch: here, not at collection

    calls = Calls()
    fake_time = types.SimpleNamespace(perf_counter_ns=calls.clock("wall", 1), process_time_ns=calls.clock("process", 1),
                                      thread_time_ns=calls.clock("thread", 1))
    monkeypatch.setattr(timing, "time", fake_time)
    names = iter(["start", "end"])

    def synchronize():
        calls.now += 1000
        calls.log.append("synchronize")

    clock = timing.CudaClock(synchronize=synchronize, new_event=lambda: FakeEvent(calls, next(names)),
                             record=FakeEvent.record, current_stream=lambda: "the current stream")
    return calls, clock


def test_the_cuda_clock_reads_the_host_cpu_before_the_closing_synchronize(fake_cuda):
    calls, clock = fake_cuda
    # Made once per clock, and recorded once, so that no clock holds an event's creation.
    assert calls.log == ["record start", "record end", "synchronize"]
    calls.log.clear()

    def body(trainer):
        calls.now += 50
        calls.log.append("body")

    timed = clock(body, None)
    assert calls.log == ["synchronize", "process", "thread", "wall", "record start", "body", "record end", "thread",
                         "synchronize", "wall", "process", "thread", "elapsed"]
    # Each read advances the fake clock by 1, the body by 50, a synchronize by 1000: the thread's CPU clock reads
    # 2002 at the start, 2054 before the closing synchronize and 3057 after it.
    assert timed.host_cpu_ns == 52  # the body, not the synchronize's spin
    assert timed.thread_cpu_ns == 1055 and timed.ns == 1052  # these hold the synchronize
    assert timed.gpu_ns == 250_000
    assert clock.start_event.recorded_on[-1] == clock.end_event.recorded_on[-1] == "the current stream"
    # The events are the clock's own: the next round records the same two again.
    clock(body, None)
    assert len(clock.start_event.recorded_on) == len(clock.end_event.recorded_on) == 3


def test_on_cpu_nothing_more_is_read():
    from phasebench.train import timing

    assert timing.timer_for(types.SimpleNamespace(type="cpu")) is timing.timed_cpu
    timed = timing.timed_cpu(lambda trainer: None, None)
    assert timed.host_cpu_ns is None and timed.gpu_ns is None and timed.ns >= 0


def test_the_ctypes_result_mirrors_the_header():
    """pb_result's fields in phasebench.h, in order, are the bindings' Result's, the ABI 9 clocks last."""
    header = (ROOT / "cpp/include/phasebench.h").read_text()
    body = dict((name, fields) for fields, name in re.findall(r"typedef struct \{([^{}]*)\} (\w+);", header))["pb_result"]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    declared = [(match.group(1), match.group(2)) for match in re.finditer(r"(\w+)\s+(\w+)(?:\[\d+\])?;", body)]
    c_types = {"double": cpp_lib.ctypes.c_double, "int64_t": cpp_lib.ctypes.c_int64, "int32_t": cpp_lib.ctypes.c_int32}
    mirrored = [(name, kind) for name, kind in cpp_lib.Result._fields_]
    assert [name for _, name in declared] == [name for name, _ in mirrored]
    for (c_type, name), (_, kind) in zip(declared, mirrored):
        assert getattr(kind, "_type_", None) is c_types[c_type] or kind is c_types[c_type], name
    assert [name for name, _ in mirrored][-2:] == ["host_cpu_ns", "gpu_ns"]
    assert f"#define PB_ABI_VERSION {cpp_lib.PB_ABI_VERSION}" in header
    assert cpp_lib.measured(-1) is None and cpp_lib.measured(0) == 0


def test_a_case_saves_both_clocks_on_cuda_and_neither_on_cpu():
    cuda = [PhaseRound(3000, 3000, 2900, {}, host_cpu_ns=host, gpu_ns=gpu) for host, gpu in ((400, 2500), (600, 2600),
                                                                                            (500, 2700))]
    assert phase_host_and_gpu(cuda) == {"host_cpu_s": [4e-7, 6e-7, 5e-7], "host_cpu_median_s": 5e-7,
                                        "gpu_s": [2.5e-6, 2.6e-6, 2.7e-6], "gpu_median_s": 2.6e-6}
    assert phase_host_and_gpu([PhaseRound(3000, 3000, 2900, {})] * 3) == {}
    info = schema.PhaseInfo(phase="forward", **phase_host_and_gpu(cuda))
    assert schema.PhaseInfo(**info.as_dict()).gpu_median_s == 2.6e-6


def with_device_clocks(result: dict) -> dict:
    """complete.json's result with host CPU and GPU medians on every cuda phase: a quarter and half the median."""
    result = copy.deepcopy(result)
    for bench in result["benchmarks"]:
        info = bench["extra_info"]
        if info.get("device") == "cuda" and "timer_floor_s" in info:
            median = bench["stats"]["median"]
            info.update(host_cpu_s=[median / 4], host_cpu_median_s=median / 4, gpu_s=[median / 2],
                        gpu_median_s=median / 2)
    return result


def test_the_report_shows_them_beside_the_wall_time_where_present(capsys, tmp_path):
    saved = tmp_path / "with-clocks.json"
    saved.write_text(json.dumps(with_device_clocks(json.loads(COMPLETE.read_text()))))
    out, _ = run_report(capsys, saved, "--out", tmp_path)
    cuda = markdown_rows(section(out, "cuda"), "**Per phase on cuda")
    assert cuda[0][:11] == ["Phase", "Python median (ms)", "Python net (ms)", "Python IQR (ms)",
                            "Python host CPU (ms)", "Python GPU (ms)", "CPP median (ms)", "CPP net (ms)",
                            "CPP IQR (ms)", "CPP host CPU (ms)", "CPP GPU (ms)"]
    rows = {row[0]: row[1:] for row in cuda[2:]}
    assert rows["Train Step"][:10] == ["6.0000", "5.9998", "0.9000", "1.5000", "3.0000",
                                       "1.0000", "1.0000", "0.1500", "0.2500", "0.5000"]
    assert "host CPU:" in section(out, "cuda")
    # On cpu no result has them: no such columns.
    assert "Python host CPU (ms)" not in markdown_rows(section(out, "cpu"), "**Per phase on cpu")[0]


@pytest.mark.parametrize("pack, path", [(PREVIEW_PACK, PREVIEW_PHASES), (None, "results/answer/default-run-paired.json")])
def test_results_saved_without_them_load_and_report(pack, path, capsys, tmp_path):
    saved = unpacked(pack, path, tmp_path) if pack else ROOT / path  # the preview: the phases on cuda, method 4
    cases = SavedResult.load(saved).published()
    for device in {key[2] for key in cases}:
        table = phase_table(cases, device)
        assert table.rows and not [header for header, _ in table.columns if "host CPU" in header or "GPU (ms)" in header]
    out, _ = run_report(capsys, saved, "--out", tmp_path / "report")
    assert "Per phase on" in out and "host CPU" not in out


def test_machine_info_records_the_cuda_settings(monkeypatch):
    settings = types.SimpleNamespace(cuda_reason="no GPU here", threads=2, impls=["python"], workloads=[],
                                     source=None, rounds=5, warmup_rounds=1, processes=1, pair_workers=6,
                                     order_seed=None)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    info = machine.machine_info(settings, probed=False)
    assert info["cublas_workspace_config"] == ":4096:8"
    assert info["pytorch_cuda_alloc_conf"] == "expandable_segments:True"
    recorded = schema.MachineInfo(**info)
    # They keep results apart wherever switches do (the gate, --benchmark-compare, the history's series).
    assert results.switched(recorded) == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8",
                                          "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    unset = schema.MachineInfo(**machine.machine_info(settings, probed=False))
    assert unset.cublas_workspace_config is None and results.switched(unset) == {}
    baseline = SavedResult.from_json({"machine_info": {"phasebench": unset.as_dict()}, "benchmarks": []}, "base.json")
    line = results.mismatch(baseline, METHOD_VERSION, current_switched=results.switched(recorded))
    assert line and "CUBLAS_WORKSPACE_CONFIG :4096:8" in line


def test_blocking_launches_are_refused_in_a_timed_run_only():
    def config(disabled: bool):
        return types.SimpleNamespace(getoption=lambda name, default=None: disabled if name == "benchmark_disable"
                                     else default)

    refusal = guards.blocking_launches(config(False), {"CUDA_LAUNCH_BLOCKING": "1"})
    assert refusal and refusal.startswith("CUDA_LAUNCH_BLOCKING=1 ")
    assert guards.blocking_launches(config(True), {"CUDA_LAUNCH_BLOCKING": "1"}) is None  # the test command
    assert guards.blocking_launches(config(False), {"CUDA_LAUNCH_BLOCKING": "0"}) is None
    assert guards.blocking_launches(config(False), {}) is None


def test_a_timed_run_with_blocking_launches_is_a_usage_error():
    run = run_suite("--benchmark-only", env={"CUDA_LAUNCH_BLOCKING": "1"})
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    [line] = [line for line in run.stderr.splitlines() if line.startswith("ERROR:")]
    assert line.startswith("ERROR: CUDA_LAUNCH_BLOCKING=1 makes every CUDA kernel launch wait"), run.stderr
