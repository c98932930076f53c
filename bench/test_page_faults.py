"""Page faults: a trainer's step reuses its memory as a plain program of its language does (docs/page-faults.md).

glibc's malloc returns the top of its heap to the kernel whenever more than its trim threshold lies free there,
and the threshold only grows once the process has freed an mmap'd block (between 128 KiB and 32 MiB). A process
that never did trims the heap after every step and faults its few MB back in on the next: about 1,000 faults a
step in the C++ worker before it opened the test split at creation, as the published program does. Each worker's
free-running loop is held here to what a plain program of its language does: cpp/plain/mnist_plain.cpp and
bench/mnist_plain.py fault about 3-4 times a step over a whole epoch, first touches included (docs/page-faults.md).
"""

import pytest

from bench import implementations

# A plain program of either language faults 3.2 (C++) to 3.9 (Python) times a step over an epoch, its first
# touches included, and about 0 a step once warm; the trimmed heap faulted 300 to 1,100 a step. Ten a step is
# 40 KiB faulted back each step: far below the artifact, above the plain programs with room for noise.
FAULTS_PER_STEP_BOUND = 10
WARM_STEPS, COUNTED_STEPS = 20, 60


@pytest.mark.parametrize("impl", implementations.DEFAULT_IMPLS)  # the published pair: one per language
def test_a_free_running_loop_faults_no_more_per_step_than_a_plain_program(new_worker, impl):
    worker = new_worker(impl, "cpu")()
    try:
        worker.request({"cmd": "train", "epochs": 1, "synchronize": False, "max_steps": WARM_STEPS})
        counted = worker.request({"cmd": "train", "epochs": 1, "synchronize": False, "max_steps": COUNTED_STEPS})
    finally:
        worker.stop()
    assert counted["steps"] == COUNTED_STEPS
    per_step = counted["minor_faults"] / counted["steps"]
    assert per_step <= FAULTS_PER_STEP_BOUND, (
        f"{impl}'s free-running loop faulted {counted['minor_faults']} pages in {counted['steps']} steps "
        f"({per_step:.0f} a step, a plain program about 0 once warm): its heap is returned to the kernel and "
        f"faulted back in every step")
    assert counted["major_faults"] == 0, f"{impl}: {counted['major_faults']} major faults in a warm loop"
