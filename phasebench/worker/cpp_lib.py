"""ctypes bindings to the C ABI of cpp/include/phasebench.h, and, for the testing build only
(phasebench/worker/build.py's variant "testing"), to the test-only entry points of cpp/include/phasebench_testing.h.
Used by the C++ worker only: importing this module imports neither torch nor the Python trainer."""

from __future__ import annotations

import ctypes
import math
from array import array

from phasebench.phase_round import PhaseRound

PB_OK = 0
PB_ABI_VERSION = 11  # cpp/include/phasebench.h: these bindings' structs and signatures
IMAGE_FLOATS = 28 * 28


class SizedStructure(ctypes.Structure):
    """A struct whose first field, struct_size, is its size: the library refuses one of another size (another ABI)."""

    def __init__(self, *args, **kwargs):
        super().__init__(ctypes.sizeof(type(self)), *args, **kwargs)


class Options(SizedStructure):
    _fields_ = [
        ("struct_size", ctypes.c_int64),
        ("data_root", ctypes.c_char_p),
        ("device", ctypes.c_char_p),
        ("log_path", ctypes.c_char_p),
        ("threads", ctypes.c_int32),
        ("seed", ctypes.c_int64),
        ("dropout", ctypes.c_double),
        ("width", ctypes.c_int64),
        ("batch_size", ctypes.c_int64),
        ("loader", ctypes.c_char_p),
        ("step", ctypes.c_char_p),
        ("deterministic", ctypes.c_int32),  # ABI 9
    ]


class RegressionOptions(SizedStructure):
    """pb_regression_options: the regression program's trainer (ABI 10)."""

    _fields_ = [
        ("struct_size", ctypes.c_int64),
        ("device", ctypes.c_char_p),
        ("threads", ctypes.c_int32),
        ("seed", ctypes.c_int64),
        ("batch_size", ctypes.c_int64),
    ]


class DcganOptions(SizedStructure):
    """pb_dcgan_options: the DCGAN program's trainer (ABI 11)."""

    _fields_ = [
        ("struct_size", ctypes.c_int64),
        ("device", ctypes.c_char_p),
        ("threads", ctypes.c_int32),
        ("seed", ctypes.c_int64),
        ("batch_size", ctypes.c_int64),
        ("data_root", ctypes.c_char_p),  # the folder holding MNIST/raw
        ("log_path", ctypes.c_char_p),  # None: stdout
    ]


class NumericsFlags(SizedStructure):
    """pb_numerics_flags: LibTorch's numerics settings as pb_read_numerics reads them back."""

    _fields_ = [
        ("struct_size", ctypes.c_int64),
        ("deterministic_algorithms", ctypes.c_int32),
        ("cudnn_deterministic", ctypes.c_int32),
        ("cudnn_benchmark", ctypes.c_int32),
        ("allow_tf32_cudnn", ctypes.c_int32),
        ("allow_tf32_matmul", ctypes.c_int32),
        ("cublas_workspace_config_set", ctypes.c_int32),
        ("cublas_workspace_config", ctypes.c_char * 64),
    ]


class TrainOptions(SizedStructure):
    _fields_ = [
        ("struct_size", ctypes.c_int64),
        ("epochs", ctypes.c_int32),
        ("synchronize", ctypes.c_int32),
        ("max_steps", ctypes.c_int64),
    ]


class TrainTotals(ctypes.Structure):
    _fields_ = [
        ("steps", ctypes.c_int64),
        ("loop_ns", ctypes.c_int64),
        ("cpu_ns", ctypes.c_int64),
    ]


class Result(ctypes.Structure):
    _fields_ = [
        ("loss", ctypes.c_double),
        ("shape", ctypes.c_int64 * 4),
        ("ndim", ctypes.c_int32),
        ("finite", ctypes.c_int32),
        ("batch_index", ctypes.c_int64),
        ("cpu_ns", ctypes.c_int64),
        ("thread_cpu_ns", ctypes.c_int64),
        ("leftovers", ctypes.c_int32),
        ("on_device", ctypes.c_int32),
        ("matches_host", ctypes.c_int32),
        ("resident", ctypes.c_int32),
        ("nonzero_grads", ctypes.c_int32),
        ("zero_before", ctypes.c_int32),
        ("distinct", ctypes.c_int32),
        ("recompute_error", ctypes.c_double),
        ("update_error", ctypes.c_double),
        ("moved", ctypes.c_double),
        ("minor_faults", ctypes.c_int64),
        ("major_faults", ctypes.c_int64),
        ("host_cpu_ns", ctypes.c_int64),  # ABI 9: -1 where not measured (cpu)
        ("gpu_ns", ctypes.c_int64),
    ]


