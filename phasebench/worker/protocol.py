"""What the pytest process and a worker say to each other (phasebench/worker/client.py, server.py): one request
dataclass per command, each naming its reply's dataclass, as JSON lines. A request's line is its fields and its
command's name, {"cmd": NAME, ...}; a reply's line is {"ok": true, ...its fields} or {"ok": false, "error": TEXT,
"type": NAME}. The client sends a request type and reads its reply type by attribute; the server registers its
handler of each request type beside the handler (phasebench/worker/server.py's `answers`).

No torch: the C++ worker and the pytest process import this module.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from phasebench.phase_round import CountDump, PhaseRound
from phasebench.programs import DEFAULT_PROGRAM

ReplyType = TypeVar("ReplyType")


class ProtocolError(ValueError):
    """A request line that names no known command, or whose fields are not that command's; a reply that is not its
    request's reply type."""


_SIMPLE = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,), "dict": (dict,), "list": (list,)}


def _check(owner: str, name: str, annotation: str, value) -> None:
    """A field's value against its annotation's plain types (`int`, `str | None`, `dict[str, int]`, ...)."""
    kinds: tuple[type, ...] = ()
    for part in annotation.split("|"):
        part = part.strip().split("[")[0]
        if part == "None":
            if value is None:
                return
        elif part in _SIMPLE:
            kinds += _SIMPLE[part]
        else:
            return  # Any or another type: not checked here
    if isinstance(value, bool) and bool not in kinds:
        kinds = ()
    if not isinstance(value, kinds):
        raise ProtocolError(f"'{owner}': field '{name}' must be {annotation}, got {type(value).__name__} {value!r}")


def encode_reply(reply) -> dict:
    """A reply dataclass as its line's fields (nested dataclasses as objects)."""
    return dataclasses.asdict(reply)


def _as_hinted(hint: Any, value):
    """A JSON value as the dataclass its field's type names, where it names one: T, T | None, list[T], list[T] | None."""
    if value is None:
        return None
    if dataclasses.is_dataclass(hint):
        return decode_reply(hint, value)
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):  # T | None: the value is not None here
        kinds = [argument for argument in arguments if argument is not type(None)]
        return _as_hinted(kinds[0], value) if len(kinds) == 1 else value
    if origin is list and arguments and dataclasses.is_dataclass(arguments[0]):
        return [decode_reply(arguments[0], item) for item in value]
    return value


def decode_reply(kind: type[ReplyType], message: dict) -> ReplyType:
    """The reply of type `kind` a line's fields make (the line's "ok" taken out); ProtocolError names what is missing
    or not the reply's."""
    fields = {f.name: f for f in dataclasses.fields(kind)}
    unknown = sorted(set(message) - set(fields))
    missing = [name for name, f in fields.items() if name not in message
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if unknown or missing:
        raise ProtocolError(f"not a {kind.__name__} reply (" + "; ".join(
            ([f"unknown field(s) {', '.join(unknown)}"] if unknown else []) +
            ([f"lacks {', '.join(missing)}"] if missing else [])) + f"): {message}")
    hints = typing.get_type_hints(kind)
    return kind(**{name: _as_hinted(hints[name], value) for name, value in message.items()})


@dataclass
class Ok:
    """A reply with nothing to say but that the request was done."""


@dataclass
class Request:
    """A command to a worker; `cmd` is its name on the wire, `reply` its answer's dataclass."""

    cmd: ClassVar[str]
    reply: ClassVar[type] = Ok

    def encode(self) -> str:
        return json.dumps({"cmd": self.cmd} | dataclasses.asdict(self))

    @property
    def what(self) -> str:
        """How a failure names it: the phase's name for a phase, else the command."""
        return getattr(self, "name", None) or self.cmd

    @classmethod
    def decode_fields(cls, message: dict) -> Request:
        hints = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(message) - set(hints))
        if unknown:
            raise ProtocolError(f"'{cls.cmd}': unknown field(s) {', '.join(unknown)} (it takes: "
                                f"{', '.join(hints) or 'none'})")
        for name, f in hints.items():
            if name not in message:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise ProtocolError(f"'{cls.cmd}': missing field '{name}'")
                continue
            _check(cls.cmd, name, str(f.type), message[name])
        return cls(**message)


def decode_request(line: str | bytes, table: typing.Mapping[str, type[Request]]) -> Request:
    """The request a line holds, its command looked up in `table` ({name: request type}); ProtocolError says why not."""
    try:
        message = json.loads(line)
    except json.JSONDecodeError as error:
        raise ProtocolError(f"a request that is not JSON ({error}): {line[:200]!r}") from None
    if not isinstance(message, dict) or not isinstance(message.get("cmd"), str):
        raise ProtocolError(f"a request must be a JSON object with a 'cmd': {line[:200]!r}")
    command = message.pop("cmd")
    if command not in table:
        raise ProtocolError(f"unknown command '{command}' (this worker knows: {', '.join(sorted(table))})")
    return table[command].decode_fields(message)


def request_type(cmd_name: str, reply_type: type = Ok):
    """A class decorator: the request's command name and its reply's dataclass, on a dataclass."""
    def made(cls):
        cls = dataclass(cls)
        cls.cmd, cls.reply = cmd_name, reply_type
        return cls
    return made


