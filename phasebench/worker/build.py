"""Build the C++ trainer (cpp/) into a shared library, once per source and toolchain.

The library is cached under build/<hash>/ where the hash covers every source and header, the Makefile,
the compiler flags and the torch version, so a second run rebuilds nothing.
`python -m phasebench.worker.build` builds by hand and prints the library's path.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from phasebench.handed_down import handed_down
from phasebench.repository import ROOT

CPP_DIR = ROOT / "cpp"
BUILD_DIR = ROOT / "build"
# What a build's hash covers, under cpp/: every file of these folders, and these files.
SOURCES = ("include", "src", "Makefile", "exports.map")
LIBRARY_NAME = "libphasebench.so"
# The library's builds: production (only include/phasebench.h's and phasebench_count.h's functions exported) and
# testing (cpp/Makefile's `testing`: include/phasebench_testing.h's entry points too), each cached apart:
# {variant: (file name, make target, the make variable naming its output)}.
VARIANTS = {"production": (LIBRARY_NAME, None, "OUT"), "testing": ("libphasebench-testing.so", "testing", "TESTING_OUT")}
# The plain C++ program the trainer is held to (cpp/plain/mnist_plain.cpp; `python -m phasebench.plain`).
PLAIN_SOURCES = ("plain", "Makefile")
PLAIN_NAME = "mnist_plain"
# PHASEBENCH_SANITIZE=address builds (and caches separately) an AddressSanitizer library.
SANITIZERS = {"": "", "address": "-fsanitize=address -fno-omit-frame-pointer"}


class BuildUnavailable(RuntimeError):
    """No C++ toolchain here: the cpp cases are skipped with this message."""


class BuildFailed(RuntimeError):
    """The compiler ran and failed: the cpp cases fail with its output."""


def cuda_header_dir() -> str | None:
    """A folder holding the CUDA runtime's headers that ATen/cuda/CUDAGraph.h includes (cuda_runtime_api.h and
    the crt/host_config.h it pulls in), or None. The pip CUDA wheels need no toolkit: the runtime's headers
    come with nvidia-cuda-runtime (crt/ only with nvidia-cuda-crt) and, complete, with triton's NVIDIA
    backend, which torch's CUDA wheels install. CUDA_HOME's toolkit comes first where there is one."""
    import importlib.util

    candidates = [Path(os.environ[name], "include") for name in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(name)]
    candidates.append(Path("/usr/local/cuda/include"))
    for package, below in (("nvidia", ("cu13/include", "cuda_runtime/include")), ("triton", ("backends/nvidia/include",))):
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            candidates += [Path(location, sub) for sub in below]
    for folder in candidates:
        if (folder / "cuda_runtime_api.h").is_file() and (folder / "crt" / "host_config.h").is_file():
            return str(folder)
    return None


def callgrind_header(compiler: str) -> str | None:
    """Where the compiler finds <valgrind/callgrind.h> (the instruction-count bracket's client requests,
    cpp/src/count.cpp), or None: without it the library builds the bracket as no-ops, and --count refuses."""
    try:
        done = subprocess.run([compiler, "-E", "-H", "-x", "c++", "-"], input="#include <valgrind/callgrind.h>\n",
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = [line.lstrip(". ").strip() for line in done.stderr.splitlines() if line.rstrip().endswith("callgrind.h")]
    return found[0] if done.returncode == 0 and found else None


# make_variables' answer with its key, for the pytest runs a run starts (its tests' child runs): they take it from
# the environment rather than importing torch again to hash the build (about 2 s of CPU each).
VARIABLES_ENV = "PHASEBENCH_BUILD_VARIABLES"


def _variables_key() -> list:
    """What make_variables' answer depends on: the interpreter and its torch (its version.py, read without importing
    torch), the compiler and the variables that choose the headers and the sanitizer."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    version_file = Path(spec.origin).with_name("version.py") if spec and spec.origin else None
    version = version_file.read_text() if version_file and version_file.is_file() else None
    names = ("CXX", "PHASEBENCH_SANITIZE", "CUDA_HOME", "CUDA_PATH", "PATH", "CPATH", "CPLUS_INCLUDE_PATH")
    return [sys.executable, sys.prefix, version] + [os.environ.get(name) for name in names]