# The product's checks as phasebench.train.trainer.product names them: (field, kind); -1 or NaN is "none".
_CHECKS = {"batch": ("batch_index", int), "leftovers": ("leftovers", int), "on_device": ("on_device", bool),
           "matches_host": ("matches_host", bool), "resident": ("resident", bool), "nonzero_grads": ("nonzero_grads", int),
           "zero_before": ("zero_before", bool), "distinct": ("distinct", bool),
           "recompute_error": ("recompute_error", float), "update_error": ("update_error", float),
           "moved": ("moved", float)}


class CppError(RuntimeError):
    """A PB_ERROR status; the message is the library's, verbatim."""


_SESSION = ctypes.c_uint64  # pb_session: a token, never an address
_REGRESSION = ctypes.c_uint64  # pb_regression: a token of its own table
_DCGAN = ctypes.c_uint64  # pb_dcgan: a token of its own table
_I64P = ctypes.POINTER(ctypes.c_int64)
_SIGNATURES = {
    "pb_abi_version": [ctypes.POINTER(ctypes.c_int32)],
    "pb_read_numerics": [ctypes.POINTER(NumericsFlags)],
    "pb_create": [ctypes.POINTER(Options), ctypes.POINTER(_SESSION)],
    "pb_destroy": [_SESSION],
    "pb_phase_names": [_SESSION, ctypes.c_char_p, ctypes.c_int64],
    "pb_run_phase_names": [_SESSION, ctypes.c_char_p, ctypes.c_int64],
    "pb_threads": [_SESSION, ctypes.POINTER(ctypes.c_int32)],
    "pb_run_phase": [_SESSION, ctypes.c_char_p, _I64P, ctypes.POINTER(Result)],
    "pb_set_round_checks": [_SESSION, ctypes.c_int32],
    "pb_timer_floor": [_SESSION, _I64P],
    "pb_param_count": [_SESSION, _I64P],
    "pb_param_layout": [_SESSION, ctypes.c_char_p, ctypes.c_int64],
    "pb_get_params": [_SESSION, ctypes.POINTER(ctypes.c_float), ctypes.c_int64],
    "pb_set_params": [_SESSION, ctypes.POINTER(ctypes.c_float), ctypes.c_int64],
    "pb_epoch_batches": [_SESSION, _I64P],
    "pb_get_batch": [_SESSION, ctypes.c_int64, ctypes.POINTER(ctypes.c_float), _I64P, ctypes.c_int64, _I64P],
    "pb_train_steps": [_SESSION, ctypes.c_int64, ctypes.POINTER(ctypes.c_double)],
    "pb_evaluate": [_SESSION, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)],
    "pb_train": [_SESSION, ctypes.POINTER(TrainOptions), _I64P, ctypes.c_int64, ctypes.POINTER(TrainTotals)],
    "pb_peak_device_memory": [_SESSION, _I64P],
    "pb_ensemble_create": [_SESSION, ctypes.c_int64],
    "pb_ensemble_step": [_SESSION, _I64P, _I64P, _I64P, ctypes.POINTER(ctypes.c_double), ctypes.c_int64],
    "pb_ensemble_get_params": [_SESSION, ctypes.c_int64, ctypes.POINTER(ctypes.c_float), ctypes.c_int64],
    "pb_ensemble_destroy": [_SESSION],
    "pb_dist_attach": [_SESSION, ctypes.c_char_p],
    "pb_dist_steps": [_SESSION, ctypes.c_int64, _I64P],
    # The regression program (ABI 10).
    "pb_regression_create": [ctypes.POINTER(RegressionOptions), ctypes.POINTER(_REGRESSION)],
    "pb_regression_destroy": [_REGRESSION],
    "pb_regression_phase_names": [_REGRESSION, ctypes.c_char_p, ctypes.c_int64],
    "pb_regression_run_phase": [_REGRESSION, ctypes.c_char_p, ctypes.c_int32, _I64P, ctypes.POINTER(Result)],
    "pb_regression_timer_floor": [_REGRESSION, _I64P],
    "pb_regression_train_steps": [_REGRESSION, ctypes.c_int64, ctypes.POINTER(ctypes.c_double)],
    "pb_regression_last_loss": [_REGRESSION, ctypes.POINTER(ctypes.c_double)],
    "pb_regression_param_count": [_REGRESSION, _I64P],
    "pb_regression_get_params": [_REGRESSION, ctypes.POINTER(ctypes.c_float), ctypes.c_int64],
    "pb_regression_get_batch": [_REGRESSION, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float),
                                ctypes.c_int64, _I64P],
    # The DCGAN program (ABI 11).
    "pb_dcgan_create": [ctypes.POINTER(DcganOptions), ctypes.POINTER(_DCGAN)],
    "pb_dcgan_destroy": [_DCGAN],
    "pb_dcgan_phase_names": [_DCGAN, ctypes.c_char_p, ctypes.c_int64],
    "pb_dcgan_run_phase": [_DCGAN, ctypes.c_char_p, ctypes.c_int32, _I64P, ctypes.POINTER(Result)],
    "pb_dcgan_timer_floor": [_DCGAN, _I64P],
    "pb_dcgan_train_steps": [_DCGAN, ctypes.c_int64, ctypes.POINTER(ctypes.c_double)],
    "pb_dcgan_last_loss": [_DCGAN, ctypes.POINTER(ctypes.c_double)],
    "pb_dcgan_param_count": [_DCGAN, _I64P],
    "pb_dcgan_get_params": [_DCGAN, ctypes.POINTER(ctypes.c_float), ctypes.c_int64],
    "pb_dcgan_get_batch": [_DCGAN, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float), ctypes.c_int64,
                           _I64P],
}
# cpp/include/phasebench_testing.h: the testing build's test-only entry points, outside the production ABI.
TESTING_SIGNATURES = {
    "pb_testing_slow_phase": [_SESSION, ctypes.c_char_p, ctypes.c_int64, ctypes.c_double],
    "pb_testing_slow_work": [_SESSION, ctypes.c_char_p, ctypes.c_int64],
    "pb_testing_hold_phase": [_SESSION, ctypes.c_char_p],
    "pb_testing_await_hold": [_SESSION, ctypes.c_int64, ctypes.POINTER(ctypes.c_int32)],
    "pb_testing_release_hold": [_SESSION],
    "pb_testing_resolve_cuda_device": [ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_char_p,
                                       ctypes.c_int64, ctypes.POINTER(ctypes.c_int32)],
}


