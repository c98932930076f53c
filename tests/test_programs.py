"""Programs beside the seed's (phasebench/programs.py; docs/architecture.md#adding-a-program): --program selects them,
each phase of a selected program is a per-phase case of the published pair named PROGRAM:PHASE, its place in the run
order and its product checks come from its declaration, and no module but the declaring ones names a program."""

from __future__ import annotations

import ast
from dataclasses import replace
from types import SimpleNamespace

import pytest

from phasebench import programs, registry
from phasebench.plugin import cases, fixtures
from phasebench.programs import DEFAULT_PROGRAM, PROGRAMS, case_phase, phase_place, split_case_phase
from phasebench.repository import ROOT
from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import ONE_SHOT_PHASES, TRAINING_PHASES, workloads
from phasebench.train import regression_checks

OTHERS = [name for name in PROGRAMS if name != DEFAULT_PROGRAM]
# The modules that may name a program other than the seed's: where programs are declared, their trainers and their
# product checks (docs/architecture.md#adding-a-program lists the files a program touches).
DECLARING = {"phasebench/programs.py", "phasebench/train/regression.py", "phasebench/train/regression_checks.py",
             "phasebench/train/dcgan.py", "phasebench/train/dcgan_checks.py", "phasebench/worker/cpp_lib.py",
             "phasebench/worker/program_steps.py"}
NAMES = set(OTHERS)
# A program's name in another sense, where it is not the program: (module, literal).
OTHER_SENSES = {("phasebench/gate/comment.py", "regression")}  # the count gate's older verdict word for a slowdown


def made_cases(settings, program_text: str, fixturenames=("phase", "impl", "device", "workload"), **changes):
    chosen = replace(settings, programs=programs.parse(program_text), **changes)
    made = {}
    metafunc = SimpleNamespace(fixturenames=["benchmark", "worker_for", *fixturenames],
                               config=SimpleNamespace(phasebench=chosen),
                               parametrize=lambda names, made_cases, ids: made.update(names=names, cases=made_cases,
                                                                                      ids=ids))
    cases.pytest_generate_tests(metafunc)
    return made


def test_program_option_parses_known_names_in_order_and_refuses_others():
    assert programs.parse(None) == (DEFAULT_PROGRAM,)
    assert programs.parse(f" regression,{DEFAULT_PROGRAM},regression") == ("regression", DEFAULT_PROGRAM)
    for bad in ("nope", "regression,nope", ","):
        with pytest.raises(ValueError, match=f"--program '{bad}': valid values are mnist, regression, dcgan"):
            programs.parse(bad)


def test_a_case_phase_names_its_program_except_the_seeds():
    assert case_phase(DEFAULT_PROGRAM, "forward") == "forward"
    assert case_phase("regression", "forward_loss") == "regression:forward_loss"
    found, phase = split_case_phase("regression:backward")
    assert (found.name, phase) == ("regression", "backward")
    assert split_case_phase("forward")[0].name == DEFAULT_PROGRAM
    with pytest.raises(ValueError, match="program 'regression' has no phase 'forward'"):
        split_case_phase("regression:forward")
    with pytest.raises(ValueError, match="unknown program 'nope'"):
        split_case_phase("nope:forward")
    with pytest.raises(ValueError, match="named bare"):
        split_case_phase(f"{DEFAULT_PROGRAM}:forward")


def test_program_phases_are_cases_of_the_published_pair_in_both_languages(settings):
    """Every phase of the regression program is a case of python and of cpp on each device, named PROGRAM:PHASE, on
    the published workload once, whatever --width asks of the seed's program; the implementations that change the
    seed's pipeline have none."""
    made = made_cases(settings, "regression", impls=registry.NAMES, workloads=workloads((1, 4), (64,)))
    expected = [f"regression:{phase}-{impl}-{device}" for phase in PROGRAMS["regression"].phases
                for impl in ("python", "cpp") for device in ("cpu", "cuda")]
    assert sorted(made["ids"]) == sorted(expected)
    workload_at = made["names"].index("workload")
    assert {case.values[workload_at] for case in made["cases"]} == {DEFAULT_WORKLOAD}
    # A test that takes no phase is the seed program's: no cases where --program leaves it out.
    assert made_cases(settings, "regression", fixturenames=("impl", "device"))["ids"] == []
    # A test that takes `program` (the training run of another program): one case a program and implementation.
    assert sorted(made_cases(settings, f"{DEFAULT_PROGRAM},regression", fixturenames=("program", "impl", "device"),
                             impls=registry.NAMES)["ids"]) == sorted(
        f"regression-{impl}-{device}" for impl in ("python", "cpp") for device in ("cpu", "cuda"))
    assert made_cases(settings, DEFAULT_PROGRAM, fixturenames=("program", "impl", "device"))["ids"] == []


