// trainer.cpp: the trainer's creation from pb_options, run_phase's prepare-release-time round, and the batch.
// Its phases are in phases.cpp, its training run in run.cpp.
#include "trainer.h"

#include <ATen/Context.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <stdexcept>

namespace phasebench {

namespace {

// Whether CUDA can run here, asked of c10's CUDA device guard implementation (none is registered in a CPU build of
// LibTorch), whose device count is the one torch::cuda::is_available reads: the implementation resolve_device uses,
// so that the testing build's fake one stands for a GPU machine along pb_create's whole path.
bool cuda_usable() {
  return c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA) &&
         c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->deviceCount() > 0;
}

torch::Device checked_device(const char* name) {
  torch::Device device(name ? name : "cpu");
  if (device.is_cuda() && !cuda_usable())
    throw std::runtime_error("device " + device.str() + " requested but CUDA is not available");
  return resolve_device(device);
}

// The equivalence tests' numerics, as phasebench/determinism.py sets them in Python's torch: deterministic algorithms
// (torch's check that cuBLAS has a fixed workspace included), cuDNN's deterministic algorithms chosen by its
// heuristics rather than timed, and float32 convolutions and matrix products in float32, not TF32. They are the
// process's, as Python's flags are; a timed session never sets them.
void make_deterministic() {
  auto& context = at::globalContext();
  context.setDeterministicAlgorithms(true, /*warn_only=*/false);
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
  context.setAllowTF32CuDNN(false);
  context.setAllowTF32CuBLAS(false);
}

}  // namespace

torch::Device resolve_device(torch::Device device) {
  if (!device.is_cuda()) return device;
  // A bare "cuda" is the current device, as phasebench/devices.py maps it for Python; made current, as Python's
  // torch.cuda.set_device does, so that both workers' streams, events and synchronization are that device's.
  // Through the device guard's implementation, as c10::DeviceGuard does: the CUDA hooks' own setCurrentDevice
  // and getCurrentDevice are not implemented in every LibTorch (2.11's refuse the call).
  const auto* cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  if (!device.has_index()) device = cuda->getDevice();
  cuda->setDevice(device);
  return device;
}

Settings::Settings(const pb_options& options)
    : data_root(options.data_root ? options.data_root : ""),
      device(checked_device(options.device)),
      log_path(options.log_path ? options.log_path : ""),
      threads(options.threads),
      seed(options.seed),
      dropout(options.dropout),
      width(options.width),
      batch_size(options.batch_size),
      loader(options.loader ? options.loader : "published"),
      step(options.step ? options.step : "eager"),
      deterministic(options.deterministic == 1) {
  if (options.deterministic != 0 && options.deterministic != 1)
    throw std::invalid_argument("deterministic " + std::to_string(options.deterministic) + ": 1 (on) or 0 (off)");
  if (width < 1 || batch_size < 1)
    throw std::invalid_argument("width and batch size must be at least 1, got " + std::to_string(width) + " and " +
                                std::to_string(batch_size));
  check_loader(loader);
  // Before the step, the data and the model touch the device (the settings are the trainer's first member).
  if (deterministic) make_deterministic();
}

// The settings are checked and the step made before either split is read.
Trainer::Trainer(const pb_options& options)
    : settings_(options),
      events_(settings_.device.is_cuda() ? std::make_unique<BodyEvents>(settings_.device) : nullptr),
      step_(make_step(settings_.step, settings_.device)),
      mnist_(load_mnist(settings_.data_root, /*train=*/true)),
      // Both splits before training, as the published program opens them. It also sets glibc's heap
      // behaviour for the whole run: freeing the test images' 7.8 MB read buffer (an mmap'd block under
      // 32 MiB) raises malloc's mmap threshold to it and its trim threshold to twice that, so a step's
      // few MB are reused from the heap; without it every step's frees trim the heap and the next step
      // faults its pages back in (docs/page-faults.md).
      test_(load_mnist(settings_.data_root, /*train=*/false)),
      dataset_size_(mnist_.size().value()),
      source_(make_source(settings_.loader, mnist_, settings_.batch_size, device())) {
  if (settings_.threads > 0) torch::set_num_threads(settings_.threads);
  torch::manual_seed(settings_.seed);
  if (!settings_.log_path.empty()) {
    log_ = std::fopen(settings_.log_path.c_str(), "w");
    if (!log_) throw std::runtime_error(settings_.log_path + ": cannot open log file");
  }
  model_.emplace(settings_.dropout, settings_.width, device());
  phases_ = make_phases();
}

