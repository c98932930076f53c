/* phasebench_count.h: the instruction-count bracket (docs/instruction-counts.md), one helper for both languages.
 * The Python worker calls these through ctypes around its phase's body; the C++ trainer calls them itself inside
 * its timed() when counting is on. Compiled with Valgrind's client requests where <valgrind/callgrind.h> exists
 * (PHASEBENCH_CALLGRIND=1, part of the build's hash); elsewhere pb_count_supported() is 0 and the rest do nothing.
 * Outside Valgrind a client request is a few no-op instructions. No function here reads a counter: each counted
 * round's count is in the statistics dumped at its end (CALLGRIND_DUMP_STATS_AT(label)). */
#ifndef PHASEBENCH_COUNT_H
#define PHASEBENCH_COUNT_H

#ifdef __cplusplus
extern "C" {
#endif
/* Exported from a library built with -fvisibility=hidden (cpp/Makefile). */
#pragma GCC visibility push(default)

/* 1 where the library holds Valgrind's client requests, else 0. */
int pb_count_supported(void);
/* How many Valgrind layers the process runs under (RUNNING_ON_VALGRIND): 0 natively. */
int pb_count_running(void);
/* CALLGRIND_START_INSTRUMENTATION, once per worker (every start or stop flushes Valgrind's translations). */
void pb_count_start(void);
/* The label of the next dump ("case/round"); the library copies it. */
void pb_count_label(const char* label);
/* The bracket: zero the statistics, collection on ... collection off, dump them under the label. */
void pb_count_begin(void);
void pb_count_end(void);
/* With on != 0 the C++ trainer's phase bodies run in the bracket instead of between clock reads. */
void pb_count_phases(int on);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