def test_the_seed_programs_cases_are_as_before_beside_another_program(settings):
    alone = made_cases(settings, DEFAULT_PROGRAM)["ids"]
    both = made_cases(settings, f"{DEFAULT_PROGRAM},regression")["ids"]
    assert alone and ":" not in "".join(alone)
    assert both[: len(alone)] == alone
    assert len(both) == len(alone) + 2 * 2 * len(PROGRAMS["regression"].phases)


def test_a_programs_phase_takes_its_place_from_its_declaration():
    seed = TRAINING_PHASES + ONE_SHOT_PHASES
    assert [phase_place(phase, seed) for phase in TRAINING_PHASES] == list(range(len(TRAINING_PHASES)))
    declared = PROGRAMS["regression"].phases
    assert [phase_place(case_phase("regression", phase), seed) for phase in declared] == list(range(len(declared)))
    # The pair's first runner alternates over a program's phases, as over the seed's.
    impls = ("python", "cpp")
    firsts = [cases.run_order(7, case_phase("regression", phase), "cpu", "", list(impls), impls)[0]
              for phase in declared[:2]]
    assert sorted(firsts) == sorted(impls)


def test_a_programs_cases_ask_for_workers_of_their_program(settings):
    made = made_cases(settings, f"{DEFAULT_PROGRAM},regression")
    items = [SimpleNamespace(fixturenames=["worker_for", *made["names"]],
                             callspec=SimpleNamespace(params=dict(zip(made["names"], case.values))))
             for case in made["cases"]]
    keys = {fixtures.pool_key(item) for item in items}
    assert ("python", "cpu", DEFAULT_WORKLOAD, "regression") in keys
    assert ("python", "cpu", DEFAULT_WORKLOAD, DEFAULT_PROGRAM) in keys
    assert {key[3] for key in keys} == {DEFAULT_PROGRAM, "regression"}


GOOD = {"get_batch": {"shape": [32, 4], "finite": True, "loss": None, "batch": 3},
        "zero_grad": {"shape": [1, 4], "finite": True, "loss": None, "nonzero_grads": 0},
        "forward_loss": {"shape": [], "finite": True, "loss": 1.5, "recompute_error": 0.0},
        "loss_item": {"shape": [], "finite": True, "loss": 1.5},
        "backward": {"shape": [1, 4], "finite": True, "loss": None, "zero_before": True, "nonzero_grads": 2},
        "update": {"shape": [1, 4], "finite": True, "loss": None, "update_error": 0.0, "moved": 0.5}}
EMPTY = dict.fromkeys(("batch", "recompute_error", "zero_before", "nonzero_grads", "update_error", "moved"))


@pytest.mark.parametrize("step, broken, says", [
    ("get_batch", {"shape": [32, 3]}, "shape [32, 3]"),
    ("zero_grad", {"nonzero_grads": 1}, "1 of 2 gradients non-zero"),
    ("forward_loss", {"recompute_error": 0.5}, "differs by 0.5"),
    ("loss_item", {"loss": None}, "loss None"),
    ("backward", {"zero_before": False}, "gradients zero before the clock: False"),
    ("update", {"moved": 0.0}, "did not move"),
    ("update", {"finite": False}, "non-finite"),
])
def test_the_regression_products_are_checked(step, broken, says):
    assert regression_checks.problems(step, EMPTY | GOOD[step]) == []
    found = PROGRAMS["regression"].product_problems(step, EMPTY | GOOD[step] | broken)
    assert any(says in problem for problem in found), found
    assert regression_checks.problems("forward", EMPTY | GOOD["update"])  # a phase it lacks


