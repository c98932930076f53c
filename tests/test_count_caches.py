"""The count mode's simulated caches and branches (docs/instruction-counts.md#simulated-caches-and-branches), without
Valgrind or a child run: the options' parsing and one-line refusals, the workers' Valgrind command with the
geometry, the dump reader on a synthetic dump with cache and branch events, what a case and the run record, and the
history's count key split on the geometry while a count without one keeps its key."""

from __future__ import annotations

import types

import pytest

from bench.test_phases import counted_info
from phasebench import schema
from phasebench.history import points
from phasebench.history import series as series_mod
from phasebench.method import METHOD_VERSION
from phasebench.phase_round import CountedRound
from phasebench.plugin import counting as plugin_counting
from phasebench.plugin.session import PhasebenchSession
from phasebench.worker import counting
from tests.test_history import COUNTS, history, saved, scratch_repo, write

GEOMETRY = {"--count-i1": "32768,8,64", "--count-d1": "32768,8,64", "--count-ll": "8388608,16,64"}
CACHES = {"I1": [32768, 8, 64], "D1": [32768, 8, 64], "LL": [8388608, 16, 64]}
NONE_GIVEN = dict.fromkeys(GEOMETRY)


def options(**given):
    """config.getoption over these values (the options' dests), the count options unset unless given."""
    values = {"count": None, "count_i1": None, "count_d1": None, "count_ll": None, "count_branches": False} | given
    return lambda name, default=None: values.get(name, default)


def test_the_options_are_the_plugins(pytestconfig):
    """The plugin declares them (this run loaded it): unset, they ask for nothing."""
    assert [pytestconfig.getoption(name) for name in ("count_i1", "count_d1", "count_ll", "count_branches")] == [
        None, None, None, False]
    assert plugin_counting.simulation(pytestconfig.getoption) == {}


def test_the_geometry_is_parsed_and_branches_may_come_alone():
    assert counting.simulation(None, NONE_GIVEN, False) == {}  # nothing asked: the count mode as it was
    assert counting.simulation("instructions", GEOMETRY, False) == {"caches": CACHES, "branches": False}
    assert counting.simulation("instructions", NONE_GIVEN, True) == {"caches": None, "branches": True}
    asked = options(count="instructions", count_i1="32768,8,64", count_d1="32768,8,64", count_ll="8388608,16,64",
                    count_branches=True)
    assert plugin_counting.simulation(asked) == {"caches": CACHES, "branches": True}


@pytest.mark.parametrize("given, branches, error", [
    ({"--count-i1": "32768,8,64"}, False, "--count-i1 needs --count instructions"),
    ({}, True, "--count-branches needs --count instructions"),
    (GEOMETRY, False, "--count-i1 needs --count instructions"),
], ids=["cache-without-count", "branches-without-count", "geometry-without-count"])
def test_each_option_without_the_count_mode_is_refused(given, branches, error):
    with pytest.raises(ValueError) as refused:
        counting.simulation(None, NONE_GIVEN | given, branches)
    assert str(refused.value).startswith(error) and "\n" not in str(refused.value)


def test_a_geometry_given_in_part_is_refused_none_is_taken_from_the_virtual_cpu():
    with pytest.raises(ValueError) as refused:
        counting.simulation("instructions", NONE_GIVEN | {"--count-d1": "32768,8,64"}, False)
    line = str(refused.value)
    assert line.startswith("--count-i1, --count-ll missing: ") and "none from the virtual CPU" in line
    assert "\n" not in line


@pytest.mark.parametrize("text, why", [
    ("32768,8", ""), ("32768,8,64,1", ""), ("32k,8,64", ""), ("32768,0,64", ""), ("-32768,8,64", ""), ("", ""),
    ("32768,8,48", "the line must be a power of two of at least 16 bytes"),
    ("32768,8,8", "the line must be a power of two of at least 16 bytes"),
    ("64,1,64", "the size must exceed the line and hold ASSOC lines"),
    ("1024,32,64", "the size must exceed the line and hold ASSOC lines"),
    ("12582912,16,64", "the sets, SIZE / (ASSOC x LINE), must be a whole power of two"),  # 12288 sets
    ("33554432,24,64", "the sets, SIZE / (ASSOC x LINE), must be a whole power of two"),  # not whole
])
def test_a_malformed_geometry_is_a_one_line_usage_error(text, why):
    with pytest.raises(ValueError) as refused:
        counting.simulation("instructions", GEOMETRY | {"--count-ll": text}, False)
    line = str(refused.value)
    assert line.startswith(f"--count-ll {text!r}: expected SIZE,ASSOC,LINE (bytes, ways, bytes), e.g. --count-ll ")
    assert line.endswith(why) and "\n" not in line


