// clock.cpp: the clock around a phase's body (docs/method.md#what-is-measured), the synchronization and the timing
// events it needs on cuda, the page faults read just outside it, and (the testing build only) the slow knob that
// spins inside it.
#include "clock.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <vector>

namespace phasebench {

namespace {

constexpr int kFloorRounds = 2000;  // empty-phase rounds whose median is the timer floor

int64_t cpu_clock_ns(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

#if PHASEBENCH_TESTING
// Spin, not sleep: a test slowdown must compete for the CPU as real work does.
void busy_wait(int64_t ns) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < end) {
  }
}
#endif

}  // namespace

// torch::cuda::synchronize() adds availability and device-count checks to this call.
void sync(const torch::Device& device) {
  if (device.is_cuda()) at::detail::getCUDAHooks().deviceSynchronize(device.index());
}

// BACKEND_DEFAULT: timing on (c10's default, PYTORCH_DEFAULT, turns it off).
BodyEvents::BodyEvents(const torch::Device& device)
    : device_(device),
      start_(device.type(), c10::EventFlag::BACKEND_DEFAULT),
      end_(device.type(), c10::EventFlag::BACKEND_DEFAULT) {
  const auto stream = current_stream();
  record_start(stream);
  record_end(stream);
  sync(device_);
}

c10::Stream BodyEvents::current_stream() const {
  return c10::impl::VirtualGuardImpl(device_.type()).getStream(device_);
}

int64_t BodyEvents::elapsed_ns() const { return std::llround(start_.elapsedTime(end_) * 1e6); }  // milliseconds

// On cpu nothing but the body between the two clock reads. The process CPU time is read just outside them.
Timing timed(const torch::Device& device, const std::function<void()>& body, BodyEvents* events) {
  if (counting_phases()) return counted(body);  // the instruction-count mode: the bracket instead of the clock
  if (device.is_cuda()) {
    const std::optional<c10::Stream> stream =
        events ? std::optional<c10::Stream>(events->current_stream()) : std::nullopt;  // outside the clock
    sync(device);
    const int64_t cpu_start = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID),
                  thread_start = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    const auto start = std::chrono::steady_clock::now();
    // Between the wall clock's reads beside the body: the two event records, each an enqueue that waits for
    // nothing, recorded here since an event marks its stream's place when it is recorded; and the read of the host
    // CPU time, which must come before the closing synchronize it leaves out (a synchronize can spin).
    if (events) events->record_start(*stream);
    body();
    if (events) events->record_end(*stream);
    const int64_t host_end = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    sync(device);
    const auto end = std::chrono::steady_clock::now();
    Timing timing{std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count(),
                  cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu_start,
                  cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - thread_start};
    timing.host_cpu_ns = host_end - thread_start;
    if (events) timing.gpu_ns = events->elapsed_ns();  // both events are complete after the synchronize
    return timing;
  }
  const int64_t cpu_start = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID),
                thread_start = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  const auto start = std::chrono::steady_clock::now();
  body();
  const auto end = std::chrono::steady_clock::now();
  return {std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count(),
          cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu_start,
          cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - thread_start};
}

int64_t timer_floor(const torch::Device& device, BodyEvents* events) {
  const std::function<void()> noop = [] {};
  std::vector<int64_t> times(kFloorRounds);
  for (auto& t : times) t = timed(device, noop, events).ns;
  std::nth_element(times.begin(), times.begin() + kFloorRounds / 2, times.end());
  return times[kFloorRounds / 2];
}

PageFaults page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {usage.ru_minflt, usage.ru_majflt};
}

void record_timing(pb_result& result, const Timing& timing, const PageFaults& faults_before,
                   const PageFaults& faults_after) {
  result.cpu_ns = timing.cpu_ns;
  result.thread_cpu_ns = timing.thread_cpu_ns;
  result.host_cpu_ns = timing.host_cpu_ns;
  result.gpu_ns = timing.gpu_ns;
  result.minor_faults = faults_after.first - faults_before.first;
  result.major_faults = faults_after.second - faults_before.second;
}

#if PHASEBENCH_TESTING
// Deterministic work, no clock: the same instructions each round (the instruction-count gate's injected regression).
void added_work(int64_t iterations) {
  volatile int64_t sink = 0;
  for (int64_t i = 0; i < iterations; ++i) sink = sink + i;
}

std::function<void()> SlowKnob::slowed(std::function<void()> body) const {
  if (hold) {
    return [body = std::move(body), hold = hold] {
      hold->wait_for_release();
      body();
    };
  }
  if (work > 0) {
    return [body = std::move(body), work = work] {
      body();
      added_work(work);
    };
  }
  if (fraction > 0) {  // a relative slowdown: as much again as this round's body took, times the fraction
    return [body = std::move(body), fraction = fraction] {
      const auto start = std::chrono::steady_clock::now();
      body();
      const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
      busy_wait(static_cast<int64_t>(static_cast<double>(took.count()) * fraction));
    };
  }
  return [body = std::move(body), ns = ns] {
    body();
    busy_wait(ns);
  };
}

#endif

}  // namespace phasebench
