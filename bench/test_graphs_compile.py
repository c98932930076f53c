"""CUDA graphs and torch.compile: what each trainer refuses, with a clear message (README, "CUDA graphs and
torch.compile"). Their timings are test_phase's and test_training_run's cases; their training is compared
with eager in bench/test_equivalence.py."""

import pytest

from bench.client import Worker, WorkerError
from bench.trainer import Trainer


def test_python_refuses_what_its_step_cannot_do(settings):
    with pytest.raises(ValueError, match="step 'graphs' needs a cuda device"):
        Trainer(settings.source.root, step="graphs")
    with pytest.raises(ValueError, match="unknown step 'jit'"):
        Trainer(settings.source.root, step="jit")
    trainer = Trainer(settings.source.root, loader="batched")
    try:
        with pytest.raises(ValueError, match="'compile' is not a phase of a step 'eager' trainer"):
            trainer.run_phase("compile")
    finally:
        trainer.close()


@pytest.mark.parametrize("step, message", [("graphs", "step .graphs. needs a cuda device"),
                                           ("compile", "step 'compile' is torch.compile, which LibTorch does not have"),
                                           ("jit", "unknown step 'jit': eager or graphs")],
                         ids=["graphs-on-cpu", "compile", "unknown"])
def test_cpp_refuses_what_its_step_cannot_do(settings, cpp_library, tmp_path, step, message):
    """Through the C ABI: pb_create fails with the reason, and the worker raises it."""
    options = settings.worker_options("cpu", str(tmp_path / "cpp.log"), impl="cpp") | {"step": step}
    with pytest.raises(WorkerError, match=message):
        Worker("cpp", "cpu", options, settings.round_timeout, cpp_library)


def test_cpp_graph_capture_is_refused_by_an_eager_trainer(settings, worker_for):
    with pytest.raises(WorkerError, match="'graph_capture' is not a phase of a step 'eager' trainer"):
        worker_for("cpp", "cpu").run_phase("graph_capture")
