"""The intervention study's switches (docs/method.md#switches-for-the-intervention-study; phasebench/plugin/switches.py):
each is accepted, refused in one line when malformed or when it cannot mean what it says, recorded in machine_info,
reaches the worker (the checks flag in its phase request, the environment and command it is started with, the count
mode's conditions in the worker), keeps a result from being compared with one of other switches, and leaves the
history's key of a run without it as it was; one real short child run with the checks off."""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import pytest

from phasebench import results, schema
from phasebench.gate.decide import Run, decide
from phasebench.history import points
from phasebench.method import METHOD_VERSION
from phasebench.phase_round import PhaseRound
from phasebench.plugin import switches
from phasebench.repository import ROOT
from phasebench.saved import SavedResult
from phasebench.worker import counting, protocol, server
from phasebench.worker.client import Conditions

# A default run of method 3 (the README's answer at commit 3779c89), saved before the switches existed.
ANSWER = ROOT / "tests" / "fixtures" / "method-3-default-run.json"


def options(**given):
    """config.getoption for the switches as given (None where not)."""
    values = {"round_checks": None, "omp_wait_policy": None, "pins": None} | given
    return values.__getitem__


# -- accepted, refused ----------------------------------------------------------------------------------------------

def test_without_the_switches_a_timed_run_leaves_the_checks_out_and_a_checking_run_keeps_them():
    timed = switches.parse(options())
    assert timed == switches.Switches(round_checks="off") and not timed.checks and not timed.pinned
    assert switches.conditions(timed) is None
    assert switches.header(timed) is None  # the mode's default is no switch
    for checking in (switches.parse(options(), disabled=True), switches.parse(options(), count="instructions")):
        assert checking == switches.Switches() and checking.checks
    assert switches.header(switches.parse(options(), disabled=True), disabled=True) is None
    # Asked for in a timed run, the checks are a switch, and the header says so.
    asked = switches.parse(options(round_checks="on"))
    assert asked.checks and "round checks on" in switches.header(asked)


@pytest.mark.parametrize("given, expected", [
    ({"round_checks": "off"}, switches.Switches(round_checks="off")),
    ({"round_checks": "on"}, switches.Switches()),
    ({}, switches.Switches(round_checks="off")),
    ({"omp_wait_policy": "passive"}, switches.Switches(round_checks="off", omp_wait_policy="passive")),
    ({"omp_wait_policy": "default"}, switches.Switches(round_checks="off", omp_wait_policy="default")),
    ({"pins": "count"}, switches.Switches(round_checks="off", pins="count")),
    ({"pins": "none"}, switches.Switches(round_checks="off")),
])
def test_each_switch_is_accepted(given, expected):
    assert switches.parse(options(**given)) == expected


@pytest.mark.parametrize("given, threads, count, disabled, error", [
    ({"round_checks": "maybe"}, 0, None, False, "--round-checks 'maybe': valid values are on, off"),
    ({"omp_wait_policy": "PASSIVE"}, 0, None, False,
     "--omp-wait-policy 'PASSIVE': valid values are passive, active, default"),
    ({"pins": "all"}, 0, None, False, "--pins 'all': valid values are none, count"),
    ({"round_checks": "off"}, 0, None, True, "--round-checks off is for timed runs: under --benchmark-disable"),
    ({"round_checks": "off"}, 0, "instructions", False, "--round-checks off is for timed runs: the count mode's"),
    ({"pins": "count"}, 0, "instructions", False, "--pins count times under the count mode's conditions"),
    ({"pins": "count"}, 2, None, False, "--pins count times on the count mode's one intra-op thread: leave out "
                                        "--threads 2 or give 1"),
])
def test_a_malformed_or_meaningless_switch_is_refused_in_one_line(given, threads, count, disabled, error):
    with pytest.raises(ValueError) as raised:
        switches.parse(options(**given), threads, count, disabled)
    assert str(raised.value).startswith(error) and "\n" not in str(raised.value)
    if given.get("pins") == "count" and threads == 2:
        assert switches.parse(options(**given), 1) == switches.Switches(round_checks="off", pins="count")


