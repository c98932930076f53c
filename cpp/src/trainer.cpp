// trainer.cpp: the trainer's state and what every phase shares: its creation from pb_options, run_phase's
// prepare-release-time round, the batch and the model. Its phases are in phases.cpp, its training run in run.cpp.
#include "trainer.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <torch/cuda.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace phasebench {

Trainer::Trainer(const pb_options& options)
    : dropout_(options.dropout),
      device_(options.device ? options.device : "cpu"),
      width_(options.width),
      batch_size_(options.batch_size),
      loader_kind_(options.loader ? options.loader : "published"),
      mnist_(load_mnist(options.data_root ? options.data_root : "", /*train=*/true)),
      // Both splits before training, as the published program opens them. It also sets glibc's heap
      // behaviour for the whole run: freeing the test images' 7.8 MB read buffer (an mmap'd block under
      // 32 MiB) raises malloc's mmap threshold to it and its trim threshold to twice that, so a step's
      // few MB are reused from the heap; without it every step's frees trim the heap and the next step
      // faults its pages back in (docs/page-faults.md).
      test_(load_mnist(options.data_root ? options.data_root : "", /*train=*/false)) {
  step_ = make_step(options.step, device_);
  if (width_ < 1 || batch_size_ < 1)
    throw std::invalid_argument("width and batch size must be at least 1, got " + std::to_string(width_) +
                                " and " + std::to_string(batch_size_));
  if (device_.is_cuda() && !torch::cuda::is_available())
    throw std::runtime_error("device " + device_.str() + " requested but CUDA is not available");
  if (device_.is_cuda() && !device_.has_index()) device_ = torch::Device(torch::kCUDA, 0);
  source_ = make_source(loader_kind_, mnist_, batch_size_, device_);
  if (options.threads > 0) torch::set_num_threads(options.threads);
  torch::manual_seed(options.seed);
  if (options.log_path) {
    log_ = std::fopen(options.log_path, "w");
    if (!log_) throw std::runtime_error(std::string(options.log_path) + ": cannot open log file");
  }
  dataset_size_ = mnist_.size().value();
  build_model();
  phases_ = make_phases();
  // The caller's strings are its own after pb_create returns: what is needed later was copied above.
}

Trainer::~Trainer() {
  if (log_) std::fclose(log_);
}

// The training phases and the one-shots; noop and loss_item are not listed.
std::vector<std::string> Trainer::phase_names() const {
  std::vector<std::string> names;
  for (const auto& phase : phases_)
    if (phase.name != "noop" && phase.name != "loss_item" && (phase.name != "grad_sync" || distributed()))
      names.push_back(phase.name);
  return names;
}

Timing Trainer::run_phase(const std::string& name, pb_result* result) {
  const auto phase = std::find_if(phases_.begin(), phases_.end(), [&](const Phase& p) { return p.name == name; });
  if (phase == phases_.end()) throw std::invalid_argument("unknown phase '" + name + "'");
  switch (phase->uses) {
    case Uses::split_step:
      if (step_->whole())
        throw std::invalid_argument("a step '" + std::string(step_->name()) +
                                    "' trainer replays its step whole: it has no '" + name + "' phase");
      [[fallthrough]];
    case Uses::step:
      ensure_ready();
      break;
    case Uses::one_shot:
      if (!step_->one_shot() || name != step_->one_shot())
        throw std::invalid_argument("phase '" + name + "' is not a phase of a step '" + step_->name() + "' trainer");
      if (step_->ready())
        throw std::invalid_argument("'" + name + "' runs once per worker, and it already ran in this one "
                                    "(untimed, before the first phase that steps, or timed): time it in a "
                                    "fresh worker");
      break;
    case Uses::nothing:
      break;
  }
  // A training step frees the previous step's tensors itself, as in any training loop.
  const bool continuing = phase->continues_itself && last_phase_ == name;
  std::vector<WeakTensor> earlier;
  if (!continuing) {
    earlier = held();
    release();
  }
  if (phase->prepare) phase->prepare();
  // Data parallel: every rank leaves a barrier, untimed, just before its clock starts, so that no rank's clock
  // holds the wait for a late one (docs/distributed.md).
  if (distributed()) barrier();
  const int32_t leftovers = continuing ? -1 : static_cast<int32_t>(std::count_if(
      earlier.begin(), earlier.end(), [](const WeakTensor& w) { return w.alive(); }));
  earlier.clear();
  // Page faults across the round, read outside the clock (a system call each).
  const auto faults_before = page_faults();
  const Timing timing = timed(phase->body);
  const auto faults_after = page_faults();
  last_phase_ = name;
  if (result) {
    *result = phase->result();
    result->leftovers = leftovers;
    result->cpu_ns = timing.cpu_ns;
    result->thread_cpu_ns = timing.thread_cpu_ns;
    result->minor_faults = faults_after.first - faults_before.first;
    result->major_faults = faults_after.second - faults_before.second;
  }
  return timing;
}

#if PHASEBENCH_TESTING
// The knob's phase slowed (run.cpp slows the run's own bodies). Its body is wrapped where it is: making every
// phase again would free and allocate the other phases' bodies too, and the heap the small phases walk would move
// with them, a change of other cases' instruction counts that the head's knob did not make
// (docs/instruction-counts.md#the-gate-on-counts). Only a second knob makes them again, to unwrap the first.
void Trainer::set_slow_knob(SlowKnob knob) {
  if (knob.ns < 0 || knob.fraction < 0 || knob.work < 0)
    throw std::invalid_argument("a slowdown of " + std::to_string(knob.ns) + " ns or of " +
                                std::to_string(knob.fraction) + " of the body's time: neither may be negative");
  if (!slow_.phase.empty()) phases_ = make_phases();
  slow_ = std::move(knob);
  for (auto& phase : phases_)
    if (phase.name == slow_.phase) phase.body = slow_.slowed(std::move(phase.body));
}
#endif

