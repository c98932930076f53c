"""The saved-result format (phasebench/schema.py): every record kind survives pytest-benchmark's own save and reads
back equal through SavedResult, its kind saved with it; a key no record has is refused on writing, on saving and on
reading, naming the record or the file, and so is a required key left unset. (Older formats: tests/test_saved.py.)"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from phasebench import schema
from phasebench.method import METHOD_VERSION
from phasebench.repository import ROOT
from phasebench.saved import SavedResult

SAMPLES = {"int": 3, "float": 0.25, "str": "text", "list": [1, 2.5], "dict": {"key": [1]}, "object": "any"}


def sample(kind: type[schema.Record], **fixed) -> schema.Record:
    """A record of `kind` with every field set, by its type (its kind's name where it saves one)."""
    values = {field.name: SAMPLES[str(field.type).split(" ")[0]] for field in dataclasses.fields(kind)}
    named = {"kind": kind.__name__} if "kind" in values else {}
    return kind(**values | named | fixed)


PHASES = {schema.WorkerOverheadInfo: {"phase": "worker_overhead"}, schema.LossItemInfo: {"phase": "loss_item"},
          schema.PhaseInfo: {"phase": "forward"}, schema.CountedPhaseInfo: {"phase": "loss", "metric": "instructions"},
          schema.TrainingRunInfo: {"phase": "training_run"}, schema.ConcurrentJobsInfo: {"phase": "concurrent_jobs-2"},
          schema.EnsembleInfo: {"phase": "ensemble-4"}, schema.DistPhaseInfo: {"phase": "backward", "world_size": 2},
          schema.DistTrainingRunInfo: {"phase": "training_run", "world_size": 2},
          schema.TorchrunInfo: {"phase": "torchrun", "world_size": 2}}
RECORDS = [sample(kind, **fixed) for kind, fixed in PHASES.items()]
MACHINE = sample(schema.MachineInfo, format=schema.FORMAT_VERSION, method=METHOD_VERSION)

# A suite of its own, run by pytest with pytest-benchmark and without phasebench's plugin: each case writes one
# record through the schema; the run saves the machine record and checks the file before it is written.
CASES = '''
import json, pytest
from phasebench import schema
RECORDS = [getattr(schema, kind)(**record) for kind, record in json.loads({records!r})]

@pytest.mark.parametrize("index", range(len(RECORDS)))
def test_case(benchmark, index):
    schema.write(benchmark, RECORDS[index])
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
'''
CONFTEST = '''
import json
from phasebench import schema

def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["phasebench"] = json.loads({machine!r})

def pytest_benchmark_update_json(config, benchmarks, output_json):
    schema.check_saved(output_json)
'''


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("saved")
    records = json.dumps([(type(record).__name__, record.as_dict()) for record in RECORDS])
    (folder / "test_cases.py").write_text(CASES.format(records=records))
    (folder / "conftest.py").write_text(CONFTEST.format(machine=json.dumps(MACHINE.as_dict())))
    (folder / "pytest.ini").write_text("[pytest]\n")
    out = folder / "result.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:phasebench.plugin", "-p", "no:cacheprovider",
                           "--rootdir", str(folder), "-c", str(folder / "pytest.ini"), f"--benchmark-json={out}",
                           str(folder)], capture_output=True, text=True, cwd=folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_every_record_kind_reads_back_equal_from_a_saved_result(saved):
    result = SavedResult.load(saved)
    assert result.machine == MACHINE and result.saved_format == schema.FORMAT_VERSION
    read = sorted((case.info for case in result.benchmarks),
                  key=lambda record: RECORDS.index(record) if record in RECORDS else -1)
    assert read == RECORDS
    assert [type(record) for record in read] == list(PHASES)


def test_an_unknown_key_is_refused_on_writing():
    benchmark = types.SimpleNamespace(extra_info={})
    with pytest.raises(TypeError, match="PhaseInfo has no key 'bogus'"):
        schema.write(benchmark, schema.PhaseInfo, phase="forward", bogus=1)
    assert benchmark.extra_info == {}
    schema.write(benchmark, schema.TrainingRunInfo, phase="training_run")
    assert benchmark.extra_info == {"phase": "training_run", "kind": "TrainingRunInfo"}  # its kind saved with it
    with pytest.raises(ValueError, match="PhaseInfo written into a TrainingRunInfo"):
        schema.write(benchmark, schema.PhaseInfo, order=3)  # a key of another kind than the case's


def test_the_most_specific_kind_written_is_saved():
    benchmark = types.SimpleNamespace(extra_info={})
    schema.write(benchmark, schema.Utilization, gpu=None, cpu=None)  # no case kind: none saved
    assert "kind" not in benchmark.extra_info
    schema.write(benchmark, schema.PhaseInfo, phase="forward")
    schema.write(benchmark, schema.CountedPhaseInfo, metric="instructions")
    schema.write(benchmark, schema.PhaseInfo, round_checks="on")  # a base kind's keys keep the counted kind
    assert benchmark.extra_info["kind"] == "CountedPhaseInfo"


def test_an_unknown_key_is_refused_on_saving():
    info = {"kind": "PhaseInfo", "phase": "forward", "implementation": "python", "device": "cpu"}
    output = {"machine_info": {"phasebench": MACHINE.as_dict()},
              "benchmarks": [{"fullname": "bench/test_phases.py::test_phase[forward-python-cpu]",
                              "extra_info": info | {"setup_holds": "a retired key"}}]}
    with pytest.raises(schema.SchemaError, match=r"test_phase\[forward-python-cpu\].*PhaseInfo has no key 'setup_holds'"):
        schema.check_saved(output)
    output["benchmarks"][0]["extra_info"] = info
    schema.check_saved(output)
    output["benchmarks"][0]["extra_info"] = info | {"device": None}
    with pytest.raises(schema.SchemaError, match="PhaseInfo has no device"):
        schema.check_saved(output)
    output["benchmarks"][0]["extra_info"] = {key: value for key, value in info.items() if key != "kind"}
    with pytest.raises(schema.SchemaError, match="has no 'kind'"):
        schema.check_saved(output)
    output["benchmarks"][0]["extra_info"] = info
    output["machine_info"]["phasebench"]["test_slow_phase"] = None
    with pytest.raises(schema.SchemaError, match="MachineInfo has no key 'test_slow_phase'"):
        schema.check_saved(output)


def test_an_unknown_key_is_refused_on_reading(saved, tmp_path):
    result = json.loads(saved.read_text())
    result["benchmarks"][0]["extra_info"]["bogus"] = 1
    path = tmp_path / "bogus.json"
    path.write_text(json.dumps(result))
    name = result["benchmarks"][0]["fullname"]
    with pytest.raises(SystemExit, match=rf"{re.escape(str(path))}: {re.escape(name)}: .* has no key 'bogus'"):
        SavedResult.read(path, "test")
    with pytest.raises(schema.SchemaError, match="has no key 'bogus'"):
        schema.info_of(result["benchmarks"][0])


def test_the_schema_is_a_leaf():
    code = "import phasebench.schema, sys; print(sorted(m for m in sys.modules if m.startswith(('phasebench', 'torch'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout.replace("'", '"')) == ["phasebench", "phasebench.distributed_records",
                                                         "phasebench.record", "phasebench.schema"]
