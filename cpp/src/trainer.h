// trainer.h: the pytorch/examples C++ MNIST program, cut into the timed phases (docs/method.md#what-is-measured).
// A trainer is made of one type per role, each in its own files:
//   model.h, model.cpp            the Net, declared once, and its SGD (Model)
//   data.h, idx.cpp, sources.cpp  the splits, their IDX checks, the batch sources
//   step.h, step.cpp              one training step (StepTensors) and how it runs (Step); graph_step.cpp: CUDA graphs
//   ensemble.h, ensemble.cpp      ensembles
//   process_group.h, distributed.cpp  data parallel's c10d process group
//   checks.h, checks.cpp          the products that prove each phase's work, and what they are checked against
//   clock.h, clock.cpp, count.cpp the clock, the instruction-count bracket, the testing build's slow knob
// and the trainer that holds them: trainer.cpp (creation, run_phase, the batch), phases.cpp (its one table of
// phases), run.cpp (pb_train's training run). c_api.cpp is the C ABI of include/phasebench.h and testing.cpp the
// test-only include/phasebench_testing.h, both behind c_api.h's exception wall, with the sessions of sessions.cpp.
#pragma once

#include "phasebench.h"

#include "checks.h"
#include "clock.h"
#include "data.h"
#include "ensemble.h"
#include "model.h"
#include "process_group.h"
#include "step.h"

#include <torch/torch.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace phasebench {

constexpr int64_t kLogInterval = 10;
// The training run's total of a step replayed whole (pb_run_phase_names).
constexpr const char* kStepInRun = "step_in_run";

// pb_options, checked and copied: every check that needs no data runs before the splits are read.
struct Settings {
  explicit Settings(const pb_options& options);

  std::string data_root;
  torch::Device device;  // with its index where it is cuda (resolve_device)
  std::string log_path;  // empty: stdout
  int32_t threads;
  int64_t seed;
  double dropout;
  int64_t width, batch_size;
  std::string loader, step;
  bool deterministic;  // pb_options.deterministic: the equivalence tests' numerics, set by the constructor
};

// A device as the trainer runs on it: a cuda one with its index (a bare "cuda" is the current CUDA device) and made
// the current device; any other unchanged. Through c10's device guard implementation for CUDA, the one
// c10::DeviceGuard calls, so that the testing build can check it with a fake one on a machine without a GPU
// (pb_testing_resolve_cuda_device, through Settings as pb_create makes them). The caller has checked that CUDA is
// available.
torch::Device resolve_device(torch::Device device);

// What a phase needs of the step before its clock (Trainer::run_phase).
enum class Uses {
  nothing,     // no step: it never triggers the step's one-shot
  step,        // a ready step: its warm-up and one-shot (a capture) run first, untimed, where they have not
  split_step,  // as step, and refused where the step is replayed whole: a piece of the split step
  one_shot,    // the step's one-shot itself: refused by a step without it, or once it has run
};

struct Phase {
  std::string name;
  Uses uses;
  std::function<void()> prepare;  // untimed, after Trainer::release()
  std::function<void()> body;     // timed
  std::function<pb_result()> result;
  bool continues_itself = false;  // its rounds follow one another as training steps do
  // Untimed, after prepare: what the product is checked against, taken before the body (the generator's state, the
  // gradients, conv1's weight); left out with the product when the round checks are off (pb_set_round_checks).
  std::function<void()> check_before = nullptr;
};

// pb_train's request and what it adds up (pb_train_options, pb_train_totals).
struct RunOptions {
  int32_t epochs;
  bool synchronize;
  int64_t max_steps;  // above 0: stop after that many steps
};
struct RunTotals {
  std::vector<int64_t> phase_ns;  // by pb_run_phase_names
  int64_t steps = 0;
  int64_t loop_ns = 0;
  int64_t cpu_ns = 0;  // the process CPU time across the timed bodies
};

class Trainer {
 public:
  explicit Trainer(const pb_options& options);
  ~Trainer();

  // -- the phases (trainer.cpp, phases.cpp) ------------------------------------------------------------------
  // The phases pb_phase_names lists, and pb_train's totals (pb_run_phase_names), in order.
  std::vector<std::string> phase_names() const;
  std::vector<std::string> run_phase_names() const;
  // Prepares the phase untimed, then times its body; the product says what it did (with the round checks on).
  Timing run_phase(const std::string& name, pb_result* result);
  // pb_set_round_checks: whether run_phase's rounds do what proves their work (the leftovers' weak references, what
  // the product is checked against, the product); read once per round, outside the clock.
  void set_round_checks(bool on) { round_checks_ = on; }
  int64_t timer_floor() const { return phasebench::timer_floor(device(), events_.get()); }
#if PHASEBENCH_TESTING
  void set_slow_knob(SlowKnob knob);
  // The knob's hold, where it has one. Safe while another thread's call runs: nothing here changes the knob.
  std::shared_ptr<Hold> hold() const { return slow_.hold; }
#endif

