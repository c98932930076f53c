"""Every command that takes saved runs names them as pytest-benchmark's --benchmark-compare does, through one resolver
(phasebench.results.find_results): a path, a run number (0002), the name a run was saved under (after, for
0002_after.json), a glob ('*after'). A name that two saved runs answer to, or none, is an error naming them. Each
command reads tiny saved files written into a storage of the test's own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from pytest_benchmark.utils import get_machine_id

from phasebench import results
from phasebench.gate import cli as gate_cli
from phasebench.gate import counts, paired
from phasebench.history import cli as history_cli
from phasebench.report import cli as report_cli
from tests.test_count_gate import counted_json
from tests.test_history import COUNTS, saved, scratch_repo
from tests.test_paired import save_run
from tests.test_report import COMPLETE, MISSING

# How each form names the run saved as `after`, the second in its storage, and `before`, the first.
FORMS = {
    "path": lambda folder, name: str(folder / f"{'0001' if name == 'before' else '0002'}_{name}.json"),
    "number": lambda folder, name: "0001" if name == "before" else "0002",
    "name": lambda folder, name: name,
    "glob": lambda folder, name: f"*{name}",
}


def run(command, argv: list[str]) -> tuple[int, str]:
    """A command's exit status and what it said (its SystemExit's message included)."""
    try:
        status = command(argv)
    except SystemExit as error:
        return (error.code if isinstance(error.code, int) else 1), str(error.code)
    return status, ""


class Storage:
    """A storage folder as pytest-benchmark's, this machine's runs numbered in it as --benchmark-save saves them."""

    def __init__(self, path: Path):
        self.url, self.folder = f"file://{path}", path / get_machine_id()
        self.folder.mkdir(parents=True)

    def save(self, name: str, result: dict | Path) -> Path:
        number = len(list(self.folder.glob("*.json"))) + 1
        path = self.folder / f"{number:04}_{name}.json"
        if isinstance(result, Path):
            shutil.copy(result, path)
        else:
            path.write_text(json.dumps(result), encoding="utf8")
        return path


def test_the_resolver_takes_each_form_and_refuses_an_ambiguous_or_missing_name(tmp_path):
    storage = Storage(tmp_path)
    before, after = storage.save("before", {"benchmarks": []}), storage.save("after", {"benchmarks": []})
    storage.save("after-all", {"benchmarks": []})  # a name that starts with another is not that name
    for form, expected in (("0001", before), ("before", before), ("0002_after", after), ("0002_after.json", after),
                           (str(after), after), (f"{get_machine_id()}/after", after), ("*before", before)):
        assert results.find_results([form], storage.url, "prog") == [expected], form
    assert results.find_results(["*after*"], storage.url, "prog") == [after, storage.folder / "0003_after-all.json"]
    assert results.find_results([], storage.url, "prog") == [storage.folder / "0003_after-all.json"]  # the newest
    with pytest.raises(SystemExit, match=r"^prog: \*after\* matches 2 saved results \(.*0002_after.json, "
                                         r".*0003_after-all.json\); name one$"):
        results.find_result("*after*", storage.url, "prog")
    storage.save("before", {"benchmarks": []})  # --benchmark-save=before a second time
    with pytest.raises(SystemExit, match=r"^prog: before names 2 saved results \(.*0001_before.json, "
                                         r".*0004_before.json\); name one by its number or path$"):
        results.find_results(["before"], storage.url, "prog")
    with pytest.raises(SystemExit, match=r"^prog: beforre: no such file, nor a saved result of that name in .*"
                                         r"holds 0001_before.json, 0002_after.json, 0003_after-all.json, "
                                         r"0004_before.json\)$"):
        results.find_results(["beforre"], storage.url, "prog")
    with pytest.raises(SystemExit, match=r"no such file, nor a saved result of that name"):
        results.find_results([str(tmp_path / "no" / "such" / "run.json")], storage.url, "prog")


# -- each command, each form -------------------------------------------------------------------------------------

def gate(storage: Storage, tmp_path: Path, form) -> None:
    for name, cpp_median in (("before", 1.0), ("after", 1.25)):
        storage.save(name, {"benchmarks": [bench("python", 2.0), bench("cpp", cpp_median)]})
    status, said = run(gate_cli.main, [form(storage.folder, "before"), form(storage.folder, "after"),
                                       "--storage", storage.url])
    return status, said


def bench(impl: str, median: float) -> dict:
    return {"fullname": f"bench/test_phases.py::test_phase[loss-{impl}-cpu]", "stats": {"median": median},
            "extra_info": {"phase": "loss", "implementation": impl, "device": "cpu"}}


def check_gate(status, said, out):
    assert status == 0, said
    assert out.splitlines()[-1].startswith("largest median change 25.0% (bench/test_phases.py::test_phase[loss-cpp-cpu])")


def report(storage: Storage, tmp_path: Path, form):
    storage.save("before", MISSING)
    storage.save("after", COMPLETE)
    return run(report_cli.main, [form(storage.folder, "after"), "--storage", storage.url, "--out", str(tmp_path / "out")])


def check_report(status, said, out):
    assert status == 0, said
    assert out.startswith("## 0002_after.json")


def history(storage: Storage, tmp_path: Path, form):
    shas, _ = scratch_repo(tmp_path / "repo", 2)
    storage.save("before", saved(shas[0], COUNTS))
    storage.save("after", saved(shas[1], {key: value * 1.1 for key, value in COUNTS.items()}))
    return run(history_cli.main, [form(storage.folder, "after"), "--storage", storage.url, "--repo",
                                  str(tmp_path / "repo")])


def check_history(status, said, out):
    assert status == 0, said
    [line] = [text for text in out.splitlines() if text.strip().startswith("loss python")]
    assert "  1 pts" in line and "latest     27,500 instr" in line, line  # after alone: 25,000 × 1.1


def gate_paired(storage: Storage, tmp_path: Path, form):
    import random

    for name, slow in (("before", None), ("after", {"test_phase[forward-cpp-cpu]": 0.5})):
        path = storage.save(name, {})
        save_run(path, random.Random(1), 0.0, slow)
    return run(paired.main, ["--base", form(storage.folder, "before"), "--head", form(storage.folder, "after"),
                             "--storage", storage.url])


def check_paired(status, said, out):
    assert status == 0, said
    [forward] = [line for line in out.splitlines() if "test_phase[forward-cpp-cpu]" in line]
    assert "+50.0 %" in forward, forward


def gate_counts(storage: Storage, tmp_path: Path, form):
    storage.save("before", counted_json({"forward-python-cpu": [36_550_000] * 3}))
    storage.save("after", counted_json({"forward-python-cpu": [37_281_000] * 3}))
    return run(counts.main, ["--base", form(storage.folder, "before"), "--head", form(storage.folder, "after"),
                             "--storage", storage.url])


def check_counts(status, said, out):
    assert status == 1, said  # after is 2 % above before: the run named second was read as head
    assert "+2.000 %" in out


COMMANDS = {"phasebench.gate": (gate, check_gate), "phasebench.report": (report, check_report),
            "phasebench.history": (history, check_history), "phasebench.gate.paired": (gate_paired, check_paired),
            "phasebench.gate.counts": (gate_counts, check_counts)}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_takes_each_form(tmp_path, capsys, command, form):
    make_and_run, check = COMMANDS[command]
    status, said = make_and_run(Storage(tmp_path / "storage"), tmp_path, FORMS[form])
    check(status, said, capsys.readouterr().out)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_names_the_candidates_of_an_ambiguous_name_and_says_what_a_missing_one_could_be(tmp_path, capsys,
                                                                                                      command):
    make_and_run, _ = COMMANDS[command]
    storage = Storage(tmp_path / "storage")
    storage.save("after", {"benchmarks": []})  # 0001_after.json: `after` names two runs once the command saves its own

    def ambiguous(folder, name):
        return name

    status, said = make_and_run(storage, tmp_path, ambiguous)
    said += capsys.readouterr().err
    assert status in (1, 2) and "after names 2 saved results (" in said, said
    assert "0001_after.json" in said and "0003_after.json" in said and "name one by its number or path" in said

    def missing(folder, name):
        return f"{name}-typo"

    status, said = make_and_run(Storage(tmp_path / "other"), tmp_path / "other", missing)
    said += capsys.readouterr().err
    assert status in (1, 2) and "-typo: no such file, nor a saved result of that name in " in said, said
    assert "0002_after.json" in said  # what the storage holds


def test_benchmark_compare_given_a_saved_name_says_how_pytest_benchmark_takes_it(tmp_path):
    """--benchmark-compare is pytest-benchmark's own: it reads its value as the start of a file's name, so a saved
    name alone matches nothing there, and the one-line error says which glob or number does."""
    from pytest_benchmark.storage.file import FileStorage

    from phasebench.plugin.gating import _comparison_error

    storage = Storage(tmp_path)
    storage.save("before", {"benchmarks": []})
    session = SimpleNamespace(compare="before", compare_fail=None, compared_mapping={},
                              storage=FileStorage(tmp_path, logger=None, default_machine_id=get_machine_id()))
    assert _comparison_error(session, None).endswith(
        "holds 0001_before.json; a saved name is a glob here: --benchmark-compare='*before', or its number 0001")