def make_variables() -> dict[str, str]:
    """The make variables a build uses and its hash covers; handed to the pytest runs this process starts."""
    return handed_down(VARIABLES_ENV, _variables_key(), _toolchain_variables)


def _toolchain_variables() -> dict[str, str]:
    import torch
    from torch.utils import cpp_extension

    libdir = cpp_extension.library_paths()[0]
    cuda_libs = [f"-l{name}" for name in ("torch_cuda", "c10_cuda") if Path(libdir, f"lib{name}.so").exists()]
    # CUDA graphs (cpp-graphs) where torch has CUDA and the runtime's headers are here; without them the
    # library still builds, and refuses a "graphs" trainer with that reason.
    headers = cuda_header_dir() if cuda_libs else None
    cuda_graphs = f"-DPHASEBENCH_CUDA_GRAPHS=1 -isystem {headers}" if headers else ""
    sanitize = os.environ.get("PHASEBENCH_SANITIZE", "")
    if sanitize not in SANITIZERS:
        raise BuildFailed(f"PHASEBENCH_SANITIZE={sanitize!r}: valid values are {sorted(SANITIZERS)}")
    compiler = os.environ.get("CXX", "g++")
    callgrind = callgrind_header(compiler) if shutil.which(compiler) else None
    return {
        "CXX": compiler,
        "TORCH_INCLUDES": " ".join(cpp_extension.include_paths()),
        "TORCH_LIBDIR": libdir,
        "TORCH_CUDA_LIBS": " ".join(cuda_libs),
        "ABI_FLAG": f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}",
        "SANITIZE": SANITIZERS[sanitize],
        "CUDA_GRAPHS": cuda_graphs,
        # The header's path is part of the hash: a library built without it is never taken for one with it.
        "CALLGRIND": f"-DPHASEBENCH_CALLGRIND=1 -DPHASEBENCH_CALLGRIND_HEADER={callgrind}" if callgrind
                     else "-DPHASEBENCH_CALLGRIND=0",
        "TORCH_VERSION": torch.__version__,  # not used by make; part of the hash
    }


def sanitizer_runtime_env() -> dict[str, str]:
    """Environment for a process that loads the PHASEBENCH_SANITIZE=address library (C++ workers): Python
    is not built with ASan, so the ASan runtime must be preloaded, and libstdc++ with it, or ASan finds no
    C++ exception functions to wrap. Defaults for ASAN_OPTIONS (yours win): no leak report, which would
    list Python's and LibTorch's allocations that live until exit; a segfault stays a SIGSEGV, as the
    suite reports it without ASan. The pytest process itself must not preload ASan: torch's cuDNN
    loading aborts under it."""
    if os.environ.get("PHASEBENCH_SANITIZE", "") != "address":
        return {}
    compiler = os.environ.get("CXX", "g++")
    preload = [subprocess.run([compiler, f"-print-file-name={name}"], capture_output=True, text=True,
                              check=True).stdout.strip() for name in ("libasan.so", "libstdc++.so")]
    return {"LD_PRELOAD": " ".join(preload),
            "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=0:handle_segv=0")}


def source_files(sources: tuple[str, ...] = SOURCES) -> list[str]:
    """The files `sources` names (folders by every file in them, at any depth), relative to cpp/, sorted."""
    files = set()
    for name in sources:
        path = CPP_DIR / name
        files |= {str(f.relative_to(CPP_DIR)) for f in path.rglob("*") if f.is_file()} if path.is_dir() else {name}
    return sorted(files)