def test_the_session_refuses_it_as_a_usage_error(monkeypatch):
    """PhasebenchSession.from_config turns the ValueError into pytest's UsageError (exit status 4), first thing."""
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    config = types.SimpleNamespace(getoption=options(impl="python", count_ll="8388608,16,64"),
                                   invocation_params=types.SimpleNamespace(args=()), getini=lambda name: [],
                                   option=types.SimpleNamespace(benchmark_histogram=None))
    with pytest.raises(pytest.UsageError, match=r"^--count-ll needs --count instructions"):
        PhasebenchSession.from_config(config)


def test_the_workers_valgrind_command_carries_the_geometry():
    out, prefix = "/dir/callgrind.out", ["setarch", "x86_64", "-R"]
    plain = counting.command(out, prefix)
    assert plain == [*prefix, "valgrind", *counting.VALGRIND_OPTIONS, f"--callgrind-out-file={out}",
                     "--log-file=/dev/null"]  # without the options: as it always was
    simulated = counting.command(out, prefix, CACHES, True)
    assert simulated == [*prefix, "valgrind", *counting.VALGRIND_OPTIONS, "--cache-sim=yes", "--I1=32768,8,64",
                         "--D1=32768,8,64", "--LL=8388608,16,64", "--branch-sim=yes", f"--callgrind-out-file={out}",
                         "--log-file=/dev/null"]
    assert counting.command(out, [], None, True)[-3:-2] == ["--branch-sim=yes"]
    assert "--cache-sim=yes" not in counting.command(out, [], None, True)


def test_the_run_records_the_geometry_and_a_plain_count_records_what_it_did(monkeypatch):
    monkeypatch.setattr(counting, "valgrind_version", lambda: "valgrind-3.19.0")
    plain = plugin_counting.machine_info([], probed=False)["count"]
    assert "caches" not in plain and "branch_sim" not in plain
    assert plain["valgrind_options"] == list(counting.VALGRIND_OPTIONS)
    session = PhasebenchSession(impls=("python",), devices=("cpu",), workloads=(), threads=2, rounds=100,
                                warmup_rounds=10, round_timeout=300, epochs=1, run_rounds=1, processes=1,
                                source=None, cuda_reason=None)
    machine = session._count_instructions(set(), False, {"caches": CACHES, "branches": True})
    assert session.count == {"prefix": [], "caches": CACHES, "branches": True}  # what each worker's command gets
    count = machine["count"]
    assert count["caches"] == CACHES and count["branch_sim"] is True
    assert count["valgrind_options"][len(counting.VALGRIND_OPTIONS):] == [
        "--cache-sim=yes", "--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64", "--branch-sim=yes"]
    assert plugin_counting.simulated_text(count) == (", caches simulated I1=32768,8,64 D1=32768,8,64 "
                                                     "LL=8388608,16,64, branches simulated")
    assert plugin_counting.simulated_text(plain) == ""
    required = {"format": schema.FORMAT_VERSION, "method": METHOD_VERSION}  # what a whole run's machine_info adds
    schema.check_saved({"machine_info": {"phasebench": required | machine}, "benchmarks": []})


EVENTS = "Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim"
# A round's dump as callgrind writes it with --cache-sim=yes --branch-sim=yes: each cost line the position and the
# events in the `events:` order, zeros at the end left off; after calls= the call's inclusive cost (not the caller's).
DUMP = f"""version: 1
creator: callgrind-3.19.0
pid: 4242
cmd: python -m phasebench.worker.server
part: 2

desc: I1 cache: 32768 B, 64 B, 8-way associative
desc: D1 cache: 32768 B, 64 B, 8-way associative
desc: LL cache: 8388608 B, 64 B, 16-way associative
desc: Timerange: Basic block 100 - 200
desc: Trigger: Client Request: cpp/forward/2

positions: line
events: {EVENTS}
summary: 7300 2100 900 12 40 15 3 20 10 800 60 30 4

ob=/usr/lib/libpython3.11.so.1.0
fl=ceval.c
fn=_PyEval_EvalFrameDefault
10 1000 300 100 2 5 1 1 2 1 200 20 10 2
cob=/x/torch/lib/libtorch_cpu.so
cfn=at::native::addmm_out(at::Tensor const&)
calls=1 0
11 6000 1800 800 10 35 14 2 18 9 600 40 20 2
ob=/x/torch/lib/libtorch_cpu.so
fl=addmm.cpp
fn=at::native::addmm_out(at::Tensor const&)
5 5500 1700 780 8 34 14 2 18 9 550 38 20 2
6 300 50 10 1
ob=/usr/lib/x86_64-linux-gnu/libc.so.6
fl=memcpy.S
fn=__memcpy_avx_unaligned_erms
3 500 50 10 1 1 0 0 0 0 50 2

totals: 7300 2100 900 12 40 15 3 20 10 800 60 30 4
"""
TOTALS = dict(zip(EVENTS.split(), (7300, 2100, 900, 12, 40, 15, 3, 20, 10, 800, 60, 30, 4)))


