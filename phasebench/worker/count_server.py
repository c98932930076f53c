"""The instruction-count mode inside a worker (docs/instruction-counts.md): the library's bracket put around each
round's body in the worker's own language, instrumentation started once, the empty bracket's count (the floor),
and each counted round's dump read back. Used by phasebench/worker/server.py when it runs with --count-out."""

from __future__ import annotations

import ctypes
import gc
import statistics

from phasebench.worker import counting


class Counter:
    def __init__(self, library: str, out_file: str, impl: str):
        self.lib = ctypes.CDLL(library)  # the helper lives in the C++ library, for both languages
        for name in ("pb_count_supported", "pb_count_running"):
            getattr(self.lib, name).restype = ctypes.c_int
        self.lib.pb_count_label.argtypes = [ctypes.c_char_p]
        self.lib.pb_count_phases.argtypes = [ctypes.c_int]
        if not self.lib.pb_count_supported():
            raise RuntimeError(f"{library} was built without <valgrind/callgrind.h>: it cannot count")
        if not self.lib.pb_count_running():
            raise RuntimeError("--count instructions: this worker does not run under Valgrind")
        self.out_file, self.impl, self.rounds = out_file, impl, 0

    def attach(self, language: str, trainer) -> dict:
        """Put the bracket around the trainer's bodies, start instrumentation (once), and count the empty bracket;
        returns what the worker's start reply adds."""
        if language == "python":
            begin, end = self.lib.pb_count_begin, self.lib.pb_count_end

            def counted(body, owner):
                begin()
                body(owner)
                end()
                return 0, 0, 0

            trainer.timed = counted
        else:
            self.lib.pb_count_phases(1)
        # Python's cyclic GC: everything so far collected and frozen, and no collection inside a count.
        gc.collect()
        gc.freeze()
        gc.disable()
        self.lib.pb_count_start()
        floors = [self.count(trainer, "noop")["instructions"] for _ in range(counting.FLOOR_ROUNDS)]
        return {"count_floor": int(statistics.median(floors)), "count_floors": floors}

    def count(self, trainer, phase: str, run=None) -> dict:
        """One round of `phase` in the bracket (run() runs it; by default trainer.run_phase): the round's count
        and where it went, from the one dump it wrote."""
        self.rounds += 1
        label = f"{self.impl}/{phase}/{self.rounds}"
        self.lib.pb_count_label(label.encode())
        before = len(counting.dumps(self.out_file))
        gc.collect()
        result = run() if run else trainer.run_phase(phase)
        written = counting.dumps(self.out_file)[before:]
        if len(written) != 1:
            raise RuntimeError(f"{label}: {len(written)} callgrind dumps, expected 1 ({self.out_file}.N)")
        dump = counting.parse_dump(written[0])
        written[0].unlink()
        if dump["label"] != label:
            raise RuntimeError(f"{label}: the dump is labelled {dump['label']!r}")
        return {"instructions": dump["instructions"], "split": counting.split(dump["self"]),
                "top": counting.top_functions(dump["self"]), "label": label, "result": result}
