"""The registry of implementations and the workload record (docs/implementations.md#implementations-and-workloads)."""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from phasebench import registry, spec
from phasebench.repository import ROOT
from phasebench.spec import DEFAULT, SYNCS, Workload, parse_sizes, workloads
from phasebench.spec import TRAINING_PHASES as PHASE_NAMES


def test_every_implementation_is_complete():
    for impl in registry.REGISTRY:
        assert impl.reference is None or impl.reference in registry.BY_NAME, impl
        # grad_sync: a data-parallel implementation's all-reduce after backward (docs/distributed.md).
        own = (SYNCS[impl.sync].phase,) if impl.sync and SYNCS[impl.sync].phase else ()
        assert set(impl.phases) <= set(PHASE_NAMES + spec.ONE_SHOT_PHASES + own), f"{impl.name}: phases {impl.phases}"
        # A one-shot phase belongs to the step that needs it, and a step replayed whole has no split phases.
        assert impl.one_shot == {"graphs": "graph_capture", "compile": "compile",
                                 "compile-cudagraphs": "compile"}.get(impl.step), impl
        if impl.step in registry.WHOLE_STEP_KINDS:
            assert not {"forward", "loss", "backward", "param_update", "progress_print"} & set(impl.phases), impl
        assert impl.pair in registry.BY_NAME and impl.pair != impl.name
        assert registry.language_reference(impl).language == impl.language
    assert registry.DEFAULT_IMPLS == ("python", "cpp")


def method_table_phases() -> tuple[str, ...]:
    """The phases docs/method.md#what-is-measured describes, in its table's order (the first column, `name`)."""
    lines = (ROOT / "docs" / "method.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| phase | timed |"))
    rows = []
    for line in lines[start + 2:]:  # past the header and its rule
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1].strip().strip("`"))
    return tuple(rows)


def test_the_phases_are_those_the_python_trainer_runs_and_the_method_describes():
    """spec.TRAINING_PHASES names every phase case; the Python trainer's phase table (phasebench/train/phases.py,
    what a worker times by name) and the method's table of what each phase times hold the same phases, in order."""
    from phasebench.train.phases import PHASES

    assert tuple(phase.name for phase in PHASES) == PHASE_NAMES, "phasebench/train/phases.py's PHASES"
    assert method_table_phases() == PHASE_NAMES, "docs/method.md's table of phases"


def test_the_cpp_library_reports_the_phases_the_cases_name(worker_for):
    """The phases a C++ worker reports when it starts: the library's own list (pb_phase_names, cpp/src/phases.cpp).
    Its training phases are the cases' (spec.TRAINING_PHASES), in order; the others it lists are one-shot phases
    (graph_capture, which only a step "graphs" session runs)."""
    reported = worker_for("cpp", "cpu").info.phases
    assert tuple(name for name in reported if name not in spec.ONE_SHOT_PHASES) == PHASE_NAMES, reported
    assert set(reported) - set(PHASE_NAMES) <= set(spec.ONE_SHOT_PHASES), reported


def test_data_parallel_implementations_have_cases_only_in_data_parallel_tests():
    """A data-parallel implementation runs in the tests that take `world_size` (bench/test_distributed.py), and only
    there; grad_sync follows backward where the all-reduce runs after it, and DDP has none."""
    ddp, allreduce, cpp = (registry.get(name) for name in ("python-ddp", "python-allreduce", "cpp-allreduce"))
    phase_test, dist_test = ("benchmark", "phase", "impl", "device"), ("benchmark", "phase", "impl", "device",
                                                                       "world_size")
    assert not ddp.runs_in(phase_test) and ddp.runs_in(dist_test) and not registry.get("python").runs_in(dist_test)
    assert "grad_sync" not in ddp.phases
    assert allreduce.phases == cpp.phases and allreduce.phases[allreduce.phases.index("backward") + 1] == "grad_sync"
    assert allreduce.trainer_options()["sync"] == "allreduce" and "sync" not in cpp.trainer_options()
    assert DEFAULT.shard_problem(2) is None and "must divide" in DEFAULT.shard_problem(3)
    assert "must divide" in Workload(1, 96).shard_problem(64)  # 96 divides by... 64 does not divide 96


def test_which_tests_make_cases_for_an_implementation():
    """python-vmap trains ensembles only: no phase, training-run, concurrent-jobs or worker cases; the published
    pair runs both kinds; an implementation without an ensemble gets no ensemble cases."""
    vmap, python, batched = (registry.get(name) for name in ("python-vmap", "python", "python-batched"))
    ensemble_test, job_test = ("benchmark", "impl", "device", "models"), ("benchmark", "impl", "device", "jobs")
    assert vmap.runs_in(ensemble_test) and not vmap.runs_in(job_test) and vmap.phases == ()
    assert python.runs_in(ensemble_test) and python.runs_in(job_test)
    assert batched.runs_in(job_test) and not batched.runs_in(ensemble_test)
    assert vmap.trainer_options() == {"loader": "published", "step": "eager", "optimizer": "sgd", "ensemble": "vmap"}
    assert "ensemble" not in registry.get("cpp").trainer_options()  # C++ ensembles are loops
    with pytest.raises(AssertionError, match="ensemble 'vmap'"):
        registry.Implementation("cpp-vmap", "cpp", "", "cpp", ensemble="vmap")