def program_names(path) -> list[str]:
    """Where a module names a program other than the seed's: a string literal that is a program's name, or a case
    phase of one (PROGRAM:PHASE)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value.partition(programs.SEPARATOR)[0]
            if name in NAMES and (str(path.relative_to(ROOT)), node.value) not in OTHER_SENSES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return found


def test_no_module_but_the_declaring_ones_names_a_program():
    """The plugin, the run order, the report, the gate and the schema handle any program's phases from
    phasebench/programs.py's declarations: only the declaring modules (DECLARING) name a program."""
    paths = [path for folder in ("phasebench", "bench") for path in sorted((ROOT / folder).rglob("*.py"))]
    named = [hit for path in paths if str(path.relative_to(ROOT)) not in DECLARING for hit in program_names(path)]
    assert not named, "modules that name a program outside its declaration:\n" + "\n".join(named)
    # The check finds what it looks for: the declaration itself names its programs.
    assert program_names(ROOT / "phasebench/programs.py")


def test_the_answer_tables_a_programs_phases_beside_the_seeds(tmp_path):
    """A saved result with another program's cases (their phase PROGRAM:PHASE, their program recorded) is read and
    answered with a row per phase, next to the seed's rows, whose keys it never shares; the report tables and charts
    them apart."""
    import copy
    import json

    from phasebench.report import findings
    from phasebench.saved import SavedResult
    from tests.test_report import COMPLETE, answer_rows

    result = json.loads(COMPLETE.read_text())
    added = []
    for bench in result["benchmarks"]:
        info = bench["extra_info"]
        if info["phase"] == "backward" and info["device"] == "cpu" and info["implementation"] in ("python", "cpp"):
            twin = copy.deepcopy(bench)
            phase = case_phase("regression", "backward")
            twin["extra_info"] |= {"phase": phase, "program": "regression"}
            twin["group"], twin["name"] = phase, bench["name"].replace("[backward-", f"[{phase}-")
            twin["fullname"] = bench["fullname"].replace("[backward-", f"[{phase}-")
            twin["stats"] |= {name: bench["stats"][name] / 10 for name in ("min", "max", "mean", "median", "q1", "q3",
                                                                            "iqr", "stddev") if name in bench["stats"]}
            added.append(twin)
    assert len(added) == 2
    result["benchmarks"] += added
    saved = SavedResult.from_json(result, "result.json")
    cpu = answer_rows(findings.answer(saved), "phasebench: the answer on cpu")
    own = answer_rows(findings.answer(SavedResult.from_json(json.loads(COMPLETE.read_text()), "result.json")),
                      "phasebench: the answer on cpu")
    assert cpu["regression:backward"][:2] == [f"{float(value) / 10:.4f}" for value in own["backward"][:2]]
    assert cpu["backward"] == own["backward"]
    # The report's Markdown: the program's own per-phase table, its row labelled as the program labels it.
    from phasebench.report.cli import render

    text, _ = render(ROOT / "result.json", saved, "markdown")
    section = text[text.index("**regression: per phase on cpu"):]
    row = next(line for line in section.splitlines() if line.startswith(f"| {PROGRAMS['regression'].label('backward')} |"))
    python_ms, cpp_ms = (float(cell) for cell in row.split("|")[2:6:3])
    assert (f"{python_ms:.4f}", f"{cpp_ms:.4f}") == tuple(cpu["regression:backward"][:2])
    # And the chart: a panel of the program's phases after the seed's, its ratio beside theirs.
    from phasebench.report.charts import chart

    drawn = chart(tmp_path / "chart.png", saved, "test")
    assert drawn["panels"][:2] == ["cpu: per phase, one call", "cpu: regression: per phase, one call"], drawn["panels"]
    from phasebench.report.cases import PHASES

    seeds, added = drawn["annotations"][:len(PHASES)], drawn["annotations"][len(PHASES):]  # an annotation a phase
    backward = dict(seeds)[PROGRAMS[DEFAULT_PROGRAM].label("backward")]  # the twin's saved ratio is the seed's
    assert added[:len(PROGRAMS["regression"].phases)] == [
        (PROGRAMS["regression"].label(phase), backward if phase == "backward" else "Python and C++: not measured")
        for phase in PROGRAMS["regression"].phases], added


