"""The instruction-count mode's worker side, without torch (docs/instruction-counts.md): the Valgrind command a
worker runs under, the pins that make a count repeat, and the reading of one dumped round of callgrind statistics,
its total and where it went (by object, and inside LibTorch by symbol).

Each worker runs under `valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`, starts instrumentation
once (pb_count_start), and brackets each counted round's body in its own language with the library's helper
(cpp/include/phasebench_count.h): statistics zeroed, collection on, the body, collection off, the statistics dumped
under the round's label. No client request reads a counter: the round's count is the dump's total.

With --count-i1/--count-d1/--count-ll (and --count-branches) callgrind also simulates caches of that geometry (and
branch prediction), and each dump carries those events beside Ir
(docs/instruction-counts.md#simulated-caches-and-branches)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

METRIC = "instructions"
UNIT = "instructions"
# What makes the simulated and the native paths the same, and a count repeat (README's pins, docs page):
# Valgrind has no AVX-512, so ATen, oneDNN and MKL are held to AVX2, as they would choose under Valgrind anyway.
PINS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "DNNL_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    # glibc keeps every freed small chunk in its per-thread cache (7 a size by default), so that a round's mallocs
    # take the same path whatever the heap's bins hold: the small phases' counts otherwise moved by 2-5 % with the
    # heap the worker started from (docs/instruction-counts.md#determinism-first).
    "GLIBC_TUNABLES": "glibc.malloc.tcache_count=65535",
}
VALGRIND_OPTIONS = ("--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no", "--dump-instr=no",
                    "--compress-strings=no", "--compress-pos=no")
# The cache simulation (--count-i1, --count-d1, --count-ll: all three, SIZE,ASSOC,LINE each, never the virtual CPU's
# report) and the branch simulation (--count-branches): docs/instruction-counts.md#simulated-caches-and-branches.
CACHES = {"I1": "--count-i1", "D1": "--count-d1", "LL": "--count-ll"}  # Valgrind's cache, the option that sets it
BRANCHES_OPTION = "--count-branches"
MIN_LINE = 16  # bytes: Valgrind's smallest simulated line (cg_arch.c's MIN_LINE_SIZE)
# Every event a dump may name with the simulations on: its meaning; each is a count of events (unit: events).
EVENTS = {
    "Ir": "instructions executed (the count; the same with or without the simulations)",
    "Dr": "data reads (memory reads)", "Dw": "data writes (memory writes)",
    "I1mr": "I1 instruction read misses", "D1mr": "D1 data read misses", "D1mw": "D1 data write misses",
    "ILmr": "LL instruction read misses", "DLmr": "LL data read misses", "DLmw": "LL data write misses",
    "Bc": "conditional branches executed", "Bcm": "conditional branches mispredicted",
    "Bi": "indirect branches executed", "Bim": "indirect branches mispredicted",
}
# What the bracket holds, and what the worker does between rounds; raise it when either changes (the count gate calls
# counts of another bracket not comparable). 2: the worker no longer reads its dumps (the pytest process does), so
# its heap between rounds differs, and the small phases' counts with it (up to 7 % for python loss). 3: the Python
# worker empties the interpreter's type attribute cache before each bracket
# (docs/instruction-counts.md#determinism-first), and glibc's tcache holds every freed small chunk (PINS).
BRACKET = ("callgrind 3: zero, toggle collection, body, toggle, dump (cpp/include/phasebench_count.h); "
           "the dump read outside the worker; python's type attribute cache emptied before each bracket; "
           "glibc.malloc.tcache_count=65535")
# PHASEBENCH_COUNT_DUMPS=DIR keeps each round's whole dump there, named by its label, instead of deleting it once read
# (docs/instruction-counts.md#how-a-round-is-counted).
KEEP_DUMPS_ENV = "PHASEBENCH_COUNT_DUMPS"
ROUNDS, WARMUP_ROUNDS = 3, 1  # the mode's defaults; --rounds and --warmup-rounds apply
FLOOR_ROUNDS = 3  # empty-bracket rounds whose median is a worker's count floor

# Where the instructions go: object first, then inside LibTorch by symbol.
CATEGORIES = ("interpreter", "bindings", "dispatcher and autograd", "ATen kernels", "MKL, oneDNN and JIT code",
              "C library and allocator", "rest")
_ONEDNN = re.compile(r"dnnl|mkldnn|ideep|\bmkl_|zendnn|xbyak|jit_uni|jit_avx|jit_sse|brgemm|gemm_driver|sgemm|"
                     r"\bat::native::blas|cblas|fbgemm", re.I)
_FRAMEWORK = re.compile(r"Dispatcher|c10::impl::|OperatorHandle|KernelFunction|BoxedKernel|autograd|VariableType|"
                        r"ADInplaceOrView|at::_ops::|DispatchKey|dispatch|TensorImpl|intrusive_ptr|SymInt|"
                        r"ThreadLocal|TLS|Tracer|RecordFunction|c10::impl|OperatorEntry|InferenceMode|"
                        r"GradMode|AutoDispatch|Functionalize|ExcludeDispatchKeyGuard|IValue|TensorOptions|"
                        r"c10::detail|Storage|at::TensorBase|at::Tensor::|at::TensorIteratorBase::build|"
                        r"TensorIteratorConfig|make_tensor|empty_generic|empty_cpu|DeviceGuard|VariableHooks|"
                        # Checks made per call, most from the Python bindings, that live in libtorch_cpu: not kernels.
                        r"torch_function_mode|WarningUtils|WarningHandler|getTracingState|SavedTensorDefaultHooks|"
                        r"getStepCallbacks|InternedStrings|privateuse1|SymBool")
_ALLOC = re.compile(r"Allocator|alloc_cpu|free_cpu|malloc|memcpy|memset|memmove|posix_memalign|operator new|"
                    r"operator delete")
_LIBC = ("libc.so", "libc-", "libm.so", "libm-", "ld-linux", "ld-2", "libstdc++", "libgcc_s", "libpthread",
         "libdl.so", "libjemalloc", "libtcmalloc", "libgomp", "libiomp", "vgpreload", "libffi")


def valgrind_version() -> str | None:
    """`valgrind --version` (valgrind-3.19.0), or None where there is no valgrind."""
    if shutil.which("valgrind") is None:
        return None
    done = subprocess.run(["valgrind", "--version"], capture_output=True, text=True)
    return done.stdout.strip() or None


def glibc_version() -> str | None:
    """The C library's version (2.36) where it is glibc, else None: counts run glibc's own code (malloc, memcpy)."""
    try:
        name, _, version = os.confstr("CS_GNU_LIBC_VERSION").partition(" ")
    except (ValueError, OSError, AttributeError):
        return None
    return version if name == "glibc" and version else None


def aslr_off() -> list[str]:
    """`setarch <arch> -R` where it works here (ASLR off for the worker), else nothing."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return []
    command = [setarch, os.uname().machine, "-R"]
    try:
        works = subprocess.run(command + ["true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        works = False
    return command if works else []


def geometry(option: str, text: str) -> list[int]:
    """An explicit cache geometry, `SIZE,ASSOC,LINE` (bytes, ways, bytes: Valgrind's --I1/--D1/--LL form), as
    [size, assoc, line]; ValueError in one line for one Valgrind's simulation would refuse (cg_arch.c's check_cache)."""
    usage = f"{option} {text!r}: expected SIZE,ASSOC,LINE (bytes, ways, bytes), e.g. {option} 32768,8,64"
    parts = text.split(",")
    if len(parts) != 3 or not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise ValueError(usage)
    size, assoc, line = (int(part) for part in parts)
    if line & (line - 1) or line < MIN_LINE:
        raise ValueError(f"{usage}; the line must be a power of two of at least {MIN_LINE} bytes")
    if size <= line or assoc > size // line:
        raise ValueError(f"{usage}; the size must exceed the line and hold ASSOC lines")
    sets, rest = divmod(size, assoc * line)
    if rest or sets & (sets - 1):
        raise ValueError(f"{usage}; the sets, SIZE / (ASSOC x LINE), must be a whole power of two")
    return [size, assoc, line]


def simulation(count: str | None, given: dict[str, str | None], branches: bool) -> dict:
    """The simulations asked for: {} when none, else {"caches": {"I1": [size, assoc, line], "D1": ..., "LL": ...} or
    None, "branches": bool}. `given` maps each of CACHES' options to its text or None. ValueError in one line for
    any of them without --count instructions, a geometry given in part (none is taken from the virtual CPU), or a
    malformed one."""
    named = [option for option, text in given.items() if text is not None] + ([BRANCHES_OPTION] if branches else [])
    if not named:
        return {}
    if count != "instructions":
        raise ValueError(f"{named[0]} needs --count instructions: it simulates caches or branches under callgrind")
    caches = None
    if any(given.get(option) is not None for option in CACHES.values()):
        missing = [option for option in CACHES.values() if given.get(option) is None]
        if missing:
            raise ValueError(f"{', '.join(missing)} missing: the simulated caches take all three geometries, "
                             f"{', '.join(CACHES.values())} (SIZE,ASSOC,LINE each), none from the virtual CPU")
        caches = {cache: geometry(option, given[option]) for cache, option in CACHES.items()}
    return {"caches": caches, "branches": bool(branches)}


def simulation_options(caches: dict | None = None, branches: bool = False) -> list[str]:
    """Valgrind's options for the simulations: --cache-sim=yes and every cache's geometry, --branch-sim=yes."""
    options = []
    if caches:
        options += ["--cache-sim=yes", *(f"--{cache}={','.join(map(str, caches[cache]))}" for cache in CACHES)]
    if branches:
        options.append("--branch-sim=yes")
    return options


def geometry_label(caches: dict) -> str:
    """A geometry as one string: `I1=32768,8,64 D1=32768,8,64 LL=8388608,16,64`."""
    return " ".join(f"{cache}={','.join(map(str, caches[cache]))}" for cache in CACHES)


def command(out_file: str, prefix: list[str], caches: dict | None = None, branches: bool = False) -> list[str]:
    """The command a counted worker runs under: [setarch -R] valgrind's callgrind writing its dumps to out_file.N,
    simulating caches of the geometry given (and branches) where asked."""
    return [*prefix, "valgrind", *VALGRIND_OPTIONS, *simulation_options(caches, branches),
            f"--callgrind-out-file={out_file}", "--log-file=/dev/null"]


def dumps(out_file: str) -> list[Path]:
    """The dumps written so far to out_file.1, .2, ..., in order."""
    base = Path(out_file)
    found = [(int(p.name.rsplit(".", 1)[1]), p) for p in base.parent.glob(base.name + ".*")
             if p.name.rsplit(".", 1)[1].isdigit()]
    return [p for _, p in sorted(found)]


def read_round(dump: str, label: str) -> dict:
    """One counted round's dump, read outside Valgrind (in the pytest process: the worker only says where its dump
    is) and deleted: {"instructions", "events", "split", "top", "label"} (events: every event the dump names, its
    total, Ir included). Refuses a dump of another round's label."""
    path = Path(dump)
    parsed = parse_dump(path)
    kept = os.environ.get(KEEP_DUMPS_ENV)
    if kept:  # for callgrind_annotate or KCachegrind: DIR/python_loss_13.callgrind
        Path(kept).mkdir(parents=True, exist_ok=True)
        shutil.move(path, Path(kept) / (label.replace("/", "_") + ".callgrind"))
    else:
        path.unlink()
    if parsed["label"] != label:
        raise RuntimeError(f"{label}: the dump {dump} is labelled {parsed['label']!r}")
    return {"instructions": parsed["instructions"], "events": parsed["events"], "split": split(parsed["self"]),
            "top": top_functions(parsed["self"]), "label": label}


def category(obj: str, function: str) -> str:
    """Which of CATEGORIES an instruction of `function` in object file `obj` belongs to."""
    base = os.path.basename(obj)
    if "libpython" in base or base.startswith("python"):
        return "interpreter"
    if "libtorch_python" in base:
        return "bindings"
    if base.startswith(_LIBC):  # before the unnamed-code rule: libffi's (ctypes') functions have no names
        return "C library and allocator"
    if base.startswith(("libmkl", "libdnnl", "libmkldnn")) or obj in ("???", "") or function.startswith("0x"):
        return "MKL, oneDNN and JIT code"  # JIT kernels are code in no object: unnamed
    if base.startswith("libphasebench") and not re.match(r"(phasebench::|pb_|Net|std::)", function):
        base = "libtorch_cpu"  # LibTorch's header code inlined into the C++ trainer: read by symbol as LibTorch's
    if base.startswith(("libtorch_cpu", "libc10", "libtorch.so")):
        if _ONEDNN.search(function):
            return "MKL, oneDNN and JIT code"
        if _ALLOC.search(function) and not function.startswith("at::native"):
            return "C library and allocator"
        if _FRAMEWORK.search(function) and "at::native::" not in function.split("(")[0][:40]:
            return "dispatcher and autograd"
        return "ATen kernels"
    return "rest"


def parse_dump(path: Path) -> dict:
    """One dumped round: {"label", "instructions" (the total), "events" ({event: total} for every event its
    `events:` line names, in that order), "self": {(object, function): self count}}. A cost line right after a
    calls= line is the call's inclusive cost, not the caller's own, and is skipped. The instructions are the first
    event's (Ir; its `totals:`/`summary:` line's first figure); an event a cost line or the totals leave off at the
    end counts 0 there, as callgrind writes them."""
    label, total = "", None
    names: dict[tuple[str, str], str] = {}
    spent: Counter = Counter()
    events: list[str] = []
    summed: list[int] = []  # every event's self costs, summed: the totals where a dump has no totals line
    totals: list[int] | None = None
    obj = function = "???"
    after_call = False
    with open(path, errors="replace") as lines:
        for line in lines:
            if not line or line[0] in "\n#":
                continue
            first = line[0]
            if first.isdigit() or first in "+-*":
                if after_call:
                    after_call = False
                    continue
                parts = line.split()
                if len(parts) > 1:
                    spent[(obj, function)] += int(parts[1])
                    costs = parts[1:]
                    if len(costs) > len(summed):
                        summed += [0] * (len(costs) - len(summed))
                    for i, cost in enumerate(costs):
                        summed[i] += int(cost)
                continue
            key, _, value = line.rstrip("\n").partition("=")
            if key in ("ob", "fn", "cob", "cfn"):
                kind = "ob" if key in ("ob", "cob") else "fn"
                name = _name(names, kind, value)
                if key == "ob":
                    obj = name
                elif key == "fn":
                    function = name
            elif key == "calls":
                after_call = True
            elif line.startswith("desc: Trigger:"):
                label = line.split("Client Request:", 1)[-1].strip() if "Client Request:" in line else line[14:].strip()
            elif line.startswith(("totals:", "summary:")):
                totals = [int(figure) for figure in line.split(":", 1)[1].split()]
                total = totals[0]
            elif line.startswith("events:"):
                events = line.split(":", 1)[1].split()
    if total is None:
        total = sum(spent.values())
    figures = totals if totals is not None else summed
    by_event = {event: figures[i] if i < len(figures) else 0 for i, event in enumerate(events or ["Ir"])}
    return {"label": label, "instructions": total, "events": by_event, "self": spent}


def _name(names: dict, kind: str, value: str) -> str:
    """A name from ob=/fn= lines, compressed ("(12) name", then "(12)") or not."""
    value = value.strip()
    if value.startswith("("):
        ident, _, rest = value.partition(")")
        rest = rest.strip()
        if rest:
            names[(kind, ident)] = rest
            return rest
        return names.get((kind, ident), value)
    return value


def split(spent: Counter) -> dict[str, int]:
    """A round's self counts summed by CATEGORIES (every category present, zeros included)."""
    out = dict.fromkeys(CATEGORIES, 0)
    for (obj, function), count in spent.items():
        out[category(obj, function)] += count
    return out


def top_functions(spent: Counter, n: int = 12) -> list[tuple[str, str, int]]:
    """The n functions with the most self instructions: (object basename, function, count)."""
    return [(os.path.basename(obj), function, count) for (obj, function), count in spent.most_common(n)]


def compare_dumps(a: Path, b: Path, n: int = 15, categories: tuple[str, ...] = ()) -> str:
    """Two rounds' dumps (kept with PHASEBENCH_COUNT_DUMPS) side by side: their totals, their split, and the n
    functions whose self counts differ most (in `categories` only, where given), with the category each is in."""
    first, second = parse_dump(Path(a)), parse_dump(Path(b))
    lines = [f"{'':<28}{first['label']:>22}{second['label']:>22}{'difference':>12}",
             f"{'instructions':<28}{first['instructions']:>22,}{second['instructions']:>22,}"
             f"{first['instructions'] - second['instructions']:>+12,}"]
    splits = split(first["self"]), split(second["self"])
    lines += [f"{name:<28}{splits[0][name]:>22,}{splits[1][name]:>22,}{splits[0][name] - splits[1][name]:>+12,}"
              for name in CATEGORIES]
    names = {key for key in set(first["self"]) | set(second["self"])
             if not categories or category(*key) in categories}
    differing = sorted(names, key=lambda key: -abs(first["self"].get(key, 0) - second["self"].get(key, 0)))[:n]
    lines.append("")
    for obj, function in differing:
        x, y = first["self"].get((obj, function), 0), second["self"].get((obj, function), 0)
        lines.append(f"{x:>9,} {y:>9,} {x - y:>+8,}  [{category(obj, function)}] {os.path.basename(obj)}: "
                     f"{function[:100]}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m phasebench.worker.counting A.callgrind B.callgrind [N [CATEGORY ...]]
    import sys

    if len(sys.argv) < 3 or any(name not in CATEGORIES for name in sys.argv[4:]):
        sys.exit("usage: python -m phasebench.worker.counting DUMP_A DUMP_B [N [CATEGORY ...]]  (dumps kept with "
                 f"{KEEP_DUMPS_ENV}=DIR; categories: {', '.join(repr(name) for name in CATEGORIES)})")
    print(compare_dumps(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if sys.argv[3:] else 15,
                        tuple(sys.argv[4:])))
