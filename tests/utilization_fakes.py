"""What the utilization tests share: the keys of a CPU figure, a stand-in for pytest-benchmark's fixture (the fields
the monitor writes), and a monitor whose thread does not poll during a test."""

from types import SimpleNamespace

from phasebench.utilization import Monitor

CPU_KEYS = {"cores", "cpu_s", "user_s", "system_s", "wall_s", "cores_available", "machine_other_cores"}


def fake_benchmark(group: str = "train_step", enabled: bool = True):
    return SimpleNamespace(extra_info={}, group=group, enabled=enabled)


def monitor() -> Monitor:
    """A monitor whose thread does not poll during a test, so only start and stop read the fake."""
    return Monitor(interval_s=3600)