# -- replies ------------------------------------------------------------------------------------------------------
@dataclass
class Started:
    pid: int
    phases: list[str]
    threads: int
    timer_floor_ns: int
    setup_ns: int  # the program's set-up, one clock: CUDA's initialization (cuda only), then the trainer's construction
    pci_bus_id: str | None
    flags: dict  # the numerics flags in effect in the worker, by phasebench/determinism.py's FLAG_NAMES
    startup_parts_ns: dict[str, int]  # where the start went, ns (phasebench/worker/startup.py; docs/method.md)
    pins: str | None = None  # "count": a timed worker under the count mode's conditions (server.count_conditions)
    # The instruction-count mode only: where the empty bracket's rounds were dumped (the pytest process reads them:
    # the worker's count floor), and the ATen CPU capability the worker dispatches to.
    count_floor_dumps: list[CountDump] | None = None
    cpu_capability: str | None = None


@dataclass
class Names:
    names: list[str]


@dataclass
class LayoutReply:
    layout: list


@dataclass
class Data:
    data: str  # base64 of float32s


@dataclass
class Count:
    count: int


@dataclass
class BatchReply:
    images: str  # base64 of float32s
    labels: list[int]


@dataclass(kw_only=True)
class Clocked:
    """on_the_shared_clock's fields (phasebench/worker/server.py): when the request ran, its CPU, its page faults."""

    started_at_ns: int = 0
    ended_at_ns: int = 0
    request_cpu_ns: int = 0
    minor_faults: int = 0
    major_faults: int = 0


@dataclass(kw_only=True)
class Losses(Clocked):
    losses: list[float]


@dataclass
class Port:
    port: int


@dataclass
class Joined:
    group: str
    backend: str
    phases: list[str]
    join_ns: int


@dataclass(kw_only=True)
class StepTimes(Clocked):
    step_ns: list[int]


@dataclass
class Evaluation:
    accuracy: float
    loss: float


@dataclass(kw_only=True)
class Run(Clocked):
    phase_ns: dict[str, int]
    steps: int
    loop_ns: int
    phase_cpu_ns: int
    setup_ns: int
    program_ns: int
    peak_rss_bytes: int
    peak_device_bytes: int | None


@dataclass
class RoundsOpened:
    canary_ns: int  # the canary's best time when the counted rounds open (phasebench/worker/threads.py)


@dataclass
class RoundsClosed:  # what the counted rounds went through (phasebench/worker/threads.py's Window.close)
    canary_ns: int  # the canary's best time when they have closed
    threads: list[dict]  # each thread's CPU seconds, context switches and migrations across them
    gc_collections: list[int]  # Python's garbage collections inside them, per generation
    cpu_migrations_source: str | None  # "sched" or "perf" (each thread's cpu_migrations); None where neither is read
    cpu_migrations_unavailable: str | None  # why not


@dataclass
class EnsembleReply:
    ns: int
    cpu_ns: int
    thread_cpu_ns: int
    losses: list[float]


# -- requests -----------------------------------------------------------------------------------------------------
@request_type("start", Started)
class Start(Request):
    options: dict
    # The program whose trainer the worker builds (phasebench/programs.py); the seed's builds its implementation's.
    program: str = DEFAULT_PROGRAM


@request_type("stop", Ok)
class Stop(Request):
    pass


@request_type("ping", Ok)
class Ping(Request):
    """The round trip alone (worker_overhead)."""


@request_type("phase", PhaseRound)
class Phase(Request):
    name: str
    checks: bool = True  # False (--round-checks off): nothing proves the round's work, and its product says so


@dataclass
class PhaseBlock:
    """A block of calls of one phase, run back to back in the worker (PhaseCalls), and how long the worker's threads
    ran and waited on a run queue across them (/proc's schedstat, read in the worker at the block's start and end:
    not the wait to be woken for the request; 0 where the kernel shows no schedstat)."""

    rounds: list[PhaseRound]
    run_ns: int
    wait_ns: int
    wall_ns: int = 0  # the block's duration in the worker, each call's untimed preparation and checks included


@request_type("phase_calls", PhaseBlock)
class PhaseCalls(Phase):
    """`calls` rounds of a phase in one request: a paired phase's block (bench/test_phases.py measure_paired), so
    that its calls follow one another as a program's loop runs them, with no request's round trip between them."""

    calls: int = 1


@request_type("phase_names", Names)
class PhaseNames(Request):
    pass


@request_type("layout", LayoutReply)
class Layout(Request):
    pass


@request_type("get_params", Data)
class GetParams(Request):
    pass


@request_type("set_params", Ok)
class SetParams(Request):
    data: str  # base64 of float32s


@request_type("epoch_batches", Count)
class EpochBatches(Request):
    pass


@request_type("batch", BatchReply)
class Batch(Request):
    index: int


@request_type("train_steps", Losses)
class TrainSteps(Request):
    steps: int


@request_type("dist_store", Port)
class DistStore(Request):
    world: int
    timeout_s: float


@request_type("dist_join", Joined)
class DistJoin(Request):
    rank: int
    world: int
    device: str
    timeout_s: float
    port: int


@request_type("timed_steps", StepTimes)
class TimedSteps(Request):
    steps: int


@request_type("evaluate", Evaluation)
class Evaluate(Request):
    pass


@request_type("train", Run)
class Train(Request):
    epochs: int
    synchronize: bool
    max_steps: int = 0


@request_type("rounds_open", RoundsOpened)
class RoundsOpen(Request):  # a case's counted rounds start with the next phase: time the canary, read the threads
    pass


@request_type("rounds_close", RoundsClosed)
class RoundsClose(Request):  # they have ended: read the threads, time the canary
    pass


@request_type("ensemble_start", Ok)
class EnsembleStart(Request):
    models: int


@request_type("ensemble_step", EnsembleReply)
class EnsembleStep(Request):
    pass


@request_type("ensemble_params", Data)
class EnsembleParams(Request):
    member: int


@request_type("ensemble_stop", Ok)
class EnsembleStop(Request):
    pass
