"""What torch's CUDA calls require of the trainers, checked on a machine without a GPU (docs/gpu.md). The device
tests run torch's own code with only the driver calls under it faked, and stop at a sentinel raised by a faked call
past the check they guard, so that a test passes only where torch's check let the argument through; the graph test
records torch.cuda's streams and graphs around the real GraphStep on cpu tensors.

- `torch.cuda.set_device` takes an index: the Python trainer on "cuda" hands it the current device's, and its step
  gets the same indexed device;
- the C++ trainer does the same through c10's CUDA device guard implementation (cpp/src/trainer.cpp
  `resolve_device`), faked in the library's testing build, along pb_create's path (the trainer's settings, CUDA's
  availability asked of the same implementation): a bare "cuda" is the current device, made current;
- `torch.distributed.init_process_group("nccl", device_id=...)` takes a device with an index in range: the World
  hands each rank its GPU by index, a world of one included, and the rank's join gets past the device checks to
  NCCL's constructor with its group bound to that GPU (the fake records it: a rank bound to another GPU fails);
- CUDA graphs: the Python GraphStep runs every batch shape it captures eagerly on a side stream first (torch's
  capture recipe), the remainder that ends an epoch included, and that warm-up trains nothing. The C++ GraphStep
  (cpp/src/graph_step.cpp) does the same; only a GPU runs it (docs/gpu.md#cuda-graphs-and-torchcompile).
"""

from __future__ import annotations

import ctypes
import json
import sys
import threading
from contextlib import contextmanager

import pytest

from phasebench.programs import PROGRAMS
from phasebench.worker import cpp_lib
from tests.c_abi_calls import PB_ERROR, run_child

torch = None  # imported by the fixture below, not at collection: collecting the suite imports no torch


@pytest.fixture(autouse=True)
def torch_loaded():
    global torch
    import torch as loaded

    torch = loaded


# -- torch.cuda.set_device -----------------------------------------------------------------------------------------
class SetDeviceReached(Exception):
    """torch.cuda.set_device got past its argument's check to the driver call."""


@pytest.fixture
def cuda_driver_faked(monkeypatch):
    """CUDA as the driver would report it with two GPUs, the current one 1 (not 0, so that an index taken from the
    current device is told apart from a default), without touching a driver: torch.cuda's Python code stays real.
    Returns the indices torch._C._cuda_setDevice received; it raises SetDeviceReached."""
    received = []

    def set_device(index):
        received.append(index)
        raise SetDeviceReached(index)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "_lazy_init", lambda: None)  # current_device's: it would initialize the driver
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 1)
    monkeypatch.setattr(torch._C, "_cuda_setDevice", set_device)
    return received


@pytest.mark.parametrize("requested, index", [("cuda", 1), ("cuda:0", 0)], ids=["bare-cuda", "cuda-0"])
def test_the_python_trainer_hands_set_device_an_index(settings, cuda_driver_faked, monkeypatch, requested, index):
    """A bare "cuda" is the current device: set_device receives its index (torch refuses a torch.device without one:
    "Expected a torch.device with a specified index or an integer"), and the step is made for the same device."""
    from phasebench.train import state, steps

    made_for = []
    make = steps.make

    def recording_make(kind, on, *args):
        made_for.append(on)
        return make(kind, on, *args)

    monkeypatch.setattr(steps, "make", recording_make)
    with pytest.raises(SetDeviceReached):
        state.TrainingState(settings.source.root, device=requested)
    assert cuda_driver_faked == [index]
    assert type(cuda_driver_faked[0]) is int
    assert made_for == [torch.device("cuda", index)]


@pytest.mark.parametrize("requested, index", [("cuda", 1), ("cuda:0", 0)], ids=["bare-cuda", "cuda-0"])
@pytest.mark.parametrize("name", [name for name, declared in PROGRAMS.items() if declared.step_trainers])
def test_every_programs_python_trainer_hands_set_device_an_index(settings, cuda_driver_faked, name, requested, index):
    """The other programs' Python trainers (phasebench/programs.py) resolve their device as the seed's does."""
    declared = PROGRAMS[name]
    options = {"data_root": settings.source.root} if "data_root" in declared.settings else {}
    with pytest.raises(SetDeviceReached):
        declared.step_trainer("python")(device=requested, **options)
    assert cuda_driver_faked == [index] and type(cuda_driver_faked[0]) is int