# -- recorded -------------------------------------------------------------------------------------------------------

def test_machine_info_records_where_each_switch_stood():
    plain = switches.machine_info(switches.Switches(), environ={})
    assert plain == {"round_checks": "on", "omp_wait_policy": "default", "pins": None}
    assert switches.machine_info(switches.Switches(), environ={"OMP_WAIT_POLICY": "PASSIVE"})["omp_wait_policy"] \
        == "passive"  # inherited: the test command's
    given = switches.Switches(round_checks="off", omp_wait_policy="active", pins="count")
    info = switches.machine_info(given, ["setarch", "x86_64", "-R"], "AVX2", environ={"OMP_WAIT_POLICY": "PASSIVE"})
    assert info["round_checks"] == "off" and info["omp_wait_policy"] == "active"
    pins = info["pins"]
    assert pins["conditions"] == "count" and pins["env"] == counting.PINS and pins["aslr_off"] is True
    assert pins["cpu_capability"] == "AVX2" and "Valgrind" in pins["not_applied"] and pins["gc"] and pins["type_cache"]
    # The schema knows them: a saved result holding them reads back.
    result = {"machine_info": {"phasebench": {"method": METHOD_VERSION} | info}, "benchmarks": []}
    machine = schema.machine_of(result)
    assert (machine.round_checks, machine.omp_wait_policy, machine.pins) == ("off", "active", pins)


# -- reaching the worker --------------------------------------------------------------------------------------------

def test_the_wait_policy_and_the_pins_reach_the_workers_environment_and_command():
    passive = switches.conditions(switches.Switches(omp_wait_policy="passive"))
    assert passive == Conditions({"OMP_WAIT_POLICY": "PASSIVE"})
    default = switches.conditions(switches.Switches(omp_wait_policy="default"))
    command, env = default.apply(["python", "-m", "w"], {"OMP_WAIT_POLICY": "PASSIVE", "KEEP": "1"})
    assert command == ["python", "-m", "w"] and env == {"KEEP": "1"}  # OpenMP's own policy: none set
    pinned = switches.conditions(switches.Switches(omp_wait_policy="active", pins="count"), ["setarch", "x", "-R"])
    command, env = pinned.apply(["python", "-m", "w", "--impl", "cpp"], None)
    assert command == ["setarch", "x", "-R", "python", "-m", "w", "--impl", "cpp", "--pins", "count"]
    assert env["OMP_WAIT_POLICY"] == "ACTIVE" and all(env[name] == value for name, value in counting.PINS.items())
    # What a process started so sees.
    command, env = passive.apply([sys.executable, "-c", "import os; print(os.environ['OMP_WAIT_POLICY'])"], None)
    assert subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout.strip() == "PASSIVE"


class RecordingTrainer:
    """A stand-in trainer that records how each round was asked for."""

    def __init__(self):
        self.asked = []

    def run_phase(self, name: str, **given) -> PhaseRound:
        self.asked.append((name, given))
        product = {"leftovers": 0} if given.get("checks", True) else {"checks": "off"}
        return PhaseRound(1000, 1000, 1000, product, 0, 0)


def worker(pins: str | None = None) -> tuple[server.Server, RecordingTrainer]:
    trainer = RecordingTrainer()
    serving = server.Server(argparse.Namespace(impl="python", language="python", library=None, count_out=None,
                                               pins=pins))
    serving.adapter = SimpleNamespace(trainer=trainer)
    return serving, trainer


