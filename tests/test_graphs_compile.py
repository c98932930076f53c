"""CUDA graphs and torch.compile: what each trainer refuses, with a clear message (docs/gpu.md#cuda-graphs-and-torchcompile). Their timings are test_phase's and test_training_run's cases; their training is compared
with eager in tests/equivalence/test_compiled.py."""

import pytest

from phasebench.worker.client import Worker, WorkerError


def Trainer(*args, **kwargs):  # noqa: N802  (the class, imported when a test runs: collecting imports no torch)
    from phasebench.train.trainer import Trainer

    return Trainer(*args, **kwargs)


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


def test_two_replays_of_a_captured_step_draw_different_dropout_masks(settings, tmp_path):
    """A captured step must draw new dropout masks on every replay (the graph advances the generator's offset), not
    replay the masks of its capture: the dropout-off equivalence tests would pass either way. Two replays on the same
    batch from the same weights give the same output only if their masks are the same."""
    if settings.cuda_reason:
        pytest.skip(f"CUDA graphs need a GPU: the check runs on the GPU machine ({settings.cuda_reason})")
    import torch

    trainer = Trainer(settings.source.root, device="cuda", step="graphs", log_path=str(tmp_path / "progress.log"))
    try:
        trainer.step_piece.ensure_ready(trainer)  # the warm-up steps and the capture
        captured = trainer.step_piece.graphs[trainer.batch_size]
        images, labels = trainer.batch_at(0)
        captured.data.copy_(images)
        captured.target.copy_(labels)
        weights = [p.detach().clone() for p in trainer.model.parameters()]
        outputs = []
        for _ in range(2):
            with torch.no_grad():
                for p, w in zip(trainer.model.parameters(), weights):
                    p.copy_(w)
            captured.graph.replay()
            outputs.append(captured.output.detach().clone())
        assert not torch.equal(*outputs), "two replays from the same weights and batch drew the same dropout masks"
    finally:
        trainer.close()