# -- the C++ trainer's device: c10's CUDA device guard implementation ----------------------------------------------
def resolve_in_child(library: str) -> None:
    """The child process (`library`: the testing build): one JSON line of {requested: [status, resolved device,
    index setDevice received, error]}, each resolved as pb_create resolves pb_options.device (the trainer's settings)
    with a fake CUDA device guard of two GPUs whose current device is 1, or of none."""
    lib = cpp_lib.load_testing(library)
    seen = {}
    for requested, current, count in [("cuda", 1, 2), ("cuda:0", 1, 2), ("cpu", 1, 2), (None, 1, 2), ("cuda", -1, 2),
                                      ("cuda", 0, 0), ("cpu", 0, 0)]:
        resolved, set_index = ctypes.create_string_buffer(16), ctypes.c_int32(-2)
        status = lib.pb_testing_resolve_cuda_device(requested and requested.encode(), current, count, resolved,
                                                    len(resolved), ctypes.byref(set_index))
        seen[f"{requested} current {current} of {count}"] = [status, resolved.value.decode(), set_index.value,
                                                             lib.pb_last_error().decode() if status else ""]
    print(json.dumps(seen), flush=True)


@pytest.fixture(scope="module")
def cpp_resolved(testing_library) -> dict:
    return run_child("tests.test_cuda_contract", testing_library)


@pytest.mark.parametrize("requested, resolved, set_index", [("cuda", "cuda:1", 1), ("cuda:0", "cuda:0", 0),
                                                             ("cpu", "cpu", -1), (None, "cpu", -1)],
                         ids=["bare-cuda", "cuda-0", "cpu", "none-named"])
def test_the_cpp_trainer_makes_its_cuda_device_current(cpp_resolved, requested, resolved, set_index):
    """As the Python trainer, along pb_create's path (the trainer's settings): a bare "cuda" is the current device (1
    here, told apart from a default 0), and the device is made current through the device guard's setDevice (-1: not
    called); cpu, or no device named, is left alone."""
    status, name, index, error = cpp_resolved[f"{requested} current 1 of 2"]
    assert status == cpp_lib.PB_OK, error
    assert (name, index) == (resolved, set_index)


def test_the_cpp_trainer_refuses_cuda_where_no_gpu_is_usable(cpp_resolved):
    """pb_create's availability check asks the same device guard: with no GPU, cuda is refused, and cpu still runs."""
    status, _, _, error = cpp_resolved["cuda current 0 of 0"]
    assert status == PB_ERROR and "device cuda requested but CUDA is not available" in error, error
    assert cpp_resolved["cpu current 0 of 0"][:3] == [cpp_lib.PB_OK, "cpu", -1]


def test_the_cuda_resolution_entry_point_refuses_bad_calls(cpp_resolved):
    status, _, _, error = cpp_resolved["cuda current -1 of 2"]
    assert status == PB_ERROR and "current index -1 is no CUDA device index" in error, (status, error)


# -- torch.distributed.init_process_group("nccl", device_id=...) ---------------------------------------------------
class NcclConstructed(BaseException):
    """init_process_group got past its device checks to NCCL's constructor. A BaseException: phasebench's join
    turns every Exception into a StoreFailed of one line, and this one must reach the test as itself."""


