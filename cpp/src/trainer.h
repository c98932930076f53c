// trainer.h: the pytorch/examples C++ MNIST program, cut into the timed phases (docs/method.md#what-is-measured):
// what the files of cpp/src share. It reads like examples/cpp/mnist/mnist.cpp: the same Net, the same loader,
// the same optimizer and log line. Each piece has its file:
//   idx.cpp        the IDX files' checks, and loading them
//   sources.cpp    the batch sources (LibTorch's loader; slices of a split normalized once)
//   clock.cpp      the clock and synchronization, the page faults read beside it, the test-only slow knob
//   step.cpp       the step interface and the eager step; graph_step.cpp the CUDA-graph step
//   trainer.cpp    the trainer's state and run_phase; phases.cpp its one table of phases and their products
//   run.cpp        the training run (pb_train's loop); ensemble.cpp ensembles
//   c_api.cpp      the C ABI of include/phasebench.h; testing.cpp the test-only include/phasebench_testing.h;
//                  both behind c_api.h's exception wall, with the sessions of sessions.cpp
#pragma once

#include "phasebench.h"

#include <torch/torch.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace phasebench {

constexpr int64_t kLogInterval = 10;
constexpr int64_t kImageSide = 28;
constexpr double kMean = 0.1307, kStd = 0.3081;
constexpr double kLearningRate = 0.01, kMomentum = 0.5;
// The training run's total of a step replayed whole (pb_run_phase_names).
constexpr const char* kStepInRun = "step_in_run";

// The network of examples/cpp/mnist, declared once; width multiplies every hidden size, as
// phasebench/spec.py derives them.
struct Net : torch::nn::Module {
  Net(double dropout, int64_t width)
      : conv1(torch::nn::Conv2dOptions(1, 10 * width, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(10 * width, 20 * width, /*kernel_size=*/5)),
        conv2_drop(torch::nn::Dropout2dOptions(dropout)),
        fc1(20 * width * 4 * 4, 50 * width),
        fc2(50 * width, 10),
        dropout(dropout),
        fc1_inputs(20 * width * 4 * 4) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, fc1_inputs});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/dropout, /*train=*/is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  double dropout;
  int64_t fc1_inputs;
};

// -- data (idx.cpp, sources.cpp) ----------------------------------------------------------------------------

// A split of MNIST, its IDX files checked first (the training split when train, else the test split).
torch::data::datasets::MNIST load_mnist(const std::string& root, bool train);

using Batch = torch::data::Example<>;

// Where an implementation's batches come from (docs/implementations.md#implementations-and-workloads): start an epoch,
// then take batches until there are none. phasebench/train/loaders.py holds the Python ones.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual void start_epoch() = 0;
  virtual bool next(Batch& batch) = 0;  // false at the end of the epoch
  // Whether t shares memory the source keeps for good (a slice of its split): such memory outlives
  // every round, so only the tensor itself can be checked for leftovers.
  virtual bool keeps_memory_of(const torch::Tensor&) const { return false; }
};

// "published" (LibTorch's loader) or "batched" (slices of the split normalized once, on the device).
// A data-parallel rank's shard (rank, world > 1): of each global batch, the images rank, rank + world, ...:
// DistributedSampler(shuffle=False)'s order with a batch of batch_size / world (docs/distributed.md); "batched" only.
std::unique_ptr<BatchSource> make_source(const std::string& kind, const torch::data::datasets::MNIST& mnist,
                                         int64_t batch_size, const torch::Device& device, int64_t rank = 0,
                                         int64_t world = 1);

// -- the clock (clock.cpp) ------------------------------------------------------------------------------------

struct Timing {
  int64_t ns;
  int64_t cpu_ns;         // the process, all threads
  int64_t thread_cpu_ns;  // the thread that ran the body
};

// The cheapest correct synchronization LibTorch offers; nothing on cpu.
void sync(const torch::Device& device);
// Synchronize, clock, body, synchronize, clock (docs/method.md#what-is-measured).
Timing timed(const torch::Device& device, const std::function<void()>& body);
// The median time of the empty body: what the clock itself costs here.
int64_t timer_floor(const torch::Device& device);
// The instruction-count mode (count.cpp, include/phasebench_count.h): whether pb_count_phases turned it on, and
// the body inside the count bracket (a Timing of zeros: the count is in the dumped statistics).
bool counting_phases();
Timing counted(const std::function<void()>& body);
// The process's page faults so far: (minor, major).
std::pair<int64_t, int64_t> page_faults();