def load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    # A library from other sources would misread the option and result structs: refuse it first.
    version = ctypes.c_int32(-1)
    if not hasattr(lib, "pb_abi_version") or lib.pb_abi_version(ctypes.byref(version)) != PB_OK \
            or version.value != PB_ABI_VERSION:
        found = "no pb_abi_version" if not hasattr(lib, "pb_abi_version") else f"ABI version {version.value}"
        raise CppError(f"{path}: {found}, these bindings need ABI version {PB_ABI_VERSION}; rebuild it from cpp/")
    _bind(lib, _SIGNATURES)
    lib.pb_last_error.argtypes, lib.pb_last_error.restype = [], ctypes.c_char_p
    return lib


def load_testing(path: str) -> ctypes.CDLL:
    """The testing build (cpp/Makefile's `testing`): the production ABI and the test-only entry points."""
    lib = load(path)
    missing = [name for name in TESTING_SIGNATURES if not hasattr(lib, name)]
    if missing:
        raise CppError(f"{path}: no {', '.join(missing)}: not the testing build (phasebench/worker/build.py's "
                       f"library_path(variant='testing'))")
    _bind(lib, TESTING_SIGNATURES)
    return lib


def _bind(lib: ctypes.CDLL, signatures: dict) -> None:
    for name, argtypes in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, ctypes.c_int


def call(lib: ctypes.CDLL, name: str, *args) -> None:
    """The library's function `name` on these arguments; CppError with its message when it fails."""
    if getattr(lib, name)(*args) != PB_OK:
        raise CppError(lib.pb_last_error().decode(errors="replace"))


def measured(ns: int) -> int | None:
    """A pb_result clock that is -1 where it was not read (host_cpu_ns and gpu_ns on cpu): None."""
    return None if ns < 0 else ns


def _product(result: Result) -> dict:
    product = {
        "shape": list(result.shape[: result.ndim]),
        "finite": bool(result.finite),
        "loss": None if math.isnan(result.loss) else result.loss,
    }
    for name, (field, kind) in _CHECKS.items():
        value = getattr(result, field)
        none = math.isnan(value) if kind is float else value == -1
        product[name] = None if none else kind(value)
    return product


