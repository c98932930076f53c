"""phasebench/saved.py: every saved result the repository holds loads through SavedResult, older formats by their
migration, or is refused with its reason; one committed file of each method migrates as its format says; a file the
code cannot read is refused naming the file and the key."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from phasebench import schema
from phasebench.method import METHOD_VERSION
from phasebench.repository import ROOT
from phasebench.saved import MIGRATIONS, CaseKey, SavedResult, SavedResultError, format_of

# One committed result of each method before formats were recorded, the format it was saved in (the fixtures: the
# README answers of methods 3 and 5, kept when the answer was measured again, and method 1's hygiene-before-1.json of
# results/method2/hygiene.tar.xz).
BY_METHOD = {
    1: "tests/fixtures/method-1-hygiene-before.json",
    2: "results/fill-cpu/loops.json",
    3: "tests/fixtures/method-3-default-run.json",
    4: "results/interventions/timed.json",
    5: "tests/fixtures/method-5-default-run.json",
}


def committed() -> list[tuple[str, bytes]]:
    """Every JSON file under results/ and tests/fixtures/, the .tar.xz archives' members included."""
    found = [(str(path.relative_to(ROOT)), path.read_bytes())
             for path in sorted([*ROOT.glob("results/**/*.json"), *ROOT.glob("tests/fixtures/*.json")])]
    for archive in sorted(ROOT.glob("results/**/*.tar.xz")):
        with tarfile.open(archive) as tar:
            found += [(f"{archive.relative_to(ROOT)}:{member.name}", tar.extractfile(member).read())
                      for member in tar.getmembers() if member.isfile() and member.name.endswith(".json")]
    return found


def test_every_committed_json_loads_or_is_refused_with_its_reason():
    loaded, refused = {}, {}
    for name, text in committed():
        try:
            loaded[name] = SavedResult.from_json(json.loads(text), name)
        except SavedResultError as error:
            refused[name] = error.reason
    assert len(loaded) > 60 and {path for path in BY_METHOD.values()} <= set(loaded)
    # What is refused is what no pytest-benchmark run wrote: a study's data, a gate's rows, a history series.
    assert set(refused.values()) == {"not a pytest-benchmark result (no 'benchmarks' list)"}, refused
    assert all(result.benchmarks for result in loaded.values())
    assert {result.saved_format for result in loaded.values()} >= set(BY_METHOD)  # every older format is held


@pytest.mark.parametrize("method", sorted(BY_METHOD))
def test_a_committed_result_of_each_method_migrates(method):
    path = ROOT / BY_METHOD[method]
    raw = json.loads(path.read_text())
    assert format_of(raw) == method
    result = SavedResult.load(path)
    assert (result.saved_format, result.method, result.machine.format) == (method, method, schema.FORMAT_VERSION)
    # Each record's kind, which formats before 6 did not save, is the record the case is.
    assert all(case.info.kind == type(case.info).__name__ for case in result.benchmarks if case.info)
    assert all(isinstance(key, CaseKey) and case.key == key for key, case in result.cases.items())
    assert len(result.cases) + len(result.distributed_cases) == len(raw["benchmarks"])
    saved_medians = {bench["fullname"]: bench["stats"]["median"] for bench in raw["benchmarks"]}
    assert {case.fullname: case.median for case in result.benchmarks} == saved_medians
    if method == 3:  # the retired keys are dropped, the testing knob moved
        assert any("setup_holds" in bench["extra_info"] for bench in raw["benchmarks"])
        assert "test_slow_phase" in raw["machine_info"]["phasebench"]
        assert result.machine.testing is None  # a real run: no phase was slowed


def test_every_format_before_the_current_one_has_its_migration():
    assert sorted(MIGRATIONS) == list(range(1, schema.FORMAT_VERSION))


def saved_copy(tmp_path, change) -> Path:
    result = json.loads((ROOT / BY_METHOD[5]).read_text())
    change(result)
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(result))
    return path


