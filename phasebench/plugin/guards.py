"""The one-line stops for a command the suite cannot honour as written (docs/usage.md#run-skip-or-deselect): a path
option pytest took for a test path, a pytest-benchmark option the workers' timing cannot honour, a histogram without
its packages, a timed run with CUDA launches made blocking."""

from __future__ import annotations

import os
import shlex

# Options whose value pytest may take for a test path (docs/usage.md#a-path-outside-the-repository).
PATH_OPTIONS = ("--mnist-root",)
# pytest-benchmark options the suite cannot honour: every phase is timed inside its worker process, for the rounds
# the suite's own options set (docs/usage.md#pytest-benchmarks-options). Each is refused in one line that names what
# to use instead.
WORKER_TIMING = "phasebench times each phase inside its worker process"
REFUSED_BENCHMARK_OPTIONS = {
    "--benchmark-min-rounds": f"{WORKER_TIMING} for a fixed number of rounds: use --rounds N",
    "--benchmark-max-time": f"{WORKER_TIMING} for a fixed number of rounds: use --rounds N",
    "--benchmark-min-time": f"{WORKER_TIMING}, as many calls a round as fill its own target round: use --rounds N",
    "--benchmark-precision": f"{WORKER_TIMING} for a fixed number of rounds: use --rounds N",
    "--benchmark-confidence": f"{WORKER_TIMING} for a fixed number of rounds: use --rounds N",
    "--benchmark-calibration-precision": f"{WORKER_TIMING}, its calls a round calibrated against its own target "
                                         f"round: use --rounds N",
    "--benchmark-warmup": f"{WORKER_TIMING} after its own warm-up rounds: use --warmup-rounds N",
    "--benchmark-warmup-iterations": f"{WORKER_TIMING} after its own warm-up rounds: use --warmup-rounds N",
    "--benchmark-timer": f"{WORKER_TIMING} with its own clock (time.perf_counter_ns, std::chrono::steady_clock)",
    "--benchmark-disable-gc": f"{WORKER_TIMING}; the pytest process's garbage collector is not in the clock",
    "--benchmark-cprofile": f"{WORKER_TIMING}; the work runs there, out of cProfile's sight",
}


def misread_path_option(config) -> str | None:
    """The one-line stop for `--mnist-root /abs/path` (a separate value) that made pytest choose another
    root directory and configuration than the command means: pytest picks them before any plugin has
    declared the option, taking an existing path for a test path, and then drops pytest.ini's testpaths
    and addopts without a word. None when the choice is the one the command means."""
    from _pytest.config.findpaths import determine_setup

    args = list(config.invocation_params.args)
    given = [(option, args[i + 1]) for i, option in enumerate(args[:-1]) if option in PATH_OPTIONS]
    if not given:
        return None
    meant_root, meant_ini, *_ = determine_setup(
        inifile=config.option.inifilename, override_ini=config.option.override_ini, args=config.option.file_or_dir,
        rootdir_cmd_arg=config.option.rootdir or None, invocation_dir=config.invocation_params.dir)
    if (meant_root, meant_ini) == (config.rootpath, config.inipath):
        return None
    option, value = given[0]
    return (f"{option} {value}: pytest took {value} for a test path and chose its configuration from it (root "
            f"directory {config.rootpath}, ini file {config.inipath or 'none'}, not {meant_ini or meant_root}); "
            f"write {option}={value}")


def given_options(config) -> set[str]:
    """The long options the command line, PYTEST_ADDOPTS and the ini file's addopts name (values set to a
    default still count: they were asked for)."""
    args = [*config.getini("addopts"), *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
            *config.invocation_params.args]
    return {arg.split("=", 1)[0] for arg in (args[:args.index("--")] if "--" in args else args) if arg.startswith("--")}


def refused_option(config) -> str | None:
    """The one-line refusal of a pytest-benchmark option the suite cannot honour, or None."""
    given = given_options(config)
    for option, why in REFUSED_BENCHMARK_OPTIONS.items():
        if option in given:
            return f"{option} is not supported: {why}"
    return None


def blocking_launches(config, environ=os.environ) -> str | None:
    """A timed run under CUDA_LAUNCH_BLOCKING=1: every kernel launch would wait for its kernel, so a cuda phase's
    clocks would read another program than the one the suite times, and its result would be saved as any other.
    Nothing is timed under --benchmark-disable (the test command), which may run so to find where an error starts."""
    if environ.get("CUDA_LAUNCH_BLOCKING", "").strip() != "1" or config.getoption("benchmark_disable", False):
        return None
    return ("CUDA_LAUNCH_BLOCKING=1 makes every CUDA kernel launch wait for the kernel: a timed run would save those "
            "timings as any other's; unset it, or run under --benchmark-disable, where nothing is timed")


def histogram_unavailable(config) -> str | None:
    """--benchmark-histogram without pygal and pygaljs would end the run in a traceback after every benchmark ran."""
    import importlib.util

    if not getattr(config.option, "benchmark_histogram", None):
        return None
    missing = [name for name in ("pygal", "pygaljs") if importlib.util.find_spec(name) is None]
    if missing:
        return (f"--benchmark-histogram needs {' and '.join(missing)}: pip install -r requirements.txt "
                f"(pytest-benchmark[histogram])")
    return None
