// testing.cpp: the test-only entry points of include/phasebench_testing.h, behind the same exception wall as
// the production ABI (c_api.h). Compiled in the testing build only (cpp/Makefile's `testing`, PHASEBENCH_TESTING=1).
#if PHASEBENCH_TESTING
#include "phasebench_testing.h"

#include "c_api.h"

using namespace phasebench;

extern "C" {

int pb_testing_slow_phase(pb_session* session, const char* phase, int64_t ns, double fraction) {
  return guarded([&] {
    const auto held = session_of(session);
    require(phase, "phase name");
    held->trainer.set_slow_knob(SlowKnob{phase, ns, fraction});  // the name is copied
  });
}

int pb_testing_slow_work(pb_session* session, const char* phase, int64_t iterations) {
  return guarded([&] {
    const auto held = session_of(session);
    require(phase, "phase name");
    held->trainer.set_slow_knob(SlowKnob{phase, 0, 0, iterations});
  });
}

}  // extern "C"

#endif  // PHASEBENCH_TESTING
