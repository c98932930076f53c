// testing.cpp: the test-only entry points of include/phasebench_testing.h, behind the same exception wall as
// the production ABI (c_api.h). Compiled in the testing build only (cpp/Makefile's `testing`, PHASEBENCH_TESTING=1).
#if PHASEBENCH_TESTING
#include "phasebench_testing.h"

#include "c_api.h"

#include <chrono>

namespace phasebench {

void Hold::wait_for_release() {
  std::unique_lock<std::mutex> lock(mutex_);
  waiting_ = true;
  changed_.notify_all();
  changed_.wait(lock, [this] { return released_; });
}

bool Hold::await_waiting(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return waiting_; });
}

void Hold::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  released_ = true;
  changed_.notify_all();
}

}  // namespace phasebench

using namespace phasebench;

namespace {

std::shared_ptr<Hold> hold_of(pb_session session) {
  auto hold = session_of(session)->trainer.hold();
  if (!hold) throw std::logic_error("no hold: call pb_testing_hold_phase first");
  return hold;
}

}  // namespace

extern "C" {

int pb_testing_slow_phase(pb_session session, const char* phase, int64_t ns, double fraction) {
  return guarded([&] {
    const auto held = session_of(session);
    require(phase, "phase name");
    held->trainer.set_slow_knob(SlowKnob{phase, ns, fraction, 0, nullptr});  // the name is copied
  });
}

int pb_testing_slow_work(pb_session session, const char* phase, int64_t iterations) {
  return guarded([&] {
    const auto held = session_of(session);
    require(phase, "phase name");
    held->trainer.set_slow_knob(SlowKnob{phase, 0, 0, iterations, nullptr});
  });
}

int pb_testing_hold_phase(pb_session session, const char* phase) {
  return guarded([&] {
    const auto held = session_of(session);
    require(phase, "phase name");
    held->trainer.set_slow_knob(SlowKnob{phase, 0, 0, 0, std::make_shared<Hold>()});
  });
}

int pb_testing_await_hold(pb_session session, int64_t timeout_ms, int32_t* waiting) {
  return guarded([&] {
    require(waiting, "waiting output");
    if (timeout_ms < 0) throw std::invalid_argument("a negative timeout");
    *waiting = hold_of(session)->await_waiting(timeout_ms);
  });
}

int pb_testing_release_hold(pb_session session) {
  return guarded([&] { hold_of(session)->release(); });
}

}  // extern "C"

#endif  // PHASEBENCH_TESTING