std::string Trainer::layout() {
  std::ostringstream out;
  for (const auto& item : model_->named_parameters()) {
    out << item.key() << ' ';
    for (size_t d = 0; d < item.value().sizes().size(); ++d)
      out << (d ? "x" : "") << item.value().size(d);
    out << ';';
  }
  return out.str();
}

// From a source of its own, so that the trainer's epoch does not move.
Batch Trainer::batch_at(int64_t index) {
  auto source = make_source(loader_kind_, mnist_, batch_size_, device_);
  source->start_epoch();
  Batch batch;
  int64_t i = 0;
  for (; source->next(batch); ++i)
    if (i == index) return Batch(batch.data.cpu(), batch.target.cpu());
  throw std::out_of_range("batch " + std::to_string(index) + " of an epoch of " +
                          std::to_string(i) + " batches");
}

// Peak bytes LibTorch's caching allocator held for tensors since train() began; -1 on cpu.
int64_t Trainer::peak_device_memory() const {
  if (!device_.is_cuda()) return -1;
  const auto stats = c10::getDeviceAllocator(device_.type())->getDeviceStats(device_.index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

void Trainer::advance() {
  if (one_shot_due()) step_->run_one_shot(*this);
  step();
}

std::pair<double, double> Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  double loss_sum = 0;
  int64_t correct = 0;
  auto test_batches = make_source("published", test_, batch_size_, device_);
  test_batches->start_epoch();
  for (Batch batch; test_batches->next(batch);) {
    auto data = batch.data.to(device_), targets = batch.target.to(device_);
    auto output = model_->forward(data);
    loss_sum += torch::nll_loss(output, targets, {}, torch::Reduction::Sum).item<double>();
    correct += output.argmax(1).eq(targets).sum().item<int64_t>();
  }
  model_->train();
  const double n = test_.size().value();
  return {100.0 * correct / n, loss_sum / n};
}

std::vector<int64_t> Trainer::batch_shapes() const {
  const int64_t last = dataset_size_ - (epoch_batches() - 1) * batch_size_;
  return last == batch_size_ ? std::vector<int64_t>{batch_size_} : std::vector<int64_t>{batch_size_, last};
}

void Trainer::build_model() {
  step_->reset();  // a new model needs the step's one-shot again
  model_ = std::make_shared<Net>(dropout_, width_);
  model_->to(device_);
  optimizer_ = std::make_unique<torch::optim::SGD>(
      model_->parameters(), torch::optim::SGDOptions(kLearningRate).momentum(kMomentum));
}

// The next batch, starting a new epoch when the last one ends.
void Trainer::load_batch() {
  if (!epoch_started_ || !source_->next(host_)) {
    source_->start_epoch();
    epoch_started_ = true;
    ++epoch_;
    seen_ = 0;
    host_index_ = -1;
    if (!source_->next(host_)) throw std::logic_error("an epoch without batches");
  }
  seen_ += host_.data.size(0);
  ++host_index_;
}

void Trainer::step() {
  load_batch();
  copy_batch();
  step_->run(*this);
}

// The warm-up steps the step's one-shot needs, where fewer have run: the next real batches, trained.
void Trainer::warm_up() {
  while (!step_->warmed_up()) {
    step();
    ++steps_;
  }
}

// Before a phase that steps: the warm-up and the one-shot, untimed, where they have not run for this model.
void Trainer::ensure_ready() {
  if (step_->ready()) return;
  warm_up();
  step_->run_one_shot(*this);
}

void Trainer::print_progress() {
  std::fprintf(log_ ? log_ : stdout, "Train Epoch: %d [%5ld/%5ld]\tLoss: %.4f\n", epoch_,
               static_cast<long>(seen_), static_cast<long>(dataset_size_), loss_.item<float>());
}

void Trainer::on_device() {
  load_batch();
  copy_batch();
}

void Trainer::forwarded() {
  on_device();
  forward();
  compute_loss();
}

// Every tensor a round leaves in the trainer's state, model weights and optimizer state aside.
std::vector<WeakTensor> Trainer::held() {
  std::vector<torch::Tensor> tensors = {host_.data, host_.target, data_, target_, output_, loss_,
                                        check_weight_, check_grad_, check_momentum_};
  for (const auto& p : model_->parameters()) tensors.push_back(p.grad());
  if (fresh_model_)
    for (const auto& p : fresh_model_->parameters()) tensors.push_back(p);
  std::vector<WeakTensor> weak;
  for (const auto& t : tensors)
    if (t.defined() && !step_->holds(t)) weak.emplace_back(t, !source_->keeps_memory_of(t));
  return weak;
}

// Frees what earlier rounds left (batches, outputs, losses with their graphs, gradients), so
// that no timed body frees it (docs/method.md#what-is-measured).
void Trainer::release() {
  host_ = Batch();
  data_ = target_ = output_ = loss_ = torch::Tensor();
  check_weight_ = check_grad_ = check_momentum_ = rng_before_ = torch::Tensor();
  fresh_optimizer_.reset();
  fresh_model_.reset();
  optimizer_->zero_grad();  // set_to_none, as Python's
}

}  // namespace phasebench