def test_the_checks_flag_reaches_the_trainer_in_the_phase_request():
    serving, trainer = worker()
    replies = []
    lines = [protocol.Phase("forward"), protocol.Phase("forward", checks=False),
             protocol.Phase("backward", checks=True)]
    serving.serve([request.encode() for request in lines], replies.append)
    assert [reply["ok"] for reply in replies] == [True] * 3, replies
    # A round with its checks asks the trainer as before; one without says so.
    assert trainer.asked == [("forward", {}), ("forward", {"checks": False}), ("backward", {})]
    assert [reply["product"] for reply in replies] == [{"leftovers": 0}, {"checks": "off"}, {"leftovers": 0}]
    assert json.loads(protocol.Phase("loss").encode()) == {"cmd": "phase", "name": "loss", "checks": True}


def test_the_cpp_trainer_turns_its_sessions_checks_off_and_on_as_each_round_asks(monkeypatch):
    """The C++ worker's trainer: a round without its checks turns the session's off first (pb_set_round_checks, C ABI
    8), and its product says so as the Python worker's does; the next round with them turns them on again. The switch
    is called only where the setting changes (tests/test_c_abi_sessions.py runs it in the library)."""
    from phasebench.worker import cpp_lib

    trainer = cpp_lib.CppTrainer.__new__(cpp_lib.CppTrainer)
    trainer.handle, trainer.round_checks = None, True
    calls = []
    monkeypatch.setattr(trainer, "call", lambda name, *args: calls.append((name, *args[1:2])), raising=False)
    monkeypatch.setattr(cpp_lib, "_product", lambda result: {"leftovers": 0})
    assert trainer.run_phase("forward").product == {"leftovers": 0}
    assert trainer.run_phase("forward", checks=False).product == {"checks": "off"}
    assert trainer.run_phase("backward", checks=False).product == {"checks": "off"}
    assert trainer.run_phase("forward").product == {"leftovers": 0}
    assert [call for call in calls if call[0] == "pb_set_round_checks"] == [("pb_set_round_checks", 0),
                                                                             ("pb_set_round_checks", 1)]
    assert [call[0] for call in calls] == ["pb_run_phase", "pb_set_round_checks", "pb_run_phase", "pb_run_phase",
                                           "pb_set_round_checks", "pb_run_phase"]
    assert "pb_set_round_checks" in cpp_lib._SIGNATURES and cpp_lib.PB_ABI_VERSION >= 8


def test_the_count_mode_conditions_are_applied_in_the_worker(monkeypatch):
    calls = []
    for name in ("collect", "freeze", "disable"):
        monkeypatch.setattr(gc, name, lambda *args, name=name: calls.append(name))
    monkeypatch.setattr(sys, "_clear_type_cache", lambda: calls.append("type cache"))
    trainer = SimpleNamespace(timed=lambda body, owner: (calls.append("clock"), body(owner), (1, 2, 3))[-1])
    assert server.count_conditions("python", trainer) == "count"
    assert calls == ["collect", "freeze", "disable"]
    calls.clear()
    assert trainer.timed(lambda owner: calls.append("body"), None) == (1, 2, 3)
    assert calls == ["type cache", "clock", "body"]  # emptied before the clock is read, not inside it
    cpp = SimpleNamespace(timed="untouched")
    server.count_conditions("cpp", cpp)
    assert cpp.timed == "untouched"  # the C++ worker's body holds no Python

    calls.clear()
    serving, recorder = worker(pins="count")
    assert serving.pinned
    serving.serve([protocol.Phase("forward").encode()], lambda reply: None)
    assert calls == ["collect"] and recorder.asked == [("forward", {})]  # a collection before each round
    counted = server.Server(argparse.Namespace(impl="python", language="python", library=None, count_out="out",
                                               pins="count"))
    assert not counted.pinned  # the count mode applies its own