Trainer::~Trainer() {
  if (log_) std::fclose(log_);
}

// The training phases and the one-shots; noop and loss_item are not listed.
std::vector<std::string> Trainer::phase_names() const {
  std::vector<std::string> names;
  for (const auto& phase : phases_)
    if (phase.name != "noop" && phase.name != "loss_item" && (phase.name != "grad_sync" || group_))
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
  // Without its checks (pb_set_round_checks), the round does nothing that proves its work: no weak references to
  // count leftovers by, nothing taken to check the product against, no product. The release stays: it is the method's.
  const bool checks = round_checks_;
  // A training step frees the previous step's tensors itself, as in any training loop.
  const bool continuing = phase->continues_itself && last_phase_ == name;
  std::vector<WeakTensor> earlier;
  if (!continuing) {
    if (checks) earlier = held();
    release();
  }
  if (phase->prepare) phase->prepare();
  if (phase->check_before && checks) phase->check_before();
  // Data parallel: every rank leaves a barrier, untimed, just before its clock starts, so that no rank's clock
  // holds the wait for a late one (docs/distributed.md).
  if (group_) group_->barrier();
  const int32_t leftovers = continuing || !checks ? -1 : static_cast<int32_t>(std::count_if(
      earlier.begin(), earlier.end(), [](const WeakTensor& w) { return w.alive(); }));
  earlier.clear();
  // Page faults across the round, read outside the clock (a system call each).
  const auto faults_before = page_faults();
  const Timing timing = timed(phase->body);
  const auto faults_after = page_faults();
  last_phase_ = name;
  if (result) {
    *result = checks ? phase->result() : unset_product();
    result->leftovers = leftovers;
    record_timing(*result, timing, faults_before, faults_after);
  }
  return timing;
}

#if PHASEBENCH_TESTING
// The knob's phase slowed (run.cpp slows the run's own bodies). Its body is wrapped where it is: making every
// phase again would free and allocate the other phases' bodies too, and the heap the small phases walk would move
// with them, a change of other cases' instruction counts that the knob did not make
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

