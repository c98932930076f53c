// count.cpp: the instruction-count bracket of include/phasebench_count.h. Valgrind's client requests where its
// header was found at build time (PHASEBENCH_CALLGRIND, phasebench/worker/build.py); no-ops elsewhere.
#include "phasebench_count.h"

#include <string>

#include "trainer.h"

#if PHASEBENCH_CALLGRIND
#include <valgrind/callgrind.h>
#endif

namespace phasebench {

namespace {
std::string& label() {
  static std::string text = "round";
  return text;
}
bool counting = false;
}  // namespace

bool counting_phases() { return counting; }

Timing counted(const std::function<void()>& body) {
  pb_count_begin();
  body();
  pb_count_end();
  return {0, 0, 0};
}

}  // namespace phasebench

extern "C" {

int pb_count_supported(void) { return PHASEBENCH_CALLGRIND ? 1 : 0; }

int pb_count_running(void) {
#if PHASEBENCH_CALLGRIND
  return static_cast<int>(RUNNING_ON_VALGRIND);
#else
  return 0;
#endif
}

void pb_count_start(void) {
#if PHASEBENCH_CALLGRIND
  CALLGRIND_START_INSTRUMENTATION;
#endif
}

void pb_count_label(const char* text) { phasebench::label() = text ? text : "round"; }

void pb_count_begin(void) {
#if PHASEBENCH_CALLGRIND
  CALLGRIND_ZERO_STATS;
  CALLGRIND_TOGGLE_COLLECT;
#endif
}

void pb_count_end(void) {
#if PHASEBENCH_CALLGRIND
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_DUMP_STATS_AT(phasebench::label().c_str());
#endif
}

void pb_count_phases(int on) { phasebench::counting = on != 0; }

}  // extern "C"
