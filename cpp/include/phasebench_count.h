/* phasebench_count.h: the instruction-count bracket (docs/instruction-counts.md), one helper for both languages.
 * The Python worker calls these through ctypes around its phase's body; the C++ trainer runs the same bracket
 * inside its timed() when counting is on. Compiled with Valgrind's client requests where <valgrind/callgrind.h>
 * exists (PHASEBENCH_CALLGRIND=1, part of the build's hash); elsewhere pb_count_supported() says 0 and the rest do
 * nothing. Outside Valgrind a client request is a few no-op instructions. No function here reads a counter: each
 * counted round's count is in the statistics dumped at its end (CALLGRIND_DUMP_STATS_AT(label)).
 *
 * As in phasebench.h, every function returns PB_OK or PB_ERROR (with pb_last_error()). pb_count_start,
 * pb_count_begin, pb_count_end and pb_count_phases cannot fail and always return PB_OK. */
#ifndef PHASEBENCH_COUNT_H
#define PHASEBENCH_COUNT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* Exported from a library built with -fvisibility=hidden (cpp/Makefile). */
#pragma GCC visibility push(default)

/* 1 where the library holds Valgrind's client requests, else 0. */
int pb_count_supported(int32_t* supported);
/* How many Valgrind layers the process runs under (RUNNING_ON_VALGRIND): 0 natively. */
int pb_count_running(int32_t* layers);
/* CALLGRIND_START_INSTRUMENTATION, once per worker (every start or stop flushes Valgrind's translations). */
int pb_count_start(void);
/* The label of the next dump ("case/round"); the library copies it. NULL is "round". */
int pb_count_label(const char* label);
/* The bracket: zero the statistics, collection on ... collection off, dump them under the label. */
int pb_count_begin(void);
int pb_count_end(void);
/* With on != 0 the C++ trainer's phase bodies run in the bracket instead of between clock reads. */
int pb_count_phases(int32_t on);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