def build_hash(variables: dict[str, str], sources: tuple[str, ...] = SOURCES) -> str:
    digest = hashlib.sha256()
    for name in source_files(sources):
        digest.update(name.encode() + b"\0" + (CPP_DIR / name).read_bytes())
    for key in sorted(variables):
        digest.update(f"{key}={variables[key]}\0".encode())
    return digest.hexdigest()[:16]


def toolchain_missing() -> str | None:
    """Why the C++ library cannot be built here (no compiler or make on PATH), or None when it can."""
    for tool in (os.environ.get("CXX", "g++"), "make"):  # make_variables()'s CXX
        if shutil.which(tool) is None:
            return f"no C++ toolchain: '{tool}' not found on PATH (install g++ and make)"
    return None


def library_path(quiet: bool = True, announce=None, variant: str = "production") -> Path:
    """The built library of that variant (VARIANTS), building it first if the cache has none for this hash;
    `announce(line)` says so first."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown library variant '{variant}': {', '.join(VARIANTS)}")
    name, target, out = VARIANTS[variant]
    return _built(name, SOURCES, target=target, quiet=quiet, announce=announce, out=out)


def plain_program_path(quiet: bool = True) -> Path:
    """The built plain C++ program (cpp/plain/mnist_plain.cpp), cached as the library is."""
    return _built(PLAIN_NAME, PLAIN_SOURCES, target="plain", quiet=quiet, out="PLAIN_OUT")


def _built(name: str, sources: tuple[str, ...], target: str | None, quiet: bool, announce=None,
           out: str = "OUT") -> Path:
    missing = toolchain_missing()
    if missing:
        raise BuildUnavailable(missing)
    variables = make_variables()
    if target:  # the same variables hash another set of sources, or the testing build: keep them apart
        variables = variables | {"TARGET": target}
    out_dir = BUILD_DIR / build_hash(variables, sources)
    library = out_dir / name
    if library.exists():
        return library
    out_dir.mkdir(parents=True, exist_ok=True)
    # Several workers, or processes, may ask at once: one builds in the folder, the others wait for it.
    with open(out_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if library.exists():
            return library
        partial = out_dir / (name + ".partial")
        # One compiler: the library is one translation unit (cpp/Makefile says why).
        command = ["make", "--no-print-directory", "-B", "-C", str(CPP_DIR)] + ([target] if target else [])
        command += [f"{out}={partial}"] + [f"{key}={value}" for key, value in variables.items()
                                         if key not in ("TORCH_VERSION", "TARGET")]
        what = f"the C++ library{' (' + target + ')' if target else ''}"
        if not quiet:
            print(f"building {library} ...", file=sys.stderr, flush=True)
        if announce:
            announce(f"phasebench: building {what} against torch {variables['TORCH_VERSION']} in {out_dir} "
                     f"(once per source and toolchain) ...")
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildFailed(f"C++ build failed ({' '.join(command)}):\n{done.stdout}{done.stderr}")
        if done.stderr.strip():  # warnings: -Wall -Wextra should be clean (docs/architecture.md#the-c-abi-and-the-build)
            (out_dir / "warnings.txt").write_text(done.stderr)
        partial.rename(library)
        took = f"built {what} in {time.monotonic() - started:.0f} s on {os.cpu_count()} cores"
        if not quiet:
            print(took, file=sys.stderr, flush=True)
        if announce:
            announce(f"phasebench: {took}")
    return library


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variant", choices=tuple(VARIANTS), default="production")
    parser.add_argument("--all", action="store_true",
                        help="build every variant and the plain C++ program (what the test command uses)")
    args = parser.parse_args(argv)
    try:
        if args.all:
            for variant in VARIANTS:
                print(library_path(quiet=False, variant=variant))
            print(plain_program_path(quiet=False))
            return 0
        print(library_path(quiet=False, variant=args.variant))
    except (BuildUnavailable, BuildFailed) as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
