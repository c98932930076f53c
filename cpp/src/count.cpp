// count.cpp: the instruction-count bracket of include/phasebench_count.h. Valgrind's client requests where its
// header was found at build time (PHASEBENCH_CALLGRIND, phasebench/worker/build.py); no-ops elsewhere.
#include "phasebench_count.h"

#include "c_api.h"

#include <string>

#if PHASEBENCH_CALLGRIND
#include <valgrind/callgrind.h>
#endif

namespace phasebench {

namespace {

std::string& count_label() {
  static std::string text = "round";
  return text;
}
bool counting = false;

void begin_count() {
#if PHASEBENCH_CALLGRIND
  CALLGRIND_ZERO_STATS;
  CALLGRIND_TOGGLE_COLLECT;
#endif
}

void end_count() {
#if PHASEBENCH_CALLGRIND
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_DUMP_STATS_AT(count_label().c_str());
#endif
}

}  // namespace

bool counting_phases() { return counting; }

Timing counted(const std::function<void()>& body) {
  begin_count();
  body();
  end_count();
  return {0, 0, 0};
}

}  // namespace phasebench

extern "C" {

int pb_count_supported(int32_t* supported) {
  return phasebench::guarded([&] {
    phasebench::require(supported, "supported output");
    *supported = PHASEBENCH_CALLGRIND ? 1 : 0;
  });
}

int pb_count_running(int32_t* layers) {
  return phasebench::guarded([&] {
    phasebench::require(layers, "layer count output");
#if PHASEBENCH_CALLGRIND
    *layers = static_cast<int32_t>(RUNNING_ON_VALGRIND);
#else
    *layers = 0;
#endif
  });
}

// The bracket's own calls cannot fail, and run outside guarded() so that the bracket adds as few instructions as
// it can: each returns PB_OK.
int pb_count_start(void) {
#if PHASEBENCH_CALLGRIND
  CALLGRIND_START_INSTRUMENTATION;
#endif
  return PB_OK;
}

int pb_count_label(const char* text) {
  return phasebench::guarded([&] { phasebench::count_label() = text ? text : "round"; });
}

int pb_count_begin(void) {
  phasebench::begin_count();
  return PB_OK;
}

int pb_count_end(void) {
  phasebench::end_count();
  return PB_OK;
}

int pb_count_phases(int32_t on) {
  phasebench::counting = on != 0;
  return PB_OK;
}

}  // extern "C"