def dcgan_flops(batch: int) -> int:
    """A DCGAN step's convolution FLOPs, worked out by hand: a convolution's forward is 2·N·Cin·Cout·k² FLOPs per
    output position (a transposed one's per input position), its weight's gradient as many, its input's gradient as
    many where the input needs one. A step runs the discriminator D forward three times (real, fakes detached, fakes),
    backward three times (its first layer's input gradient only on the generator's fakes), and the generator G
    forward once and backward once (no gradient for the noise): 9·D − 2·D₁ + 3·G − G₁."""
    def conv(c_in, c_out, k, positions):
        return 2 * batch * c_in * c_out * k * k * positions
    generator = [conv(100, 256, 4, 1), conv(256, 128, 3, 4 * 4), conv(128, 64, 4, 7 * 7), conv(64, 1, 4, 14 * 14)]
    discriminator = [conv(1, 64, 4, 14 * 14), conv(64, 128, 4, 7 * 7), conv(128, 256, 4, 3 * 3), conv(256, 1, 3, 1)]
    return 9 * sum(discriminator) - 2 * discriminator[0] + 3 * sum(generator) - generator[0]


@pytest.mark.needs_data
def test_step_counts_count_each_programs_arithmetic_and_operations_in_both_languages(pytestconfig, tmp_path):
    """python -m phasebench.worker.step_counts against answers worked out by hand: a regression step multiplies a
    32×4 batch by a 4×1 weight forward (256 FLOPs) and twice that backward (the weight's and the input's gradients:
    768); the seed's Net at batch 64 is 61,504,000 FLOPs forward (its convolutions and linear layers) and
    104,576,000 backward (conv1 needs no input gradient); a DCGAN step at batch 64, dcgan_flops's. Both languages'
    counts are the same network's; each operation total is its operators' sum."""
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "phasebench.worker.step_counts", "--steps", "1",
                          f"--mnist-root={pytestconfig.phasebench.source.root}", "--json", str(tmp_path / "counts.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    counted = json.loads((tmp_path / "counts.json").read_text())["programs"]
    assert set(counted) == set(PROGRAMS)
    expected_flops = {DEFAULT_PROGRAM: 61_504_000 + 104_576_000, "regression": 768, "dcgan": dcgan_flops(64)}
    for name, languages in counted.items():
        assert set(languages) == set(programs.LANGUAGES), languages
        for language, figures in languages.items():
            assert figures["flops_per_step"] == expected_flops[name], (name, language, figures["flops_per_step"])
            assert figures["operations_per_step"] == sum(figures["operations_by_name"].values()) > 0, (name, language)
    # The model's operators, dispatched from C++ through the same torch, are seen as Python's are.
    assert counted[DEFAULT_PROGRAM]["cpp"]["operations_by_name"]["aten.convolution_backward"] == 2


def test_a_program_takes_its_declared_rounds_unless_the_command_gives_some(settings):
    """A DCGAN step takes a tenth of a second: its per-phase cases take its declared rounds and warm-up, unless the
    command names --rounds or --warmup-rounds or counts instructions; the seed's and regression's take the options'."""
    declared = PROGRAMS["dcgan"]
    base = replace(settings, rounds=100, warmup_rounds=10, count=None, given=frozenset())
    own = base.for_program("dcgan")
    assert (own.rounds, own.warmup_rounds) == (declared.rounds, declared.warmup_rounds) != (100, 10)
    assert base.for_program(DEFAULT_PROGRAM) is base and base.for_program("regression") is base
    asked = replace(base, given=frozenset({"--rounds"})).for_program("dcgan")
    assert (asked.rounds, asked.warmup_rounds) == (100, declared.warmup_rounds)
    counting = replace(base, count={"prefix": []})
    assert counting.for_program("dcgan") is counting


def test_a_programs_workers_get_the_settings_it_declares(settings):
    """The data folder goes to the trainers of a program that reads MNIST, never to one that draws its data."""
    options = {name: settings.worker_options("cpu", log_path="run.log", impl="python", program=name)
               for name in OTHERS}
    assert options["dcgan"]["data_root"] == settings.source.root and options["dcgan"]["log_path"] == "run.log"
    assert "data_root" not in options["regression"]
    with pytest.raises(ValueError, match="unknown settings"):
        replace(PROGRAMS["regression"], settings=("mnist_root",))


def test_the_count_mode_refuses_a_program_that_says_why_it_cannot_be_counted():
    from phasebench.plugin.session import uncounted_program

    uncounted = [name for name, declared in PROGRAMS.items() if declared.not_counted]
    assert uncounted, "no program declares itself uncounted: this test checks nothing"
    assert uncounted_program((DEFAULT_PROGRAM, "regression")) is None
    assert uncounted_program(("regression", uncounted[0])) == (
        f"--count cannot count program {uncounted[0]}: {PROGRAMS[uncounted[0]].not_counted}")
