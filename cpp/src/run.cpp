// run.cpp: the training run (pb_train): optimizer init, then epochs of steps as the published program runs them,
// each phase's total or only the whole loop. The Python twin is phasebench/train/run.py's train.
#include "trainer.h"

#include <c10/core/CachingDeviceAllocator.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

namespace phasebench {

namespace {

// One phase of the run: its body, made before the loop so that the loop runs nothing but the step, and the
// index of the total it adds to.
struct RunPhase {
  size_t total;
  std::function<void()> body;
  bool always_timed;  // a one-shot phase: timed even free-running, once, outside any step
};

// Runs the run's phases: each timed into its total where the run synchronizes, else run bare.
class RunClock {
 public:
  RunClock(const torch::Device& device, BodyEvents* events, bool synchronize, std::vector<std::string> names,
           RunTotals& totals)
      : device_(device), events_(events), synchronize_(synchronize), names_(std::move(names)), totals_(totals) {
    totals_.phase_ns.assign(names_.size(), 0);
  }

  RunPhase phase(const std::string& name, std::function<void()> body, bool always_timed = false) const {
    const auto found = std::find(names_.begin(), names_.end(), name);
    if (found == names_.end()) throw std::logic_error("no phase " + name);
    return RunPhase{static_cast<size_t>(found - names_.begin()), std::move(body), always_timed};
  }

  void run(const RunPhase& phase) {
    if (synchronize_ || phase.always_timed) {
      const Timing timing = timed(device_, phase.body, events_);  // as a phase's round is timed
      totals_.phase_ns[phase.total] += timing.ns;
      totals_.cpu_ns += timing.cpu_ns;
    } else {
      phase.body();
    }
  }

 private:
  const torch::Device& device_;
  BodyEvents* events_;
  bool synchronize_;
  std::vector<std::string> names_;
  RunTotals& totals_;
};

}  // namespace

// A step replayed whole is timed in the run as step_in_run (the step and its log line): the phase train_step
// also loads and copies its batch, so the run's total is not that phase's.
std::vector<std::string> Trainer::run_phase_names() const {
  auto names = phase_names();
  std::replace(names.begin(), names.end(), std::string("train_step"), std::string(kStepInRun));
  return names;
}

// The frees that fall inside a phase's clock stay there, as in the published program.
RunTotals Trainer::train(const RunOptions& options) {
  RunTotals totals;
  RunClock clock(device(), events_.get(), options.synchronize, run_phase_names(), totals);
  auto phase = [&](const std::string& name, std::function<void()> body, bool always_timed = false) {
#if PHASEBENCH_TESTING
    // The testing build's slow knob names a phase; in the run, train_step's total is step_in_run.
    if (slow_.phase == name || (name == kStepInRun && slow_.phase == "train_step")) body = slow_.slowed(std::move(body));
#endif
    return clock.phase(name, std::move(body), always_timed);
  };
  bool more = true;
  const RunPhase optimizer_init = phase("optimizer_init", [&] { build_model(); }),
                 data_loading = phase("data_loading", [&] { more = source_->next(host_); }),
                 copy_to_device = phase("copy_to_device", [&] { copy_batch(); }),
                 forward = phase("forward", [&] { tensors_.forward(*model_); }),
                 loss = phase("loss", [&] { tensors_.compute_loss(); }),
                 backward = phase("backward", [&] { tensors_.backward(); }),
                 param_update = phase("param_update", [&] { model_->update(); }),
                 progress_print = phase("progress_print", [&] { print_progress(); }),
                 // Where the step is one graph: the step (a warm-up step, then replays) and its log line.
                 step_in_run = phase(kStepInRun, [&] {
                   step_->run(*this);
                   if (log_due_) print_progress();
                 });
  std::optional<RunPhase> grad_sync, one_shot;
  if (group_) grad_sync = phase("grad_sync", [&] { group_->average_gradients(*model_); });
  if (step_->one_shot()) one_shot = phase(step_->one_shot(), [&] { step_->run_one_shot(*this); }, true);
  const auto more_steps = [&] { return options.max_steps <= 0 || totals.steps < options.max_steps; };

  release();
  sync(device());
  if (device().is_cuda()) c10::getDeviceAllocator(device().type())->resetPeakStats(device().index());
  const auto start = std::chrono::steady_clock::now();
  clock.run(optimizer_init);
  for (int32_t epoch = 1; epoch <= options.epochs && more_steps(); ++epoch) {
    epoch_ = epoch;
    source_->start_epoch();
    for (int64_t batch_idx = 0; more_steps(); ++batch_idx) {
      clock.run(data_loading);
      if (!more) break;
      if (one_shot_due()) clock.run(*one_shot);
      clock.run(copy_to_device);
      seen_ = (batch_idx + 1) * settings_.batch_size;
      if (step_->whole()) {
        log_due_ = batch_idx % kLogInterval == 0;
        clock.run(step_in_run);
      } else {
        clock.run(forward);
        clock.run(loss);
        clock.run(backward);
        if (grad_sync) clock.run(*grad_sync);  // data parallel: dist-mnist.cpp's all-reduce after backward
        clock.run(param_update);
        if (batch_idx % kLogInterval == 0) clock.run(progress_print);
      }
      ++totals.steps;
    }
  }
  sync(device());
  totals.loop_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  epoch_started_ = false;  // the phases start a new epoch afterwards
  return totals;
}

}  // namespace phasebench