def numerics_flags(lib: ctypes.CDLL) -> dict:
    """The numerics flags in effect in this process's LibTorch, read back through pb_read_numerics (by
    phasebench/determinism.py's FLAG_NAMES, as the Python trainers report them)."""
    read = NumericsFlags()
    call(lib, "pb_read_numerics", ctypes.byref(read))
    names = ("deterministic_algorithms", "cudnn_deterministic", "cudnn_benchmark", "allow_tf32_cudnn",
             "allow_tf32_matmul")
    workspace = read.cublas_workspace_config.decode() if read.cublas_workspace_config_set else None
    return {name: bool(getattr(read, name)) for name in names} | {"cublas_workspace_config": workspace}


class CppTrainer:
    """The C++ trainer behind the same methods as phasebench.train.trainer.Trainer (as the worker uses them)."""

    def __init__(self, lib: ctypes.CDLL, root: str, device: str = "cpu", threads: int = 0, seed: int = 1,
                 log_path: str | None = None, dropout: float = 0.5, width: int = 1, batch_size: int = 64,
                 loader: str = "published", step: str = "eager", deterministic: bool = False):
        self.lib = lib
        self.batch_size = batch_size
        # LibTorch's MNIST reads the IDX files straight from the folder it is given.
        self._options = Options(f"{root}/MNIST/raw".encode(), device.encode(),
                                log_path.encode() if log_path else None, threads, seed, dropout,
                                width, batch_size, loader.encode(), step.encode(), int(deterministic))
        self.handle = _SESSION()
        self.ensemble_size = 0  # the members of the session's ensemble, as pb_ensemble_create was told
        self.round_checks = True  # the session's pb_set_round_checks, as last set (a new session's: on)
        self.call("pb_create", ctypes.byref(self._options), ctypes.byref(self.handle))

    def call(self, name: str, *args) -> None:
        """The library's function `name` on these arguments; CppError with its message when it fails."""
        call(self.lib, name, *args)

    def _text(self, name: str) -> str:
        buffer = ctypes.create_string_buffer(4096)
        self.call(name, self.handle, buffer, len(buffer))
        return buffer.value.decode()

    def close(self):
        if self.handle.value:
            self.call("pb_destroy", self.handle)
            self.handle = _SESSION()

    def phase_names(self) -> list[str]:
        return self._text("pb_phase_names").split(",")

    def threads(self) -> int:
        count = ctypes.c_int32()
        self.call("pb_threads", self.handle, ctypes.byref(count))
        return count.value

    def flags(self) -> dict:
        """The numerics flags in effect in this process's LibTorch, read back through pb_read_numerics (by
        phasebench/determinism.py's FLAG_NAMES, as the Python trainer reports them)."""
        return numerics_flags(self.lib)

    def set_round_checks(self, on: bool) -> None:
        """pb_set_round_checks: whether the session's rounds do what proves their work."""
        self.call("pb_set_round_checks", self.handle, int(on))
        self.round_checks = on

    def run_phase(self, name: str, checks: bool = True) -> PhaseRound:
        """One round of `name`, as phasebench.train.trainer.Trainer.run_phase: with `checks` off (--round-checks
        off) the session's round checks are turned off first (pb_set_round_checks, outside the round), the library
        does nothing that proves the work, and the product says so, {"checks": "off"}
        (docs/method.md#switches-for-the-intervention-study)."""
        if checks != self.round_checks:
            self.set_round_checks(checks)
        ns, result = ctypes.c_int64(), Result()
        self.call("pb_run_phase", self.handle, name.encode(), ctypes.byref(ns), ctypes.byref(result))
        product = _product(result) if checks else {"checks": "off"}
        return PhaseRound(ns.value, result.cpu_ns, result.thread_cpu_ns, product, result.minor_faults,
                          result.major_faults, measured(result.host_cpu_ns), measured(result.gpu_ns))

    def timer_floor(self) -> int:
        ns = ctypes.c_int64()
        self.call("pb_timer_floor", self.handle, ctypes.byref(ns))
        return ns.value

    def layout(self) -> list[tuple[str, list[int]]]:
        entries = [entry.split(" ") for entry in self._text("pb_param_layout").split(";") if entry]
        return [(name, [int(d) for d in dims.split("x")]) for name, dims in entries]

    def param_count(self) -> int:
        count = ctypes.c_int64()
        self.call("pb_param_count", self.handle, ctypes.byref(count))
        return count.value

    def get_params(self) -> array:
        values = array("f", bytes(4 * self.param_count()))
        buffer = (ctypes.c_float * len(values)).from_buffer(values)
        self.call("pb_get_params", self.handle, buffer, len(values))
        return values

    def set_params(self, values: array) -> None:
        buffer = (ctypes.c_float * len(values)).from_buffer(values)
        self.call("pb_set_params", self.handle, buffer, len(values))

    def epoch_batches(self) -> int:
        count = ctypes.c_int64()
        self.call("pb_epoch_batches", self.handle, ctypes.byref(count))
        return count.value

    def batch_at(self, index: int) -> tuple[array, list[int]]:
        images = (ctypes.c_float * (self.batch_size * IMAGE_FLOATS))()
        labels = (ctypes.c_int64 * self.batch_size)()
        size = ctypes.c_int64()
        self.call("pb_get_batch", self.handle, index, images, labels, self.batch_size, ctypes.byref(size))
        n = size.value
        return array("f", images[: n * IMAGE_FLOATS]), list(labels[:n])

    def train_steps(self, steps: int) -> list[float]:
        losses = (ctypes.c_double * steps)()
        self.call("pb_train_steps", self.handle, steps, losses)
        return list(losses)

    def evaluate(self) -> tuple[float, float]:
        accuracy, loss = ctypes.c_double(), ctypes.c_double()
        self.call("pb_evaluate", self.handle, ctypes.byref(accuracy), ctypes.byref(loss))
        return accuracy.value, loss.value

    def train(self, epochs: int, synchronize: bool, max_steps: int = 0) -> tuple[dict[str, int], int, int, int]:
        """Phase totals by pb_run_phase_names (step_in_run, not train_step), steps, loop ns, process CPU ns."""
        names = self._text("pb_run_phase_names").split(",")
        totals = (ctypes.c_int64 * len(names))()
        run = TrainTotals()
        self.call("pb_train", self.handle, ctypes.byref(TrainOptions(epochs, int(synchronize), max_steps)), totals,
                  len(names), ctypes.byref(run))
        return dict(zip(names, totals)), run.steps, run.loop_ns, run.cpu_ns

    # Data parallel (docs/distributed.md), as phasebench.train.trainer.Trainer's methods of the same names.
    def attach(self, group_name: str) -> None:
        self.call("pb_dist_attach", self.handle, group_name.encode())

    def timed_steps(self, steps: int) -> list[int]:
        ns = (ctypes.c_int64 * max(steps, 1))()
        self.call("pb_dist_steps", self.handle, steps, ns)
        return list(ns[:steps])

    # Ensembles (docs/gpu.md#concurrent-jobs-and-ensembles), as phasebench.train.trainer.Trainer's methods of the same names.
    def start_ensemble(self, models: int) -> None:
        self.call("pb_ensemble_create", self.handle, models)
        self.ensemble_size = models

    def stop_ensemble(self) -> None:
        self.call("pb_ensemble_destroy", self.handle)
        self.ensemble_size = 0

    def ensemble_step(self) -> tuple[int, int, int, list[float]]:
        ns, cpu_ns, thread_ns = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        losses = (ctypes.c_double * max(self.ensemble_size, 1))()
        self.call("pb_ensemble_step", self.handle, ctypes.byref(ns), ctypes.byref(cpu_ns), ctypes.byref(thread_ns),
                   losses, len(losses))
        return ns.value, cpu_ns.value, thread_ns.value, list(losses[: self.ensemble_size])

    def ensemble_params(self, member: int) -> array:
        values = array("f", bytes(4 * self.param_count()))  # every member has the session model's layout
        buffer = (ctypes.c_float * len(values)).from_buffer(values)
        self.call("pb_ensemble_get_params", self.handle, member, buffer, len(values))
        return values

    def peak_device_memory(self) -> int | None:
        """Peak bytes allocated on the device since train() began; None on cpu."""
        peak = ctypes.c_int64()
        self.call("pb_peak_device_memory", self.handle, ctypes.byref(peak))
        return None if peak.value < 0 else peak.value