#if PHASEBENCH_TESTING
// The testing build's slow knob (phasebench_testing.h): the phase it names busy-waits inside its timed body.
struct SlowKnob {
  std::string phase;  // none: nothing is slowed
  int64_t ns = 0;
  double fraction = 0;  // above 0: this fraction of the time the body just took, instead of ns
  int64_t work = 0;     // above 0: this many iterations of a fixed loop, instead of a spin (no clock read)
  std::function<void()> slowed(std::function<void()> body) const;
};
#endif

// -- phases (phases.cpp) ----------------------------------------------------------------------------------------

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
};

// A reference that does not keep a tensor, nor its memory, alive.
struct WeakTensor {
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> impl;
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;
  WeakTensor(const torch::Tensor& t, bool with_storage) : impl(t.getIntrusivePtr()) {
    if (with_storage && t.has_storage()) storage.emplace(t.storage().getWeakStorageImpl());
  }
  bool alive() const { return !impl.expired() || (storage && !storage->expired()); }
};

// -- steps (step.cpp, graph_step.cpp) -------------------------------------------------------------------------

class Trainer;

// A step strategy (docs/gpu.md#cuda-graphs-and-torchcompile): how forward, loss, backward and update run on the
// batch on the device. The trainer asks its step what it needs; it never tests which step it has.
class Step {
 public:
  virtual ~Step() = default;
  // As pb_options.step names it, for messages.
  virtual const char* name() const = 0;
  // Replayed whole: the step has no forward, loss, backward, param_update or progress_print of its own.
  virtual bool whole() const = 0;
  // Its one-shot phase, timed once per model, or nullptr where it has none.
  virtual const char* one_shot() const { return nullptr; }
  // Whether the eager steps its one-shot needs first have run: they train, and count as steps.
  virtual bool warmed_up() const { return true; }
  // Whether its one-shot has run for this model; a step without one is always ready.
  virtual bool ready() const { return true; }
  // The one-shot (the capture); it trains nothing.
  virtual void run_one_shot(Trainer&) {}
  // What the one-shot made, for its product: the full batch's output.
  virtual torch::Tensor one_shot_output() const { return {}; }
  // Copies the host batch to where the step reads it: by default, to the device.
  virtual void copy_in(const Batch& host, const torch::Device& device, torch::Tensor& data, torch::Tensor& target);
  // One step on the batch on the device, leaving its output and loss in the trainer.
  virtual void run(Trainer& trainer) = 0;
  // Whether t is the step's for good (a graph's static tensor): never a round's leftover.
  virtual bool holds(const torch::Tensor&) const { return false; }
  // A new model: what the step made for the last one is dropped.
  virtual void reset() {}
};

// "eager" (nullptr) or "graphs" for a trainer on this device; any other is refused with the reason.
std::unique_ptr<Step> make_step(const char* kind, const torch::Device& device);
std::unique_ptr<Step> make_graph_step(const torch::Device& device);  // graph_step.cpp
// Forward, loss, backward and update, as the published program runs them: the eager step.
void eager_step(Trainer& trainer);

// -- the trainer (trainer.cpp, phases.cpp, run.cpp, ensemble.cpp) -------------------------------------------

class Trainer {
 public:
  explicit Trainer(const pb_options& options);
  ~Trainer();

  // The phases pb_phase_names lists, and pb_train's totals (pb_run_phase_names), in order.
  std::vector<std::string> phase_names() const;
  std::vector<std::string> run_phase_names() const;
  // Prepares the phase untimed, then times its body; the product says what it did.
  Timing run_phase(const std::string& name, pb_result* result);
  int64_t timer_floor() const { return phasebench::timer_floor(device_); }
#if PHASEBENCH_TESTING
  void set_slow_knob(SlowKnob knob);
#endif

  std::vector<torch::Tensor> parameters() { return model_->parameters(); }
  std::string layout();
  int64_t epoch_batches() const { return (dataset_size_ + batch_size_ - 1) / batch_size_; }
  Batch batch_at(int64_t index);
  int64_t peak_device_memory() const;

  // One step on the next batch, the step's one-shot first when it is due (the equivalence tests).
  void advance();
  double last_loss() { return loss_.item<double>(); }
  std::pair<double, double> evaluate();
  // The published run: each phase's total, by pb_run_phase_names, or with synchronize == 0 only the whole loop.
  int64_t train(int32_t epochs, bool synchronize, int64_t max_steps, std::vector<int64_t>& phase_ns,
                int64_t& steps, int64_t& cpu_ns);

