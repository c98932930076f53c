// clock.h: the clock around a phase's body (clock.cpp; docs/method.md#what-is-measured), the instruction-count
// bracket that replaces it when counting (count.cpp), and the testing build's slow knob.
#pragma once

#include "phasebench.h"

#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/torch.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace phasebench {

struct Timing {
  int64_t ns;
  int64_t cpu_ns;         // the process, all threads
  int64_t thread_cpu_ns;  // the thread that ran the body, the closing synchronize included on cuda
  // cuda only, -1 where not read: the thread's CPU time up to the body's end, before the closing synchronize, and
  // the time between the events recorded around the body (pb_result's host_cpu_ns and gpu_ns)
  int64_t host_cpu_ns = -1;
  int64_t gpu_ns = -1;
};

// A trainer's two CUDA timing events, the twin of phasebench/train/timing.py's CudaClock's: c10's device-generic
// events, so that no CUDA runtime header is needed. Made once per trainer and recorded once at once, since an
// event's first record creates it on the device: no clock holds a creation.
class BodyEvents {
 public:
  explicit BodyEvents(const torch::Device& device);
  c10::Stream current_stream() const;
  void record_start(const c10::Stream& stream) { start_.record(stream); }
  void record_end(const c10::Stream& stream) { end_.record(stream); }
  int64_t elapsed_ns() const;  // after both are complete

 private:
  torch::Device device_;
  c10::Event start_, end_;
};

// The cheapest correct synchronization LibTorch offers; nothing on cpu.
void sync(const torch::Device& device);
// Synchronize, clock, body, synchronize, clock (docs/method.md#what-is-measured); on cuda with `events`, an event
// recorded on each side of the body too, and the host CPU time read before the closing synchronize.
Timing timed(const torch::Device& device, const std::function<void()>& body, BodyEvents* events = nullptr);
// The median time of the empty body: what the clock itself costs here.
int64_t timer_floor(const torch::Device& device, BodyEvents* events = nullptr);
// The instruction-count mode (count.cpp, include/phasebench_count.h): whether pb_count_phases turned it on, and
// the body inside the count bracket (a Timing of zeros: the count is in the dumped statistics).
bool counting_phases();
Timing counted(const std::function<void()>& body);
// The process's page faults so far: (minor, major).
using PageFaults = std::pair<int64_t, int64_t>;
PageFaults page_faults();
// A round's clock in its pb_result: the body's CPU and GPU times, and the page faults between the reads around it.
void record_timing(pb_result& result, const Timing& timing, const PageFaults& faults_before,
                   const PageFaults& faults_after);

#if PHASEBENCH_TESTING
// The testing build's hold (pb_testing_hold_phase, testing.cpp): a body waits until the test releases it, and the
// test can wait until a body is waiting: proof that a call is inside the library, with no sleep. Thread-safe: the
// test calls it while another thread's call runs the held body.
class Hold {
 public:
  void wait_for_release();  // in the held body
  bool await_waiting(int64_t timeout_ms);  // whether a body was waiting within the timeout
  void release();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool waiting_ = false, released_ = false;
};

// The testing build's slow knob (phasebench_testing.h): the phase it names busy-waits inside its timed body, or
// waits on a hold.
struct SlowKnob {
  std::string phase;  // none: nothing is slowed
  int64_t ns = 0;
  double fraction = 0;  // above 0: this fraction of the time the body just took, instead of ns
  int64_t work = 0;     // above 0: this many iterations of a fixed loop, instead of a spin (no clock read)
  std::shared_ptr<Hold> hold;  // set: the body waits until it is released, instead of any of the above
  std::function<void()> slowed(std::function<void()> body) const;
};
#endif

}  // namespace phasebench
