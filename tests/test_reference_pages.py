"""The generated reference pages (docs/reference/) agree with the code they are generated from: the options page with
the plugin's option definitions, the saved-results page with the schema, both ways. `python -m phasebench.reference`
rewrites them. Also the two terminal fixes a newcomer meets: a build message on a line of its own, skip reasons in
the summary."""

from __future__ import annotations

import configparser
import dataclasses
import difflib
import io
import re
import shlex
import subprocess
import sys
import types

import pytest

from phasebench import provenance, schema
from phasebench.plugin import switches
from phasebench.record import Record, saved_field
from phasebench.reference import PAGES, fields, options, saved, stale
from phasebench.reference import __main__ as cli
from phasebench.repository import ROOT
from phasebench.saved import RETIRED

OPTIONS_PAGE = "docs/reference/options.md"
SAVED_PAGE = "docs/reference/saved-results.md"


def diff(name: str, generated: str) -> str:
    path = ROOT / name
    current = path.read_text(encoding="utf8").splitlines() if path.is_file() else []
    lines = difflib.unified_diff(current, generated.splitlines(), f"{name} (on disk)", f"{name} (generated)",
                                 lineterm="")
    return "\n".join(list(lines)[:60])


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_page_is_what_the_generator_writes(name):
    found = stale({name: PAGES[name]})
    assert not found, f"run python -m phasebench.reference:\n{diff(name, found[name])}" if found else ""


def test_a_changed_help_text_makes_the_options_page_stale():
    parser = options.plugin_parser()
    argument = next(arg for arg in parser.getgroup(options.GROUP).options if "--run-rounds" in arg.names())
    argument.attrs()["help"] = "rounds of each training_run, changed (default: %(default)s)"
    found = stale({OPTIONS_PAGE: lambda: options.page(options.options(parser))})
    assert OPTIONS_PAGE in found
    changed = diff(OPTIONS_PAGE, found[OPTIONS_PAGE])
    assert "+rounds of each training_run, changed (default: 4)" in changed, changed


def test_check_exits_1_for_a_stale_page(tmp_path):
    (tmp_path / "docs" / "reference").mkdir(parents=True)
    (tmp_path / OPTIONS_PAGE).write_text(options.page() + "an edit by hand\n", encoding="utf8")
    assert list(stale({OPTIONS_PAGE: options.page}, root=tmp_path)) == [OPTIONS_PAGE]
    (tmp_path / OPTIONS_PAGE).write_text(options.page(), encoding="utf8")
    assert stale({OPTIONS_PAGE: options.page}, root=tmp_path) == {}


def test_check_of_the_repository(capsys):
    assert cli.main(["--check"]) == 0, capsys.readouterr().err


# -- the options page ---------------------------------------------------------------------------------------------

def test_every_option_states_its_default_once():
    """Every option that takes a value says what a run without it does; one whose parser holds a default value
    cites it (%(default)s) rather than writing it out, so that the parser is the only place it is stated."""
    assert options.problems(options.options()) == []


def test_the_default_check_finds_a_default_written_out_or_left_out():
    from _pytest.config.argparsing import Parser

    parser = Parser(_ispytest=True)
    group = parser.getgroup(options.GROUP)
    group.addoption("--written-out", type=int, default=3, help="rounds (default: 3)")
    group.addoption("--left-out", default=None, help="a source")
    group.addoption("--cited", type=int, default=3, help="rounds (default: %(default)s; the figures take 5)")
    group.addoption("--flag", action="store_true", help="a switch")
    found = options.options(parser)
    assert [option.default for option in found] == ["3", "not given", "3", "off"]
    assert options.problems(found) == [
        "--written-out: its parser default is 3, so its help text must cite it as %(default)s",
        "--left-out: its help text states no '(default: …)'",
    ]


def test_the_stated_default_is_the_clause_up_to_its_first_semicolon():
    assert options.stated_default("x (default: cpu,cuda; without a GPU (none) skips)") == "cpu,cuda"
    assert options.stated_default("x (default: python,cpp, the pair (published))") == "python,cpp, the pair (published)"
    assert options.stated_default("x, no default") is None


def test_every_option_has_its_anchor():
    from tests.test_docs import anchors

    found = anchors(ROOT / OPTIONS_PAGE)
    missing = [option.name for option in options.options() if option.anchor not in found]
    assert not missing and "--run-rounds" in found, missing