  // -- data parallel (distributed.cpp; docs/distributed.md) ----------------------------------------------------
  // Joins the c10d process group registered under group_name (route (a): the worker made it through
  // torch.distributed): the batches become this rank's shard, and a step all-reduces its gradients after backward.
  void attach(const std::string& group_name);
  bool distributed() const { return group_ != nullptr; }
  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }
  // Each gradient all-reduced (summed) in turn, then divided by the world size: dist-mnist.cpp's algorithm.
  void grad_sync();
  void barrier();
  // `steps` training steps as train_step runs them, each timed alone (the distributed training run).
  std::vector<int64_t> timed_steps(int64_t steps);

  void start_ensemble(int64_t models);
  void stop_ensemble();
  int64_t ensemble_size() const { return static_cast<int64_t>(ensemble_.size()); }
  Timing ensemble_step(std::vector<double>& losses);
  std::vector<torch::Tensor> ensemble_parameters(int64_t member) const;

  // -- what a step works on ----------------------------------------------------------------------------------
  const torch::Device& device() const { return device_; }
  Net& model() { return *model_; }
  torch::optim::SGD& optimizer() { return *optimizer_; }
  const torch::Tensor& data() const { return data_; }
  // The batch sizes an epoch feeds the step: the full one, and the remainder that ends the epoch.
  std::vector<int64_t> batch_shapes() const;
  // The split step's bodies, one phase each.
  void forward() { output_ = model_->forward(data_); }
  void compute_loss() { loss_ = torch::nll_loss(output_, target_); }
  void backward() { loss_.backward(); }
  void update() {
    optimizer_->step();
    optimizer_->zero_grad();
  }
  // What a step replayed whole left: its output and loss.
  void stepped(torch::Tensor output, torch::Tensor loss) {
    output_ = std::move(output);
    loss_ = std::move(loss);
  }

 private:
  Timing timed(const std::function<void()>& body) const { return phasebench::timed(device_, body); }
  void sync() const { phasebench::sync(device_); }

  void build_model();
  void load_batch();
  void copy_batch() { step_->copy_in(host_, device_, data_, target_); }
  void step();  // one training step, without its log line
  bool one_shot_due() const { return !step_->ready() && step_->warmed_up(); }
  void warm_up();
  void ensure_ready();
  void print_progress();
  void on_device();
  void forwarded();
  std::vector<WeakTensor> held();
  void release();

  // phases.cpp: the table of phases, and the products that prove their work.
  std::vector<Phase> make_phases();
  at::Generator generator() const;
  pb_result loss_product(const torch::Tensor& main);
  std::vector<torch::Tensor> grads();
  pb_result loaded();
  pb_result copied();
  pb_result forwarded_product();
  pb_result backward_product();
  void capture_update();
  pb_result synced_product();
  pb_result updated_product();
  pb_result fresh_product();

  struct Group;  // distributed.cpp: the c10d process group, so that only that file includes c10d's headers
  std::shared_ptr<Group> group_;
  int64_t rank_ = 0, world_ = 1;
  torch::Tensor sync_before_;  // grad_sync's product: conv1's gradient before the all-reduce

  double dropout_;
  torch::Device device_;
  int64_t width_, batch_size_;
  std::string loader_kind_;
  std::unique_ptr<Step> step_;  // made in the constructor's body, where the options are checked
#if PHASEBENCH_TESTING
  SlowKnob slow_;  // the testing build's (phasebench_testing.h)
#endif
  torch::data::datasets::MNIST mnist_;
  torch::data::datasets::MNIST test_;
  std::unique_ptr<BatchSource> source_;
  bool epoch_started_ = false;
  std::shared_ptr<Net> model_, fresh_model_;
  std::unique_ptr<torch::optim::SGD> optimizer_, fresh_optimizer_;
  std::vector<Phase> phases_;
  std::string last_phase_;
  struct Member {
    std::shared_ptr<Net> model;
    std::unique_ptr<torch::optim::SGD> optimizer;
  };
  std::vector<Member> ensemble_;
  std::vector<torch::Tensor> ensemble_losses_;  // the last ensemble step's, one per member
  Batch host_;
  torch::Tensor data_, target_, output_, loss_;
  torch::Tensor check_weight_, check_grad_, check_momentum_, rng_before_;  // for the products
  int32_t zero_before_ = -1;
  FILE* log_ = nullptr;
  int32_t epoch_ = 0;
  int64_t seen_ = 0, steps_ = 0, dataset_size_ = 0, host_index_ = -1;
  bool log_due_ = false;  // the training run's whole step: whether this batch logs
};

}  // namespace phasebench
