"""The measurement method cannot change unseen (phasebench/method.py): the sources that define what a clock holds
are hashed, and the hash recorded beside METHOD_VERSION must be theirs."""

from __future__ import annotations

import re

from phasebench import method
from phasebench.method import METHOD_VERSION
from phasebench.repository import ROOT


def test_the_sources_that_define_the_clocks_are_those_the_method_was_recorded_for():
    now = method.method_sources_hash()
    assert now == method.METHOD_SOURCES_HASH, (
        f"phasebench/method.py's METHOD_SOURCES changed since METHOD_VERSION {method.METHOD_VERSION} was recorded "
        f"(hash {method.METHOD_SOURCES_HASH}, now {now}). If what a clock holds changed, bump METHOD_VERSION and say "
        f"what the new version means in its history; either way record the new hash: METHOD_SOURCES_HASH = \"{now}\" "
        f"(python -m phasebench.method --hash prints it)")


def test_every_method_source_exists():
    missing = [name for name in method.METHOD_SOURCES if not (ROOT / name).is_file()]
    assert not missing, f"METHOD_SOURCES names files that are not there: {missing}"


def test_the_history_says_what_every_version_means():
    said = {int(number) for number in re.findall(r"^(\d+)\. ", method.__doc__, re.M)}
    assert said == set(range(1, method.METHOD_VERSION + 1)), sorted(said)


def test_the_hash_ignores_line_endings_and_sees_a_change(tmp_path):
    for name in method.METHOD_SOURCES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"a clock\nits body\n")
    unix = method.method_sources_hash(tmp_path)
    first = tmp_path / method.METHOD_SOURCES[0]
    first.write_bytes(b"a clock\r\nits body\r\n")
    assert method.method_sources_hash(tmp_path) == unix
    first.write_bytes(b"a clock\nits body, and a sleep\n")
    assert method.method_sources_hash(tmp_path) != unix


def test_the_command_prints_the_hash(capsys):
    assert method.main(["--hash"]) == 0
    assert capsys.readouterr().out.strip() == method.method_sources_hash()


def test_a_result_of_the_previous_method_is_refused_naming_both():
    """A method-3 result (training run set-up with torchvision's import in Python's) against this method's: the
    comparison is refused, and the reason names both methods."""
    from phasebench import results
    from phasebench.saved import SavedResult

    path = ROOT / "tests" / "fixtures" / "method-3-default-run.json"  # a default run of method 3
    saved = SavedResult.load(path)
    assert saved.method == 3
    why = results.mismatch(saved, METHOD_VERSION)
    assert why is not None and f"method 3, this run by method {METHOD_VERSION}" in why, why
