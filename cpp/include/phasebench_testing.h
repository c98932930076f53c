/* phasebench_testing.h: test-only entry points of the same library, kept out of the production ABI
 * (phasebench.h) so that no production caller carries a test knob. Defined in cpp/src/testing.cpp, under
 * phasebench.h's rules: PB_OK or PB_ERROR with pb_last_error(), no C++ exception crosses, a null, unknown or
 * destroyed handle is an error. */
#ifndef PHASEBENCH_TESTING_H
#define PHASEBENCH_TESTING_H

#include "phasebench.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Exported from a library built with -fvisibility=hidden (cpp/Makefile). */
#pragma GCC visibility push(default)

/* The gate's slow knob (PHASEBENCH_TEST_SLOW_PHASE, phasebench/gate): from this call on, `phase` busy-waits `ns`
 * inside its timed body or, with fraction above 0, that fraction of the time its body just took, round by round;
 * in pb_train the total of that name too (train_step's is step_in_run's). A name that is no phase slows nothing.
 * The library copies the string. A later call replaces the knob; neither ns nor fraction may be negative. */
int pb_testing_slow_phase(pb_session session, const char* phase, int64_t ns, double fraction);

/* The same knob as deterministic work: from this call on, `phase` runs `iterations` iterations of a fixed loop after
 * its body, reading no clock, so that it adds the same instructions each round (the instruction-count gate's
 * injected regression, docs/instruction-counts.md). A later call of either replaces the knob. */
int pb_testing_slow_work(pb_session session, const char* phase, int64_t iterations);

/* A deterministic hold, for tests of a call in flight: from this call on, `phase` (in pb_train too, as the slow
 * knob names it) waits at the start of its body until pb_testing_release_hold. It replaces the knob, as the calls
 * above do. */
int pb_testing_hold_phase(pb_session session, const char* phase);
/* Waits up to timeout_ms for a held body to be waiting; *waiting is 1 when one is (a call on this session is then
 * inside the library), else 0. May be called while another thread's call runs on the session. */
int pb_testing_await_hold(pb_session session, int64_t timeout_ms, int32_t* waiting);
/* Lets the held body, and every later round of that phase, run. */
int pb_testing_release_hold(pb_session session);

/* The trainer's device as pb_create resolves pb_options.device (`name`; NULL: none named), through the trainer's
 * settings (cpp/src/trainer.cpp: CUDA's availability, then resolve_device), on a machine without a GPU: for the call,
 * c10's CUDA device guard implementation is a fake one of `device_count` GPUs whose current device is
 * `current_index` and whose setDevice records its index. Writes the resolved device's name ("cuda:1") into buffer
 * and the index setDevice received into *set_index (-1: none). The real implementation is back in place when the
 * call returns, failed or not. */
int pb_testing_resolve_cuda_device(const char* name, int32_t current_index, int32_t device_count, char* buffer,
                                   int64_t capacity, int32_t* set_index);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