def test_without_its_checks_a_python_round_does_none_of_their_work(settings, tmp_path):
    """The Python trainer, in this process: with its checks a round's product proves its work; without them nothing is
    taken before the body (the generator's state, the gradients, conv1's weight), nothing counted after the release,
    and no product made; the training goes on the same (the checks draw nothing from the generator)."""
    from bench.test_phases import work_problems
    from phasebench.train.trainer import Trainer

    trainer = Trainer(settings.source.root, log_path=str(tmp_path / "progress.log"), threads=1)
    taken = []
    trainer.weak_held = lambda original=trainer.weak_held: (taken.append("weak references"), original())[1]
    try:
        for phase in ("forward", "backward", "param_update"):
            product = trainer.run_phase(phase).product
            assert work_problems(phase, product) == [] and product["leftovers"] == 0, (phase, product)
            assert taken == ["weak references"]
            taken.clear()
            trainer.zero_before = None  # the release leaves it; the other two it frees
            assert trainer.run_phase(phase, checks=False).product == {"checks": "off"}
            assert taken == [] and (trainer.rng_before, trainer.zero_before, trainer.update_check) == (None,) * 3
    finally:
        trainer.close()


# -- compared, keyed ------------------------------------------------------------------------------------------------

def switched_result(name: str = "base.json", **info) -> SavedResult:
    result = json.loads(ANSWER.read_text(encoding="utf8"))
    result["machine_info"]["phasebench"].update(info)
    return SavedResult.from_json(result, name)


def test_a_result_timed_with_other_switches_is_not_compared():
    plain = switched_result()
    assert results.switched(plain.machine) == {}  # saved before the switches existed
    assert results.switched(switched_result(round_checks="on", omp_wait_policy="default").machine) == {}
    off = switched_result(round_checks="off", omp_wait_policy="passive", pins={"conditions": "count"})
    assert results.switched(off.machine) == {"round checks": "off", "OMP_WAIT_POLICY": "passive", "pins": "count"}
    method = plain.method
    assert results.mismatch(plain, method, "time", {}) is None
    why = results.mismatch(plain, method, "time", {"round checks": "off"})
    assert why.startswith("base.json was timed with no switch, this run with round checks off") and "\n" not in why
    assert results.mismatch(plain, method, "time") is None  # no current switches given: not checked
    base, head = Run.of(plain), Run.of(switched_result("head.json", round_checks="off"))
    with pytest.raises(ValueError, match="runs timed with different switches"):
        decide([base], [head])
    assert decide([base], [Run.of(switched_result("again.json"))])  # the same switches: decided as before


def test_a_run_without_the_switches_keeps_its_history_key_and_one_with_them_gets_its_own():
    platform = {"cpu_brand": "brand", "cores": 2, "kernel": "6.1", "python": "3.11"}
    before = schema.MachineInfo(method=3, cpu="Xeon", torch="2.14.1+cpu", threads=2)
    old_key = (("CPU", "Xeon"), ("cores", "2"), ("kernel", "6.1"), ("torch", "2.14.1+cpu"), ("threads", "2"))
    assert points.machine_key(before, platform, "cpu", 2, "commit") == old_key
    unset = replace(before, round_checks="on", omp_wait_policy="default", pins=None)
    assert points.machine_key(unset, platform, "cpu", 2, "commit") == old_key
    switched = replace(before, round_checks="off", omp_wait_policy="passive")
    assert points.machine_key(switched, platform, "cpu", 2, "commit") == old_key + (
        ("round checks", "off"), ("OMP_WAIT_POLICY", "passive"))
    counted = schema.MachineInfo(method=3, metric="instructions", torch="2.14.1+cpu",
                                 count={"valgrind": "valgrind-3.19.0", "glibc": "2.36", "cpu_capability": "AVX2",
                                        "pins": {"A": "1"}})
    count_key = points.machine_key(counted, platform, "cpu", 1, "commit")
    assert count_key == points.machine_key(replace(counted, round_checks="on"), platform, "cpu", 1, "commit")
    assert points.machine_key(replace(counted, round_checks="off"), platform, "cpu", 1, "commit") \
        == count_key + (("round checks", "off"),)