@pytest.fixture
def nccl_faked(monkeypatch):
    """torch.distributed's real init_process_group for "nccl", on a machine with two GPUs as torch.cuda reports them,
    stopped where it constructs NCCL's backend (after every check of device_id). Returns the (rank, world size, device)
    of each construction: the device is the one c10d binds the group being made to (the device_id its
    _new_process_group_helper sets as the group's bound_device_id, which NCCL's communicator then connects on), as
    text; None for a group bound to none."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    if not dist.is_nccl_available():
        pytest.skip("this build of torch has no NCCL")
    constructed, binding = [], []
    real, make_group = c10d.ProcessGroupNCCL, c10d._new_process_group_helper

    def bound_group(*args, device_id=None, **kwargs):
        binding.append(device_id)
        try:
            return make_group(*args, device_id=device_id, **kwargs)
        finally:
            binding.pop()

    class ProcessGroupNCCL:
        Options = real.Options

        def __init__(self, store, rank, size, options):
            device = binding[-1] if binding else None
            constructed.append((rank, size, None if device is None else str(device)))
            raise NcclConstructed(f"NCCL's constructor reached by rank {rank} of {size}")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # init_process_group's range check of device_id
    monkeypatch.setattr(c10d, "_new_process_group_helper", bound_group)
    monkeypatch.setattr(c10d, "ProcessGroupNCCL", ProcessGroupNCCL)
    monkeypatch.setattr(c10d._world, "group_count", c10d._world.group_count)  # each attempt names a group
    yield constructed
    assert not dist.is_initialized()


class RankInThisProcess:
    """A worker of a World, as far as its group goes: the store and the join a rank's server makes
    (phasebench/worker/server.py's dist_store and dist_join), here one at a time in this process, on one HashStore
    that every rank shares."""

    impl = "python"

    def __init__(self, store, lock: threading.Lock, devices: list[str]):
        self.store, self.lock, self.devices = store, lock, devices

    def request(self, message):
        from phasebench.worker.protocol import DistStore, Port

        assert isinstance(message, DistStore)
        return Port(0)

    def send(self, message) -> None:
        pass

    def receive(self, message, timeout=None):
        from phasebench.worker import group

        self.devices.append(message.device)
        with self.lock:
            return group.join(message.rank, message.world, message.device, message.timeout_s, message.port,
                              self.store)

    def alive(self) -> bool:
        return True

    def kill(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("size", [1, 2], ids=["world-of-1", "world-of-2"])
def test_each_rank_of_a_cuda_world_joins_nccl_with_its_gpu_index(nccl_faked, size):
    """The World hands rank r "cuda:r", a world of one included, and its join passes init_process_group's device_id
    checks (torch refuses one without an index: "Please use a device_id with index") to NCCL's constructor."""
    import torch.distributed as dist

    from phasebench.worker.world import World, WorldFailed

    store, lock, devices = dist.HashStore(), threading.Lock(), []
    spawns = [lambda: RankInThisProcess(store, lock, devices)] * size
    with pytest.raises(WorldFailed) as failed:
        World(spawns, "cuda", timeout_s=5.0)
    for rank in range(size):
        assert f"rank {rank}: NCCL's constructor reached by rank {rank} of {size}" in str(failed.value)
    assert sorted(devices) == [f"cuda:{rank}" for rank in range(size)]
    assert sorted(nccl_faked) == [(rank, size, f"cuda:{rank}") for rank in range(size)]


def test_a_join_on_bare_cuda_binds_nccl_to_the_current_gpu(nccl_faked, monkeypatch):
    """A bare "cuda" handed to a join becomes the current device's index before it reaches device_id."""
    import torch.distributed as dist

    from phasebench.worker import group

    monkeypatch.setattr(torch.cuda, "_lazy_init", lambda: None)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 1)
    with pytest.raises(NcclConstructed):
        group.join(0, 1, "cuda", 5.0, 0, dist.HashStore())
    assert nccl_faked == [(0, 1, "cuda:1")]


def test_the_fake_nccl_tells_a_rank_bound_to_the_wrong_gpu(nccl_faked, monkeypatch):
    """The fake records the GPU a group is bound to, not only its rank: a join that binds rank 0 to cuda:0 while the
    current device is 1 (a bare "cuda" resolved as a default, not as the current device) is seen as such, so the test
    above fails on it."""
    import torch.distributed as dist

    from phasebench import devices
    from phasebench.worker import group

    monkeypatch.setattr(torch.cuda, "_lazy_init", lambda: None)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 1)
    monkeypatch.setattr(devices, "with_index", lambda device: torch.device("cuda", 0))  # the wrong GPU
    with pytest.raises(NcclConstructed):
        group.join(0, 1, "cuda", 5.0, 0, dist.HashStore())
    assert nccl_faked == [(0, 1, "cuda:0")]


# -- CUDA graphs: every captured shape warmed up on a side stream first ---------------------------------------------
class Stream:
    def __init__(self, name: str):
        self.name = name

    def wait_stream(self, other) -> None:
        pass


