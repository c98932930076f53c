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
int pb_testing_slow_phase(pb_session* session, const char* phase, int64_t ns, double fraction);

/* The same knob as deterministic work: from this call on, `phase` runs `iterations` iterations of a fixed loop after
 * its body, reading no clock, so that it adds the same instructions each round (the instruction-count gate's
 * injected regression, docs/instruction-counts.md). A later call of either replaces the knob. */
int pb_testing_slow_work(pb_session* session, const char* phase, int64_t iterations);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
