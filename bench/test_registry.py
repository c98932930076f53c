"""The registry of implementations and the workload record (README, "Implementations and workloads")."""

import pytest

from bench import implementations
from bench.trainer import PHASE_NAMES, Net
from bench.workload import DEFAULT, Workload, parse_sizes, workloads


def test_every_implementation_is_complete():
    for impl in implementations.REGISTRY:
        assert impl.reference is None or impl.reference in implementations.BY_NAME, impl
        assert set(impl.phases) <= set(PHASE_NAMES + implementations.ONE_SHOT_PHASES), f"{impl.name}: phases {impl.phases}"
        # A one-shot phase belongs to the step that needs it, and a step replayed whole has no split phases.
        assert impl.one_shot == {"graphs": "graph_capture", "compile": "compile",
                                 "compile-cudagraphs": "compile"}.get(impl.step), impl
        if impl.step in implementations.WHOLE_STEP_KINDS:
            assert not {"forward", "loss", "backward", "param_update", "progress_print"} & set(impl.phases), impl
        assert impl.pair in implementations.BY_NAME and impl.pair != impl.name
        assert implementations.language_reference(impl).language == impl.language
    assert implementations.TRAINING_PHASES == PHASE_NAMES, "the registry's phases and bench/trainer.py's PHASES"
    assert implementations.DEFAULT_IMPLS == ("python", "cpp")


def test_impl_option_values():
    assert implementations.parse("all") == implementations.NAMES
    assert implementations.parse(" python-batched, cpp ,cpp") == ("python-batched", "cpp")
    for bad in ("rust", "python,", "all,cpp", ""):
        if bad == "python,":
            assert implementations.parse(bad) == ("python",)
            continue
        with pytest.raises(ValueError, match="valid values are python, cpp, python-tensor"):
            implementations.parse(bad)


def test_workload_sizes_follow_width_and_batch():
    assert DEFAULT.id == "" and DEFAULT.parameter_count == 21_840 and DEFAULT.steps_per_epoch == 938
    assert DEFAULT.last_batch == 32
    wide = Workload(4, 256)
    assert wide.id == "w4-b256" and wide.steps_per_epoch == 235 and wide.last_batch == 96
    assert (wide.conv1_channels, wide.conv2_channels, wide.fc1_inputs, wide.fc1_units) == (40, 80, 1280, 200)
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