class CudaRecorder:
    """torch.cuda's streams and graphs as the Python GraphStep uses them, on cpu tensors: the ops run at once on the
    cpu, each forward and backward of the model recorded with its batch's rows, the stream it ran on and the graph
    being captured (None: eager). A capture of a shape that no eager forward and backward on a side stream ran
    before fails at its capture_end, as it may fail or capture a lazy initialization on a GPU."""

    def __init__(self, t):
        self.default = self.current = Stream("default")
        self.capturing = None
        self.ran: list[tuple[str, int, Stream, object]] = []
        self.captures: list[dict] = []  # each graph's rows and the training state at its begin and end
        self.t = t
        t.model.register_forward_hook(self.forwarded)

    def forwarded(self, module, inputs, output) -> None:
        rows = len(inputs[0])
        self.ran.append(("forward", rows, self.current, self.capturing))
        output.register_hook(lambda grad: self.ran.append(("backward", rows, self.current, self.capturing)))

    def warmed_up(self) -> set[int]:
        """The rows of every batch shape whose forward and backward ran eagerly on a side stream."""
        def rows_of(kind):
            return {rows for what, rows, stream, graph in self.ran
                    if what == kind and graph is None and stream is not self.default}
        return rows_of("forward") & rows_of("backward")

    # torch.cuda's names
    def Stream(self, device=None):  # noqa: N802
        return Stream(f"side {len(self.ran)}")

    def current_stream(self, device=None):
        return self.current

    @contextmanager
    def stream(self, stream):
        before, self.current = self.current, stream
        try:
            yield
        finally:
            self.current = before

    def synchronize(self, device=None) -> None:
        pass

    def CUDAGraph(self):  # noqa: N802
        recorder = self

        class CUDAGraph:
            def capture_begin(self):
                assert recorder.current is not recorder.default, "a capture on the default stream"
                recorder.capturing = self
                recorder.captures.append({"begin": training_state(recorder.t), "warmed": recorder.warmed_up()})

            def capture_end(self):
                recorder.capturing = None
                capture = recorder.captures[-1]
                capture["rows"] = {rows for _, rows, _, graph in recorder.ran if graph is self}
                capture["end"] = training_state(recorder.t)
                for rows in capture["rows"]:
                    assert rows in capture["warmed"], (
                        f"a CUDA graph captured a step of {rows} rows that no eager forward and backward of {rows} "
                        f"rows on a side stream ran before (warmed up: {sorted(capture['warmed'])})")

        return CUDAGraph()


def training_state(t) -> list:
    """What a step that trains changes: the weights, SGD's momentum buffers, and the generator the dropout masks
    are drawn from (the cpu's, on cpu)."""
    weights = [p.detach().clone() for p in t.model.parameters()]
    momentum = [t.optimizer.state[p]["momentum_buffer"].clone() for p in t.model.parameters()]
    return [*weights, *momentum, t.rng_state()]


def test_every_captured_shape_is_warmed_up_on_a_side_stream_first(settings, monkeypatch):
    """The real GraphStep on the Python trainer's cpu tensors, torch.cuda's streams and graphs recorded: the full
    batch's shape is warmed up by the warm-up steps, the remainder's (32 rows of 60000 % 64) by a forward and backward
    of its own before its capture; and between two captures, or before the first, nothing trains (weights, momentum
    and generator as they were)."""
    from phasebench.train import steps
    from phasebench.train.state import TrainingState

    t = TrainingState(settings.source.root, device="cpu", loader="batched")
    try:
        assert t.batch_shapes() == [64, 32]
        step = t.step_piece = steps.GraphStep(torch.device("cuda", 0))
        step.new_model(t)
        recorder = CudaRecorder(t)
        for name in ("Stream", "current_stream", "stream", "synchronize", "CUDAGraph"):
            monkeypatch.setattr(torch.cuda, name, getattr(recorder, name))

        step.one_shot_prepare(t)  # the warm-up steps: real batches, trained
        before = training_state(t)
        step.one_shot(t)
        assert [capture["rows"] for capture in recorder.captures] == [{64}, {32}]
        previous = before
        for capture in recorder.captures:
            assert all(torch.equal(a, b) for a, b in zip(capture["begin"], previous, strict=True)), (
                f"the model trained, or the generator moved, before the capture of {capture['rows']} rows")
            previous = capture["end"]
        assert all(p.grad is None for p in t.model.parameters())
    finally:
        t.close()


if __name__ == "__main__":
    resolve_in_child(*sys.argv[1:])


# -- the worker's bus-id lookup ------------------------------------------------------------------------------------
class FakeCudaRuntime:
    """libcudart's two calls the bus-id lookup makes, with the current device 1."""

    def __init__(self):
        self.asked = []

    def cudaGetDevice(self, pointer):  # noqa: N802 (the runtime's name)
        import ctypes

        ctypes.cast(pointer, ctypes.POINTER(ctypes.c_int))[0] = 1
        return 0

    def cudaDeviceGetPCIBusId(self, text, size, index):  # noqa: N802
        self.asked.append(index.value)
        text.value = f"0000:{0x41 + index.value:02x}:00.0".encode()
        return 0


@pytest.mark.parametrize("name, index", [("cuda", 1), ("cuda:0", 0)], ids=["bare-cuda", "cuda-0"])
def test_the_bus_id_is_the_current_devices_for_a_bare_cuda(monkeypatch, name, index):
    """The GPU NVML samples is the one the worker trains on: a bare "cuda" is the current device, as devices.py says."""
    from phasebench.worker import startup

    runtime = FakeCudaRuntime()
    monkeypatch.setattr(startup, "cuda_runtime", lambda: runtime)
    assert startup.pci_bus_id(name) == f"00000000:{0x41 + index:02X}:00.0"
    assert runtime.asked == [index]