def test_the_page_holds_every_option_pytest_help_lists():
    """The options pytest itself lists under "phasebench:" in --help, where the plugin was loaded as a run loads it."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("\nphasebench:", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"^\s{2}(--[\w-]+)", section, re.M))
    assert listed and listed == {option.name for option in options.options()}, listed


def test_help_texts_hold_no_history():
    history = re.compile(r"\bissue \d+|#\d{2,}|\b[0-9a-f]{7,40}\b|\b20\d\d-\d\d-\d\d\b|this machine|\bhere\b")
    found = [f"{option.name}: {match.group(0)}" for option in options.options()
             for match in history.finditer(option.help)]
    assert not found, found


# -- the saved-results page ---------------------------------------------------------------------------------------

def page_keys(text: str) -> dict[str, set[str]]:
    """{section heading: the keys its table lists}."""
    found: dict[str, set[str]] = {}
    heading = None
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
        elif heading and (match := re.match(r"^\| `(\w+)` \|", line)):
            found.setdefault(heading, set()).add(match.group(1))
    return found


def test_every_schema_key_is_on_the_page_and_every_page_key_in_the_schema():
    listed = page_keys((ROOT / SAVED_PAGE).read_text(encoding="utf8"))
    for record, heading, _ in saved.SECTIONS:
        assert listed.get(heading) == set(saved.own_fields(record)), heading
    for kind in (*schema.CASE_KINDS, schema.MachineInfo):  # every key of every kind, inherited ones included
        on_page = set().union(*(listed[saved.HEADINGS[base]] for base in kind.__mro__ if base in saved.HEADINGS))
        assert on_page == set(kind.keys()), kind.__name__
    retired = {key for keys in RETIRED.values() for key in keys}
    assert listed["Keys older formats saved"] == retired
    for key in ("dataset_origin", "gpu_unavailable", "implementations", "workloads", "setup_holds",
                "startup_median_s", "stopping_median_s", "program_s", "loop_median_s"):
        assert any(key in keys for keys in listed.values()), key


def test_every_key_has_a_meaning_and_every_meaning_a_key():
    assert saved.described_problems() == []


def test_the_meaning_check_finds_a_key_left_out():
    @dataclasses.dataclass
    class Described(Record):
        told: int | None = saved_field("count", "a key with its unit and meaning")
        untold: int | None = None

    assert saved.described_problems([Described]) == [
        f"{name}: no section on the page" for name in (*(kind.__name__ for kind in schema.CASE_KINDS), "MachineInfo")
    ] + ["Described.untold: no unit or meaning in its field (saved_field, phasebench/record.py)"]


def test_what_the_switches_write_into_machine_info_is_in_the_schema():
    written = switches.machine_info(switches.Switches(pins="count"), ["setarch"], "AVX2")
    assert set(written) <= set(schema.MachineInfo.keys())
    assert set(written["pins"]) <= set(re.findall(r"`(\w+)`", saved.described(schema.MachineInfo, "pins")[1]))


def test_the_commit_info_keys_are_the_ones_phasebench_adds(tmp_path, monkeypatch):
    monkeypatch.setenv("PB_TEST_COMMIT", "0" * 40)
    added = provenance.commit_info("PB_TEST_COMMIT", "PB_TEST_DIRTY", root=tmp_path)
    assert set(added) - {"id"} == set(fields.COMMIT_INFO)
    assert page_keys((ROOT / SAVED_PAGE).read_text(encoding="utf8"))["commit_info"] == set(fields.COMMIT_INFO)


def test_the_reading_recipe_runs(tmp_path):
    text = (ROOT / SAVED_PAGE).read_text(encoding="utf8")
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "read_saved.py").write_text(code)
    done = subprocess.run([sys.executable, str(tmp_path / "read_saved.py"), str(ROOT / "tests/fixtures/complete.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("format 2, method 2, torch 2.14.1+cu130, Example CPU"), done.stdout
    assert "test_training_run[python-cpu]: TrainingRunInfo training_run python cpu median 12.500000 s" in done.stdout


# -- what a newcomer sees on the terminal -------------------------------------------------------------------------

def test_the_build_message_is_a_line_of_its_own(pytestconfig):
    from _pytest.terminal import TerminalReporter

    from phasebench.plugin.fixtures import terminal_line

    out = io.StringIO()
    reporter = TerminalReporter(pytestconfig, out)
    reporter.write_fspath_result("bench/test_phases.py::test_phase[a]", ".")
    plugins = {"terminalreporter": reporter, "capturemanager": None}
    config = types.SimpleNamespace(pluginmanager=types.SimpleNamespace(getplugin=plugins.get))
    terminal_line(config)("phasebench: building the C++ library ...")
    reporter.write_fspath_result("bench/test_phases.py::test_phase[b]", ".")
    assert "\nbench/test_phases.py .\nphasebench: building the C++ library ...\n" in out.getvalue(), out.getvalue()
    assert out.getvalue().rstrip().endswith("\nbench/test_phases.py ."), out.getvalue()


def test_the_summary_gives_skip_reasons_by_default():
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    chars = [arg[2:] for arg in shlex.split(ini["pytest"]["addopts"]) if arg.startswith("-r")]
    assert chars and {"f", "E", "s"} <= set(chars[-1]), chars