def test_the_dump_reader_reads_every_event_the_dump_names(tmp_path):
    dump = tmp_path / "callgrind.out.2"
    dump.write_text(DUMP)
    parsed = counting.parse_dump(dump)
    assert parsed["events"] == TOTALS and list(parsed["events"]) == EVENTS.split()  # keyed, in the dump's order
    assert parsed["instructions"] == 7300 == parsed["events"]["Ir"]  # the count as it was: the first event's total
    assert sum(counting.split(parsed["self"]).values()) == 7300  # the split still places Ir
    read = counting.read_round(str(dump), "cpp/forward/2")
    assert read["events"] == TOTALS and read["instructions"] == 7300 and not dump.exists()


def test_without_a_totals_line_every_event_is_the_sum_of_the_self_costs(tmp_path):
    dump = tmp_path / "callgrind.out.3"
    dump.write_text("\n".join(line for line in DUMP.splitlines() if not line.startswith(("totals:", "summary:"))))
    parsed = counting.parse_dump(dump)
    assert parsed["events"] == TOTALS and parsed["instructions"] == 7300  # the calls= line's inclusive cost skipped
    plain = tmp_path / "callgrind.out.4"  # a count without simulation: Ir alone, as before
    plain.write_text("desc: Trigger: Client Request: python/loss/1\n\nevents: Ir\n\nfn=f\n1 25\n\ntotals: 25\n")
    assert counting.parse_dump(plain)["events"] == {"Ir": 25}
    assert set(counting.EVENTS) >= set(EVENTS.split())  # every event has its meaning


def test_a_case_records_each_events_rounds_and_a_plain_count_records_none():
    workers = [types.SimpleNamespace(count_floor=21, info=types.SimpleNamespace(cpu_capability="AVX2"))]

    def rounds(events: list[dict]) -> list[CountedRound]:
        return [CountedRound(instructions=e["Ir"], events=e, label=f"cpp/forward/{n}", split={"rest": e["Ir"]},
                             top=[]) for n, e in enumerate(events)]

    simulated = counted_info(rounds([TOTALS, TOTALS | {"Ir": 7310, "D1mr": 41}, TOTALS]), workers)
    assert simulated["count_events"]["Ir"] == simulated["instructions"] == [7300, 7310, 7300]
    assert simulated["count_events"]["D1mr"] == [40, 41, 40] and simulated["count_events"]["Bim"] == [4, 4, 4]
    assert list(simulated["count_events"]) == EVENTS.split()
    plain = counted_info(rounds([{"Ir": 25}, {"Ir": 25}]), workers)
    assert "count_events" not in plain and plain["instructions"] == [25, 25]
    benchmark = types.SimpleNamespace(extra_info={})
    schema.write(benchmark, schema.CountedPhaseInfo, phase="forward", **simulated)  # a key the record has
    assert schema.info_of({"extra_info": benchmark.extra_info}).count_events == simulated["count_events"]


def with_count(result: dict, **count) -> dict:
    result["machine_info"]["phasebench"]["count"].update(count)
    return result


def test_the_history_splits_count_series_on_the_geometry_and_keeps_a_plain_counts_key(tmp_path):
    shas, _ = scratch_repo(tmp_path / "repo", 4)
    other = CACHES | {"LL": [1048576, 16, 64]}
    paths = [write(tmp_path, "plain.json", saved(shas[0], COUNTS)),
             write(tmp_path, "caches.json", with_count(saved(shas[1], COUNTS), caches=CACHES)),
             write(tmp_path, "again.json", with_count(saved(shas[2], COUNTS), caches=CACHES)),
             write(tmp_path, "other.json", with_count(saved(shas[3], COUNTS), caches=other, branch_sim=True))]
    reading = points.read([str(p) for p in paths])
    keys = {p.source.rsplit("/", 1)[-1]: dict(p.key.machine) for p in reading.points}
    assert list(keys["plain.json"]) == ["valgrind", "glibc", "CPU capability", "torch", "pins"]  # its key as it was
    assert keys["caches.json"]["caches"] == "I1=32768,8,64 D1=32768,8,64 LL=8388608,16,64" == keys["again.json"][
        "caches"]
    assert keys["other.json"]["caches"].endswith("LL=1048576,16,64") and keys["other.json"]["branches"] == "simulated"
    found, built, _ = history(paths, tmp_path / "repo")
    backward = sorted(len(s.positions) for s in built if (s.key.phase, s.key.implementation) == ("backward", "python"))
    assert backward == [1, 1, 2]  # no simulation, one geometry twice, another geometry (with branches)
    assert "split on caches" in "\n".join(series_mod.splits(built))
    assert len({points.series_file(s.key) for s in built}) == len(built)  # compact series lie apart too
