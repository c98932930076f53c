// run.cpp: the training run (pb_train): optimizer init, then epochs of steps as the published program runs
// them, each phase's total or only the whole loop. The Python twin is phasebench/train/trainer.py's train.
#include "trainer.h"

#include <c10/core/CachingDeviceAllocator.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

namespace phasebench {

// A step replayed whole is timed in the run as step_in_run (the step and its log line): the phase train_step
// also loads and copies its batch, so the run's total is not that phase's.
std::vector<std::string> Trainer::run_phase_names() const {
  auto names = phase_names();
  std::replace(names.begin(), names.end(), std::string("train_step"), std::string(kStepInRun));
  return names;
}

// The frees that fall inside a phase's clock stay there, as in the published program.
int64_t Trainer::train(int32_t epochs, bool synchronize, int64_t max_steps, std::vector<int64_t>& phase_ns,
                       int64_t& steps, int64_t& cpu_ns) {
  const auto more_steps = [&] { return max_steps <= 0 || steps < max_steps; };
  const auto names = run_phase_names();
  auto index_of = [&](const std::string& name) {
    const auto found = std::find(names.begin(), names.end(), name);
    if (found == names.end()) throw std::logic_error("no phase " + name);
    return static_cast<size_t>(found - names.begin());
  };
  // Each phase's body and where its total goes, made once: nothing but the step in the loop.
  // A one-shot phase (graph_capture) is timed even free-running: once, outside any step, so that a reader
  // can take it out of the loop's time.
  struct RunPhase {
    size_t index;
    std::function<void()> body;
    bool always_timed = false;
  };
  auto phase = [&](const std::string& name, std::function<void()> body, bool one_shot = false) {
#if PHASEBENCH_TESTING
    // The testing build's slow knob names a phase; in the run, train_step's total is step_in_run.
    const bool slowed = slow_.phase == name || (name == kStepInRun && slow_.phase == "train_step");
    if (slowed) body = slow_.slowed(std::move(body));
#endif
    return RunPhase{index_of(name), std::move(body), one_shot};
  };
  auto run = [&](const RunPhase& p) {
    if (synchronize || p.always_timed) {
      const Timing timing = timed(p.body);
      phase_ns[p.index] += timing.ns;
      cpu_ns += timing.cpu_ns;
    } else {
      p.body();
    }
  };
  bool more = true;
  const RunPhase build = phase("optimizer_init", [&] { build_model(); }),
                 load = phase("data_loading", [&] { more = source_->next(host_); }),
                 copy = phase("copy_to_device", [&] { copy_batch(); }),
                 forward_pass = phase("forward", [&] { forward(); }),
                 loss = phase("loss", [&] { compute_loss(); }),
                 backward_pass = phase("backward", [&] { backward(); }),
                 param_update = phase("param_update", [&] { update(); }),
                 progress = phase("progress_print", [&] { print_progress(); }),
                 // Where the step is one graph: the step (a warm-up step, then replays) and the log line.
                 whole = phase(kStepInRun, [&] {
                   step_->run(*this);
                   if (log_due_) print_progress();
                 });
  std::optional<RunPhase> one_shot, gradients;
  if (distributed()) gradients = phase("grad_sync", [&] { grad_sync(); });  // data parallel: after backward
  if (step_->one_shot()) one_shot = phase(step_->one_shot(), [&] { step_->run_one_shot(*this); }, true);
  release();
  sync();
  if (device_.is_cuda()) c10::getDeviceAllocator(device_.type())->resetPeakStats(device_.index());
  const auto start = std::chrono::steady_clock::now();
  run(build);
  for (int32_t epoch = 1; epoch <= epochs && more_steps(); ++epoch) {
    epoch_ = epoch;
    source_->start_epoch();
    for (int64_t batch_idx = 0; more_steps(); ++batch_idx) {
      run(load);
      if (!more) break;
      if (one_shot_due()) run(*one_shot);
      run(copy);
      if (step_->whole()) {
        seen_ = (batch_idx + 1) * batch_size_;
        log_due_ = batch_idx % kLogInterval == 0;
        run(whole);
        ++steps;
        continue;
      }
      run(forward_pass);
      run(loss);
      run(backward_pass);
      if (gradients) run(*gradients);
      run(param_update);
      seen_ = (batch_idx + 1) * batch_size_;
      if (batch_idx % kLogInterval == 0) run(progress);
      ++steps;
    }
  }
  sync();
  const auto loop_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  epoch_started_ = false;  // the phases start a new epoch afterwards
  return loop_ns;
}

}  // namespace phasebench
