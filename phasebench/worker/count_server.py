"""The instruction-count mode inside a worker (docs/instruction-counts.md): the library's bracket put around each
round's body in the worker's own language, instrumentation started once, the empty bracket's rounds (the floor),
and where each counted round's dump is: the pytest process reads it (phasebench/worker/client.py). Used by
phasebench/worker/server.py when it runs with --count-out."""

from __future__ import annotations

import ctypes
import gc
import sys

from phasebench.phase_round import CountDump, PhaseRound
from phasebench.worker import counting


class Counter:
    def __init__(self, library: str, out_file: str, impl: str):
        self.lib = ctypes.CDLL(library)  # the helper lives in the C++ library, for both languages
        self.lib.pb_count_supported.argtypes = self.lib.pb_count_running.argtypes = [ctypes.POINTER(ctypes.c_int32)]
        self.lib.pb_count_label.argtypes = [ctypes.c_char_p]
        self.lib.pb_count_phases.argtypes = [ctypes.c_int32]
        self.lib.pb_last_error.restype = ctypes.c_char_p
        if not self._ask("pb_count_supported"):
            raise RuntimeError(f"{library} was built without <valgrind/callgrind.h>: it cannot count")
        if not self._ask("pb_count_running"):
            raise RuntimeError("--count instructions: this worker does not run under Valgrind")
        self.out_file, self.impl, self.rounds = out_file, impl, 0

    def _ask(self, name: str) -> int:
        """The number the library's function `name` writes out."""
        answer = ctypes.c_int32()
        self._call(name, ctypes.byref(answer))
        return answer.value

    def _call(self, name: str, *args) -> None:
        """The library's function `name`, outside the bracket; RuntimeError with its message when it fails.
        pb_count_begin and pb_count_end, inside it, always return PB_OK and are not checked."""
        if getattr(self.lib, name)(*args) != 0:  # PB_OK
            raise RuntimeError(f"{name}: {self.lib.pb_last_error().decode(errors='replace')}")

    def attach(self, language: str, trainer) -> list[CountDump]:
        """Put the bracket around the trainer's bodies, start instrumentation (once), and count the empty bracket;
        returns where the empty bracket's dumps are (the worker's start reply's count_floor_dumps)."""
        if language == "python":
            from phasebench.train.timing import BodyTime  # the Python trainer's: torch is loaded already

            begin, end = self.lib.pb_count_begin, self.lib.pb_count_end

            def counted(body, owner):
                # CPython's type attribute cache is indexed by the attribute name's address: what earlier code left
                # in it, and where the heap put the names, decide which of the body's lookups miss (most of python
                # loss's 7 % spread across heap layouts). Emptied, every round starts from the same cache.
                sys._clear_type_cache()
                begin()
                body(owner)
                end()
                return BodyTime(0, 0, 0)  # the count is in the dump

            trainer.timed = counted
        else:
            self._call("pb_count_phases", 1)
        # Python's cyclic GC: everything so far collected and frozen, and no collection inside a count.
        gc.collect()
        gc.freeze()
        gc.disable()
        self._call("pb_count_start")
        floors = [self.count(trainer, "noop") for _ in range(counting.FLOOR_ROUNDS)]
        return [dump for _, dump in floors]

    def count(self, trainer, phase: str, run=None) -> tuple[PhaseRound, CountDump]:
        """One round of `phase` in the bracket (run() runs it; by default trainer.run_phase): the round, and where
        its one dump is, under its label. The dump is read by the pytest process (counting.read_round), not here:
        everything this process runs after pb_count_start is instrumented, and reading a dump here took longer than
        most rounds' bodies."""
        self.rounds += 1
        label = f"{self.impl}/{phase}/{self.rounds}"
        self._call("pb_count_label", label.encode())
        before = len(counting.dumps(self.out_file))
        gc.collect()
        result = run() if run else trainer.run_phase(phase)
        written = counting.dumps(self.out_file)[before:]
        if len(written) != 1:
            raise RuntimeError(f"{label}: {len(written)} callgrind dumps, expected 1 ({self.out_file}.N)")
        return result, CountDump(str(written[0]), label)