  // -- the training run (run.cpp) ----------------------------------------------------------------------------
  // The published run: each phase's total, or with synchronize off only the whole loop.
  RunTotals train(const RunOptions& options);

  // -- what the equivalence tests read and drive -------------------------------------------------------------
  Model& model() { return *model_; }
  int64_t epoch_batches() const { return (dataset_size_ + settings_.batch_size - 1) / settings_.batch_size; }
  Batch batch_at(int64_t index);
  // One step on the next batch, the step's one-shot first when it is due.
  void advance();
  double last_loss() { return tensors_.loss.item<double>(); }
  std::pair<double, double> evaluate();
  int64_t peak_device_memory() const;

  // -- data parallel (docs/distributed.md) -------------------------------------------------------------------
  // Joins the c10d process group registered under group_name: the batches become this rank's shard, and a step
  // all-reduces its gradients after backward.
  void attach(const std::string& group_name);
  ProcessGroup* group() { return group_.get(); }
  // `steps` training steps as train_step runs them, each timed alone (the distributed training run).
  std::vector<int64_t> timed_steps(int64_t steps);

  // -- ensembles ---------------------------------------------------------------------------------------------
  // Replaces the last ensemble, which is freed first.
  void start_ensemble(int64_t models);
  void stop_ensemble() { ensemble_.reset(); }
  int64_t ensemble_size() const { return ensemble_ ? ensemble_->size() : 0; }
  // One step of every member on the next batch, timed as a phase is.
  Timing ensemble_step(std::vector<double>& losses);
  std::vector<torch::Tensor> ensemble_parameters(int64_t member) const;

  // -- what a step works on ----------------------------------------------------------------------------------
  const torch::Device& device() const { return settings_.device; }
  StepTensors& tensors() { return tensors_; }
  // The batch sizes an epoch feeds the step: the full one, and the remainder that ends the epoch.
  std::vector<int64_t> batch_shapes() const;
  // What a step replayed whole left: its output and loss.
  void stepped(torch::Tensor output, torch::Tensor loss) {
    tensors_.output = std::move(output);
    tensors_.loss = std::move(loss);
  }

 private:
  Timing timed(const std::function<void()>& body) const { return phasebench::timed(device(), body, events_.get()); }

  void build_model();
  void load_batch();
  void copy_batch() { step_->copy_in(host_, device(), tensors_); }
  void on_device();   // load_batch, copy_batch
  void forwarded();   // on_device, forward, loss
  void step();        // one training step, without its log line
  void print_progress();
  bool one_shot_due() const { return !step_->ready() && step_->warmed_up(); }
  void warm_up();
  void ensure_ready();
  std::vector<WeakTensor> held();
  void release();

  std::vector<Phase> make_phases();  // phases.cpp

  Settings settings_;
  std::unique_ptr<BodyEvents> events_;  // cuda only: every clock's timing events (clock.h)
  std::unique_ptr<Step> step_;
  torch::data::datasets::MNIST mnist_;
  torch::data::datasets::MNIST test_;
  int64_t dataset_size_;
  std::unique_ptr<BatchSource> source_;
  FILE* log_ = nullptr;
  std::optional<Model> model_;  // built in the constructor's body, after torch::manual_seed
  std::optional<Model> fresh_;  // optimizer_init's
  std::unique_ptr<ProcessGroup> group_;
  std::unique_ptr<Ensemble> ensemble_;
  Checks checks_;
#if PHASEBENCH_TESTING
  SlowKnob slow_;  // the testing build's (phasebench_testing.h)
#endif
  std::vector<Phase> phases_;
  std::string last_phase_;
  std::atomic<bool> round_checks_{true};  // set between calls, possibly from another thread

  // The batch and the step's tensors, and where the epoch stands.
  Batch host_;
  StepTensors tensors_;
  bool epoch_started_ = false;
  int32_t epoch_ = 0;
  int64_t seen_ = 0, steps_ = 0, host_index_ = -1;
  bool log_due_ = false;  // the training run's whole step: whether this batch logs
};

}  // namespace phasebench