def test_impl_option_values():
    assert registry.parse("all") == registry.NAMES
    assert registry.parse(" python-batched, cpp ,cpp") == ("python-batched", "cpp")
    for bad in ("rust", "python,", "all,cpp", ""):
        if bad == "python,":
            assert registry.parse(bad) == ("python",)
            continue
        with pytest.raises(ValueError, match="valid values are python, cpp, python-tensor"):
            registry.parse(bad)


def test_workload_sizes_follow_width_and_batch():
    assert DEFAULT.id == "" and DEFAULT.parameter_count == 21_840 and DEFAULT.steps_per_epoch == 938
    assert DEFAULT.last_batch == 32
    wide = Workload(4, 256)
    assert wide.id == "w4-b256" and wide.steps_per_epoch == 235 and wide.last_batch == 96
    assert (wide.conv1_channels, wide.conv2_channels, wide.fc1_inputs, wide.fc1_units) == (40, 80, 1280, 200)
    from phasebench.train.model import Net

    for workload in (DEFAULT, wide, Workload(3, 100)):  # the Net the trainer builds has the counted parameters
        assert sum(p.numel() for p in Net(0.5, workload).parameters()) == workload.parameter_count
    with pytest.raises(ValueError):
        Workload(0, 64)


def test_workload_option_values():
    assert parse_sizes("1,4,16", "--width") == (1, 4, 16)
    assert parse_sizes("64,64", "--batch-size") == (64,)
    for bad in ("", "0", "4,x", "-1"):
        with pytest.raises(ValueError, match=f"--width {bad!r}: expected positive whole numbers"):
            parse_sizes(bad, "--width")
    # The published workload first, so a default-only run and a sweep start alike.
    assert [w.id for w in workloads((4, 1), (256, 64))] == ["", "w1-b256", "w4-b64", "w4-b256"]


def test_jobs_and_models_make_the_cases(settings):
    """phasebench/plugin/__init__.py's case generation, given --impl all, --jobs per device and --models: each device's
    concurrent-jobs counts and every ensemble size, for the implementations that run them."""
    from phasebench.plugin import cases as plugin

    chosen = replace(settings, impls=registry.NAMES, jobs={"cpu": (1, 3), "cuda": (2,)}, models=(2, 5))

    def ids_for(*fixtures) -> list[str]:
        made = {}
        metafunc = SimpleNamespace(fixturenames=["benchmark", *fixtures], config=SimpleNamespace(phasebench=chosen),
                                   parametrize=lambda names, cases, ids: made.update(ids=ids))
        plugin.pytest_generate_tests(metafunc)
        return made["ids"]

    jobs = ids_for("impl", "device", "jobs", "workload")
    assert {"python-cpu-1", "python-cpu-3", "cpp-cuda-2", "python-batched-cpu-3"} <= set(jobs), jobs
    assert not [case for case in jobs if case.endswith("cuda-1") or "vmap" in case], jobs
    ensembles = ids_for("impl", "device", "models", "workload")
    assert set(ensembles) == {f"{impl}-{device}-{m}" for impl in ("python", "cpp", "python-vmap")
                              for device in ("cpu", "cuda") for m in (2, 5)}, ensembles
    assert not [case for case in ids_for("impl", "device", "workload") if "vmap" in case]  # e.g. the training run


def test_a_sweep_runs_workload_after_workload_and_each_pooled_worker_stops_after_its_last_case(settings):
    """A sweep of every implementation over six workloads holds 54 pooled workers of about 0.7 GB each; kept to the
    session's end they filled this machine's 24 GiB and slowed every clock. Generated workload by workload and
    stopped after their last case (phasebench/plugin/fixtures.py), at most a few live at once."""
    from phasebench.plugin import cases as plugin
    from phasebench.plugin import fixtures
    from phasebench.spec import workloads

    chosen = replace(settings, impls=registry.NAMES, workloads=workloads((1, 4, 16), (64, 256)))
    made = {}
    metafunc = SimpleNamespace(fixturenames=["benchmark", "worker_for", "phase", "impl", "device", "workload"],
                               config=SimpleNamespace(phasebench=chosen),
                               parametrize=lambda names, cases, ids: made.update(names=names, cases=cases))
    plugin.pytest_generate_tests(metafunc)
    items = [SimpleNamespace(fixturenames=metafunc.fixturenames,
                             callspec=SimpleNamespace(params=dict(zip(made["names"], case.values))))
             for case in made["cases"]]
    order = [item.callspec.params["workload"] for item in items]
    assert order == sorted(order), "a workload's cases are not together"
    last = fixtures.last_users(items)
    alive, most = set(), 0
    for item in items:
        alive.add(key := fixtures.pool_key(item))
        most = max(most, len(alive))
        if last[key] is item:
            alive.discard(key)
    assert len(last) == 6 * len([impl for impl in registry.REGISTRY if impl.runs_in(made["names"])
                                 and not impl.absent_reason("cpu")]) + 6 * len(
        [impl for impl in registry.REGISTRY if impl.runs_in(made["names"]) and not impl.absent_reason("cuda")])
    # (in this order; pytest_collection_modifyitems' run order then trades a phase's cases between its
    # implementations' places, which can keep each implementation's worker of a workload alive across it)
    assert most <= 2, most
    assert fixtures.pool_key(SimpleNamespace(fixturenames=["worker_for"], callspec=SimpleNamespace(params={}))) is None