class CppProgramTrainer:
    """A program's C++ trainer behind the C ABI's `pb_<PREFIX>_*` functions, with the methods of its Python twin
    (phasebench/worker/program_steps.py and the worker drive both alike); a subclass makes it (its options) and reads
    its batch."""

    prefix = ""  # "regression": pb_regression_create, pb_regression_run_phase, ...

    def __init__(self, lib: ctypes.CDLL, options: ctypes.Structure, batch_size: int, threads: int):
        self.lib, self.batch_size, self.threads_asked = lib, batch_size, threads
        self.handle = ctypes.c_uint64()
        self.call("create", ctypes.byref(options), ctypes.byref(self.handle))

    def call(self, name: str, *args) -> None:
        """pb_<prefix>_<name>(args...); the handle is the caller's to pass, as create makes it."""
        call(self.lib, f"pb_{self.prefix}_{name}", *args)

    def close(self) -> None:
        if self.handle.value:
            self.call("destroy", self.handle)
            self.handle = ctypes.c_uint64()

    def threads(self) -> int:
        """The intra-op threads it was created with (its create sets LibTorch's to them; 0: LibTorch's default, which
        the C ABI does not read back for these trainers)."""
        return self.threads_asked

    def flags(self) -> dict:
        return numerics_flags(self.lib)

    def phase_names(self) -> list[str]:
        buffer = ctypes.create_string_buffer(4096)
        self.call("phase_names", self.handle, buffer, len(buffer))
        return buffer.value.decode().split(",")

    def run_phase(self, name: str, checks: bool = True) -> PhaseRound:
        """One round of `name`: the phases before it untimed, then its body timed."""
        ns, result = ctypes.c_int64(), Result()
        self.call("run_phase", self.handle, name.encode(), int(checks), ctypes.byref(ns), ctypes.byref(result))
        product = _product(result) if checks else {"checks": "off"}
        return PhaseRound(ns.value, result.cpu_ns, result.thread_cpu_ns, product, result.minor_faults,
                          result.major_faults, measured(result.host_cpu_ns), measured(result.gpu_ns))

    def timer_floor(self) -> int:
        ns = ctypes.c_int64()
        self.call("timer_floor", self.handle, ctypes.byref(ns))
        return ns.value

    def train_steps(self, steps: int) -> list[float]:
        losses = (ctypes.c_double * max(steps, 1))()
        self.call("train_steps", self.handle, steps, losses)
        return list(losses[:steps])

    def last_loss(self) -> float | None:
        loss = ctypes.c_double()
        self.call("last_loss", self.handle, ctypes.byref(loss))
        return None if math.isnan(loss.value) else loss.value

    def parameters(self) -> list[float]:
        """Every float value of the trainer's model(s), flat, in its get_params' order."""
        count = ctypes.c_int64()
        self.call("param_count", self.handle, ctypes.byref(count))
        values = (ctypes.c_float * count.value)()
        self.call("get_params", self.handle, values, count.value)
        return list(values)

    def _batch(self, row_floats: int) -> tuple[list[float], list[float]]:
        """get_batch's two buffers: `row_floats` values a row, then one value a row; empty where none is held."""
        capacity = self.batch_size
        rows_of, ones, rows = (ctypes.c_float * (row_floats * capacity))(), (ctypes.c_float * capacity)(), ctypes.c_int64()
        self.call("get_batch", self.handle, rows_of, ones, capacity, ctypes.byref(rows))
        return list(rows_of[: row_floats * rows.value]), list(ones[: rows.value])


