// testing.cpp: the test-only entry points of include/phasebench_testing.h, behind the same exception wall as
// the production ABI (c_api.h). Compiled in the testing build only (cpp/Makefile's `testing`, PHASEBENCH_TESTING=1).
#if PHASEBENCH_TESTING
#include "phasebench_testing.h"

#include "c_api.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>
#include <limits>

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

// CUDA's device guard implementation as a machine with `count` GPUs and a current one would report it, without a
// driver: getDevice is `current`, and setDevice records the index it receives. Streams and events stay the no-op
// ones.
struct FakeCudaGuardImpl final : c10::impl::NoOpDeviceGuardImpl<c10::DeviceType::CUDA> {
  FakeCudaGuardImpl(c10::DeviceIndex current, c10::DeviceIndex count) : current(current), count(count) {}

  c10::DeviceIndex deviceCount() const noexcept override { return count; }
  c10::Device getDevice() const override { return {c10::DeviceType::CUDA, current}; }
  void setDevice(c10::Device device) const override { set_index = device.index(); }
  void uncheckedSetDevice(c10::Device device) const noexcept override { set_index = device.index(); }
  c10::Device exchangeDevice(c10::Device device) const override {
    set_index = device.index();
    return getDevice();
  }

  const c10::DeviceIndex current, count;
  mutable c10::DeviceIndex set_index = -1;
};

// c10's registry entry for CUDA's device guard implementation, `impl` for this object's lifetime: the one it replaced
// is put back when the object ends, by an exception too.
class CudaGuardImplInstalled {
 public:
  explicit CudaGuardImplInstalled(const c10::impl::DeviceGuardImplInterface* impl)
      : replaced_(entry().exchange(impl)) {}
  ~CudaGuardImplInstalled() { entry().store(replaced_); }
  CudaGuardImplInstalled(const CudaGuardImplInstalled&) = delete;
  CudaGuardImplInstalled& operator=(const CudaGuardImplInstalled&) = delete;

 private:
  static std::atomic<const c10::impl::DeviceGuardImplInterface*>& entry() {
    return c10::impl::device_guard_impl_registry[static_cast<size_t>(c10::DeviceType::CUDA)];
  }
  const c10::impl::DeviceGuardImplInterface* const replaced_;
};

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

int pb_testing_resolve_cuda_device(const char* name, int32_t current_index, int32_t device_count, char* buffer,
                                   int64_t capacity, int32_t* set_index) {
  return guarded([&] {
    require(set_index, "set_index output");
    constexpr int32_t most = std::numeric_limits<c10::DeviceIndex>::max();
    if (current_index < 0 || current_index > most)
      throw std::invalid_argument("current index " + std::to_string(current_index) + " is no CUDA device index");
    if (device_count < 0 || device_count > most)
      throw std::invalid_argument("device count " + std::to_string(device_count) + " is no CUDA device count");
    const FakeCudaGuardImpl fake(static_cast<c10::DeviceIndex>(current_index),
                                 static_cast<c10::DeviceIndex>(device_count));
    // The trainer's settings as pb_create makes them (the trainer's first member): the device named, or none.
    pb_options options{};
    options.struct_size = sizeof(pb_options);
    options.data_root = "";
    options.device = name;
    options.width = 1;
    options.batch_size = 1;
    std::string resolved;
    {
      const CudaGuardImplInstalled installed(&fake);
      resolved = Settings(options).device.str();
    }
    copy_out(resolved, buffer, capacity);
    *set_index = fake.set_index;
  });
}

}  // extern "C"

#endif  // PHASEBENCH_TESTING