def refusal(path) -> str:
    with pytest.raises(SavedResultError) as caught:
        SavedResult.load(path)
    assert str(caught.value).startswith(f"{path}: ")
    return caught.value.reason


def test_an_unknown_key_is_refused_naming_the_file_the_benchmark_and_the_key(tmp_path):
    path = saved_copy(tmp_path, lambda result: result["benchmarks"][0]["extra_info"].update(bogus=1))
    reason = refusal(path)
    assert "test_phase[" in reason and "PhaseInfo has no key 'bogus'" in reason, reason


def test_a_missing_required_key_is_refused(tmp_path):
    path = saved_copy(tmp_path, lambda result: result["benchmarks"][3]["extra_info"].pop("device"))
    assert "has no 'device' (a required key)" in refusal(path)


def test_a_retired_key_in_a_newer_format_is_refused_with_its_last_format(tmp_path):
    def retired(result):
        result["machine_info"]["phasebench"] |= {"format": schema.FORMAT_VERSION, "test_slow_phase": None}
        for bench in result["benchmarks"]:
            bench["extra_info"]["kind"] = "PhaseInfo"
    reason = refusal(saved_copy(tmp_path, retired))
    assert "MachineInfo has no key 'test_slow_phase'" in reason and "last saved by format 3" in reason, reason


def test_a_newer_format_or_method_is_refused(tmp_path):
    newer = saved_copy(tmp_path, lambda result: result["machine_info"]["phasebench"].update(
        format=schema.FORMAT_VERSION + 1))
    assert f"format {schema.FORMAT_VERSION + 1}" in refusal(newer)
    later = saved_copy(tmp_path, lambda result: result["machine_info"]["phasebench"].update(method=METHOD_VERSION + 1))
    assert f"method {METHOD_VERSION + 1}" in refusal(later)


def test_two_benchmarks_of_one_case_are_refused_naming_both(tmp_path):
    def doubled(result):
        twin = json.loads(json.dumps(result["benchmarks"][0]))
        twin["name"] = twin["fullname"] = "test_other[the same case]"
        result["benchmarks"].append(twin)
    first = json.loads((ROOT / BY_METHOD[5]).read_text())["benchmarks"][0]["fullname"]
    reason = refusal(saved_copy(tmp_path, doubled))
    assert reason.startswith(f"{first} and test_other[the same case] are one case ("), reason


def test_what_is_no_result_is_refused(tmp_path):
    assert refusal(tmp_path / "absent.json") == "No such file or directory"
    (tmp_path / "text.json").write_text("not json")
    assert refusal(tmp_path / "text.json").startswith("not JSON")
    (tmp_path / "list.json").write_text("[]")
    assert refusal(tmp_path / "list.json") == "not a pytest-benchmark result (no 'benchmarks' list)"
    (tmp_path / "bare.json").write_text('{"benchmarks": [{"name": "x"}]}')
    assert refusal(tmp_path / "bare.json") == "benchmark #0 has no fullname or stats.median"


def test_a_run_in_the_session_reads_as_its_saved_file_does():
    saved = json.loads((ROOT / BY_METHOD[5]).read_text())
    migrated = SavedResult.load(ROOT / BY_METHOD[5])
    machine_info = saved["machine_info"] | {"phasebench": migrated.machine.as_dict()}
    benchmarks = [bench | {"extra_info": bench["extra_info"] | {"kind": case.info.kind}}
                  for bench, case in zip(saved["benchmarks"], migrated.benchmarks)]
    in_session = SavedResult.from_benchmarks(benchmarks, machine_info)
    assert in_session.cases == migrated.cases and in_session.machine == migrated.machine


def test_the_saved_result_module_is_a_leaf_beside_the_schema():
    code = "import phasebench.saved, sys; print(sorted(m for m in sys.modules if m.startswith(('phasebench', 'torch'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout.replace("'", '"')) == ["phasebench", "phasebench.distributed_records",
                                                         "phasebench.method", "phasebench.record",
                                                         "phasebench.repository", "phasebench.saved",
                                                         "phasebench.schema", "phasebench.spec"]