// From a source of its own, so that the trainer's epoch does not move.
Batch Trainer::batch_at(int64_t index) {
  auto source = make_source(settings_.loader, mnist_, settings_.batch_size, device());
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
  if (!device().is_cuda()) return -1;
  const auto stats = c10::getDeviceAllocator(device().type())->getDeviceStats(device().index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

void Trainer::advance() {
  if (one_shot_due()) step_->run_one_shot(*this);
  step();
}

std::pair<double, double> Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  auto& net = model_->net();
  net.eval();
  double loss_sum = 0;
  int64_t correct = 0;
  auto test_batches = make_source("published", test_, settings_.batch_size, device());
  test_batches->start_epoch();
  for (Batch batch; test_batches->next(batch);) {
    auto data = batch.data.to(device()), targets = batch.target.to(device());
    auto output = net.forward(data);
    loss_sum += torch::nll_loss(output, targets, {}, torch::Reduction::Sum).item<double>();
    correct += output.argmax(1).eq(targets).sum().item<int64_t>();
  }
  net.train();
  const double n = test_.size().value();
  return {100.0 * correct / n, loss_sum / n};
}

std::vector<int64_t> Trainer::batch_shapes() const {
  const int64_t batch_size = settings_.batch_size;
  const int64_t last = dataset_size_ - (epoch_batches() - 1) * batch_size;
  return last == batch_size ? std::vector<int64_t>{batch_size} : std::vector<int64_t>{batch_size, last};
}

void Trainer::attach(const std::string& group_name) {
  if (group_) throw std::invalid_argument("this trainer already belongs to a process group");
  auto group = std::make_unique<ProcessGroup>(group_name);
  const int64_t world = group->world(), batch_size = settings_.batch_size;
  const int64_t last = dataset_size_ - (epoch_batches() - 1) * batch_size;
  if (batch_size % world != 0 || last % world != 0)
    throw std::invalid_argument("world size " + std::to_string(world) + " must divide the batch (" +
                                std::to_string(batch_size) + ") and the epoch's last batch (" +
                                std::to_string(last) + ")");
  source_ = make_source(settings_.loader, mnist_, batch_size, device(), group->rank(), world);
  group_ = std::move(group);
  epoch_started_ = false;
}

std::vector<int64_t> Trainer::timed_steps(int64_t steps) {
  ensure_ready();
  std::vector<int64_t> ns;
  ns.reserve(steps);
  for (int64_t i = 0; i < steps; ++i) {
    ns.push_back(timed([this] {
                   step();
                   if (++steps_ % kLogInterval == 0) print_progress();
                 }).ns);
  }
  return ns;
}

void Trainer::start_ensemble(int64_t models) {
  Ensemble::check_size(models);
  ensemble_.reset();  // freed before the new one is built
  ensemble_ = std::make_unique<Ensemble>(models, settings_.dropout, settings_.width, device());
}

// Timed as a phase is: what the last round left is released, and the batch loaded and copied to the device,
// before the clock starts.
Timing Trainer::ensemble_step(std::vector<double>& losses) {
  if (!ensemble_) throw std::logic_error("no ensemble: call pb_ensemble_create first");
  ensemble_->prepare_step();
  release();
  on_device();
  const Timing timing = timed([this] { ensemble_->step(tensors_.data, tensors_.target); });
  losses = ensemble_->losses();
  return timing;
}

std::vector<torch::Tensor> Trainer::ensemble_parameters(int64_t member) const {
  if (!ensemble_)
    throw std::out_of_range("member " + std::to_string(member) + " of an ensemble of 0 (members are numbered "
                            "from 0)");
  return ensemble_->parameters(member);
}

// -- the operations the phases are made of --------------------------------------------------------------------

void Trainer::build_model() {
  step_->reset();  // a new model needs the step's one-shot again
  model_->rebuild();
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

void Trainer::on_device() {
  load_batch();
  copy_batch();
}

void Trainer::forwarded() {
  on_device();
  tensors_.forward(*model_);
  tensors_.compute_loss();
}

void Trainer::step() {
  load_batch();
  copy_batch();
  step_->run(*this);
}

void Trainer::print_progress() {
  std::fprintf(log_ ? log_ : stdout, "Train Epoch: %d [%5ld/%5ld]\tLoss: %.4f\n", epoch_,
               static_cast<long>(seen_), static_cast<long>(dataset_size_), tensors_.loss.item<float>());
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

// Every tensor a round leaves in the trainer's state, model weights and optimizer state aside.
std::vector<WeakTensor> Trainer::held() {
  std::vector<torch::Tensor> tensors = {host_.data, host_.target, tensors_.data, tensors_.target, tensors_.output,
                                        tensors_.loss};
  for (const auto& t : checks_.held()) tensors.push_back(t);
  for (const auto& g : model_->gradients()) tensors.push_back(g);
  if (fresh_)
    for (const auto& p : fresh_->parameters()) tensors.push_back(p);
  std::vector<WeakTensor> weak;
  for (const auto& t : tensors)
    if (t.defined() && !step_->holds(t)) weak.emplace_back(t, !source_->keeps_memory_of(t));
  return weak;
}

// Frees what earlier rounds left (batches, outputs, losses with their graphs, gradients), so that no timed body
// frees it (docs/method.md#what-is-measured).
void Trainer::release() {
  host_ = Batch();
  tensors_.clear();
  checks_.release();
  fresh_.reset();
  model_->zero_grad();  // set_to_none, as Python's
}

}  // namespace phasebench