class CppRegressionTrainer(CppProgramTrainer):
    """The regression program's C++ trainer (cpp/src/regression.cpp) behind the methods of
    phasebench.train.regression.RegressionTrainer; its parameters are the weight's 4 values, then the bias."""

    prefix = "regression"

    def __init__(self, lib: ctypes.CDLL, device: str = "cpu", seed: int = 1, threads: int = 0, batch_size: int = 32):
        super().__init__(lib, RegressionOptions(device.encode(), threads, seed, batch_size), batch_size, threads)

    def batch(self) -> tuple[list[float], list[float]]:
        """The last batch drawn: its features (row by row) and targets; empty where none is held."""
        return self._batch(4)


class CppDcganTrainer(CppProgramTrainer):
    """The DCGAN program's C++ trainer (cpp/src/dcgan.cpp) behind the methods of phasebench.train.dcgan's trainer;
    its losses are the generator's, its parameters the generator's, the discriminator's, then both models' batch-norm
    running means and variances."""

    prefix = "dcgan"

    def __init__(self, lib: ctypes.CDLL, device: str = "cpu", seed: int = 1, threads: int = 0, batch_size: int = 64,
                 data_root: str = "data", log_path: str = ""):
        options = DcganOptions(device.encode(), threads, seed, batch_size, data_root.encode(),
                               log_path.encode() if log_path else None)
        super().__init__(lib, options, batch_size, threads)

    def batch(self) -> tuple[list[float], list[float]]:
        """The last step's real images (flat, normalized) and the labels d_real drew for them; empty where none are
        held."""
        return self._batch(IMAGE_FLOATS)
