// phasebench.cpp: the pytorch/examples C++ MNIST program, cut into the timed phases (README,
// "What is measured"), behind the C ABI of phasebench.h. It reads like examples/cpp/mnist/mnist.cpp:
// the same Net, the same loader, the same optimizer and log line.
#include "phasebench.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/cuda.h>
#include <torch/torch.h>

// CUDA graphs (cpp-graphs) need the CUDA runtime's headers, which a CPU-only machine may lack: phasebench/worker/build.py
// defines PHASEBENCH_CUDA_GRAPHS where it found them, and without it a "graphs" trainer is refused at creation.
#if PHASEBENCH_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <sys/resource.h>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kLogInterval = 10;
constexpr int64_t kImageSide = 28;
constexpr double kMean = 0.1307, kStd = 0.3081;

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

// LibTorch's MNIST reader checks magic numbers and sizes but silently accepts a truncated
// image file, and it allocates before it looks: check each file's header against its size.
// Same checks, order and messages as phasebench/data.py's check_split.
int64_t check_idx(const std::string& path, uint32_t magic) {
  std::error_code error;
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, error));
  if (error) throw std::runtime_error(path + ": cannot read (" + error.message() + ")");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(path + ": cannot read (" + std::strerror(errno) + ")");
  const int header_size = magic == 2051 ? 16 : 8;
  if (size < header_size)
    throw std::runtime_error(path + ": " + std::to_string(size) + " bytes, shorter than the " +
                             std::to_string(header_size) + "-byte IDX header");
  unsigned char header[16];
  file.read(reinterpret_cast<char*>(header), header_size);
  auto word = [&](int i) {
    return (uint32_t(header[4 * i]) << 24) | (uint32_t(header[4 * i + 1]) << 16) |
           (uint32_t(header[4 * i + 2]) << 8) | uint32_t(header[4 * i + 3]);
  };
  if (word(0) != magic)
    throw std::runtime_error(path + ": IDX magic " + std::to_string(word(0)) + ", expected " +
                             std::to_string(magic));
  const int64_t count = word(1);
  int64_t item_size = 1;
  if (magic == 2051) {
    if (word(2) != kImageSide || word(3) != kImageSide)
      throw std::runtime_error(path + ": images are " + std::to_string(word(2)) + "x" +
                               std::to_string(word(3)) + ", expected 28x28");
    item_size = kImageSide * kImageSide;
  }
  if (size != header_size + count * item_size)
    throw std::runtime_error(path + ": header claims " + std::to_string(count) + " items (" +
                             std::to_string(header_size + count * item_size) +
                             " bytes) but the file has " + std::to_string(size) + " bytes");
  return count;
}

// A label outside 0-9 would pass LibTorch's reader and fail training later ("Target 200 is out of
// bounds."): the first one is named with its index. Call after check_idx has checked the size.
void check_labels(const std::string& path, int64_t count) {
  std::ifstream file(path, std::ios::binary);
  std::vector<unsigned char> labels(static_cast<size_t>(count));
  file.seekg(8);
  if (!file.read(reinterpret_cast<char*>(labels.data()), count))
    throw std::runtime_error(path + ": cannot read (" + std::strerror(errno) + ")");
  const auto bad = std::find_if(labels.begin(), labels.end(), [](unsigned char label) { return label > 9; });
  if (bad != labels.end())
    throw std::runtime_error(path + ": label " + std::to_string(*bad) + " at index " +
                             std::to_string(bad - labels.begin()) + " is outside 0–9");
}

torch::data::datasets::MNIST load_mnist(const std::string& root, bool train) {
  const std::string prefix = root + (train ? "/train" : "/t10k");
  const int64_t expected = train ? 60000 : 10000;
  const int64_t images = check_idx(prefix + "-images-idx3-ubyte", 2051);
  const int64_t labels = check_idx(prefix + "-labels-idx1-ubyte", 2049);
  if (images != labels)
    throw std::runtime_error(prefix + "-labels-idx1-ubyte: " + std::to_string(labels) +
                             " labels for " + std::to_string(images) + " images");
  if (images != expected)
    throw std::runtime_error(prefix + "-images-idx3-ubyte: " + std::to_string(images) +
                             " images; the workload needs the full split of " + std::to_string(expected) +
                             " (LibTorch's MNIST reads no other size)");
  check_labels(prefix + "-labels-idx1-ubyte", labels);
  using Mode = torch::data::datasets::MNIST::Mode;
  return torch::data::datasets::MNIST(root, train ? Mode::kTrain : Mode::kTest);
}

// The idiomatic LibTorch loader (README, "How our trainers differ from pytorch/examples"): Normalize, Stack,
// sequential batches.
auto make_loader(const torch::data::datasets::MNIST& mnist, int64_t batch_size) {
  return torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      torch::data::datasets::MNIST(mnist)
          .map(torch::data::transforms::Normalize<>(kMean, kStd))
          .map(torch::data::transforms::Stack<>()),
      batch_size);
}
using Loader = decltype(make_loader(std::declval<torch::data::datasets::MNIST>(), 1));
using Batch = torch::data::Example<>;

// Where an implementation's batches come from (README, "Implementations and workloads"): start an epoch,
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

// cpp: LibTorch's MNIST, mapped through Normalize and Stack, in a sequential data loader.
class PublishedSource : public BatchSource {
 public:
  PublishedSource(const torch::data::datasets::MNIST& mnist, int64_t batch_size)
      : loader_(make_loader(mnist, batch_size)) {}
  void start_epoch() override { batches_.emplace(loader_->begin()); }
  bool next(Batch& batch) override {
    if (*batches_ == loader_->end()) return false;
    batch = **batches_;
    ++*batches_;
    return true;
  }

 private:
  Loader loader_;
  std::optional<torch::data::Iterator<Batch>> batches_;
};

// cpp-batched: the split normalized once with the transform's own operation, each batch a slice of it; on
// cuda the split lives on the device, so copy_to_device copies nothing.
class SplitSource : public BatchSource {
 public:
  SplitSource(const torch::data::datasets::MNIST& mnist, int64_t batch_size, const torch::Device& device)
      : images_(torch::data::transforms::Normalize<>(kMean, kStd)(mnist.images()).to(device)),
        targets_(mnist.targets().to(device)),
        batch_size_(batch_size) {}
  void start_epoch() override { next_ = 0; }
  bool keeps_memory_of(const torch::Tensor& t) const override {
    return t.is_alias_of(images_) || t.is_alias_of(targets_);
  }
  bool next(Batch& batch) override {
    const int64_t size = images_.size(0);
    if (next_ >= size) return false;
    const int64_t end = std::min(next_ + batch_size_, size);
    batch = Batch(images_.slice(0, next_, end), targets_.slice(0, next_, end));
    next_ = end;
    return true;
  }

 private:
  torch::Tensor images_, targets_;
  int64_t batch_size_;
  int64_t next_ = 0;
};

std::unique_ptr<BatchSource> make_source(const std::string& kind, const torch::data::datasets::MNIST& mnist,
                                         int64_t batch_size, const torch::Device& device) {
  if (kind == "published") return std::make_unique<PublishedSource>(mnist, batch_size);
  if (kind == "batched") return std::make_unique<SplitSource>(mnist, batch_size, device);
  throw std::invalid_argument("unknown loader '" + kind + "': published or batched");
}

struct Phase {
  std::string name;
  std::function<void()> prepare;  // untimed, after Trainer::release()
  std::function<void()> body;     // timed
  std::function<pb_result()> result;
  bool continues_itself = false;  // its rounds follow one another as training steps do
};

struct Timing {
  int64_t ns;
  int64_t cpu_ns;         // the process, all threads
  int64_t thread_cpu_ns;  // the thread that ran the body
};

// The process's page faults so far: (minor, major).
std::pair<int64_t, int64_t> page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {usage.ru_minflt, usage.ru_majflt};
}

int64_t cpu_clock_ns(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// Spin, not sleep: a test slowdown must compete for the CPU as real work does.
void busy_wait(int64_t ns) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// A reference that does not keep a tensor, nor its memory, alive.
struct WeakTensor {
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> impl;
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;
  WeakTensor(const torch::Tensor& t, bool with_storage) : impl(t.getIntrusivePtr()) {
    if (with_storage && t.has_storage()) storage.emplace(t.storage().getWeakStorageImpl());
  }
  bool alive() const { return !impl.expired() || (storage && !storage->expired()); }
};

constexpr double kLearningRate = 0.01, kMomentum = 0.5;
constexpr int kFloorRounds = 2000;  // empty-phase rounds whose median is the timer floor
constexpr int64_t kMaxEnsemble = 4096;  // as phasebench/train/ensemble.py's MAX_MODELS

// Eager steps before a capture, on a side stream, as torch's whole-network capture recipe does: the first
// creates SGD's momentum buffers, the later ones settle lazy initializations (cuBLAS workspaces, cuDNN plans).
// They are the run's first real batches: they train and count (phasebench/train/trainer.py's GRAPH_WARMUP_STEPS).
constexpr int64_t kGraphWarmupSteps = 3;

#if PHASEBENCH_CUDA_GRAPHS
using CudaGraph = at::cuda::CUDAGraph;
#else
struct CudaGraph {};  // never made: a "graphs" trainer is refused at creation without the CUDA headers
#endif

// One batch shape's CUDA graph of a whole training step and its static tensors: each batch is copied into
// data and target, and a replay leaves its output and loss in output and loss.
struct CapturedStep {
  std::unique_ptr<CudaGraph> graph;
  torch::Tensor data, target, output, loss;
  bool holds(const torch::Tensor& t) const {
    for (const auto* own : {&data, &target, &output, &loss})
      if (t.unsafeGetTensorImpl() == own->unsafeGetTensorImpl()) return true;
    return false;
  }
};

// Phases that use no step: they never trigger the capture before their clock.
bool needs_no_step(const std::string& name) {
  return name == "data_loading" || name == "optimizer_init" || name == "noop" || name == "graph_capture";
}
bool split_step_phase(const std::string& name) {
  return name == "forward" || name == "loss" || name == "backward" || name == "param_update" ||
         name == "progress_print" || name == "loss_item";
}

class Trainer {
 public:
  explicit Trainer(const pb_options& options)
      : options_(options),
        device_(options.device ? options.device : "cpu"),
        width_(options.width),
        batch_size_(options.batch_size),
        loader_kind_(options.loader ? options.loader : "published"),
        step_kind_(options.step ? options.step : "eager"),
        slow_phase_(options.slow_phase ? options.slow_phase : ""),
        mnist_(load_mnist(options.data_root ? options.data_root : "", /*train=*/true)),
        // Both splits before training, as the published program opens them. It also sets glibc's heap
        // behaviour for the whole run: freeing the test images' 7.8 MB read buffer (an mmap'd block under
        // 32 MiB) raises malloc's mmap threshold to it and its trim threshold to twice that, so a step's
        // few MB are reused from the heap; without it every step's frees trim the heap and the next step
        // faults its pages back in (docs/page-faults.md).
        test_(load_mnist(options.data_root ? options.data_root : "", /*train=*/false)) {
    if (step_kind_ == "compile" || step_kind_ == "compile-cudagraphs")
      throw std::invalid_argument("step '" + step_kind_ + "' is torch.compile, which LibTorch does not have");
    if (step_kind_ != "eager" && step_kind_ != "graphs")
      throw std::invalid_argument("unknown step '" + step_kind_ + "': eager or graphs");
    if (step_kind_ == "graphs" && !device_.is_cuda())
      throw std::invalid_argument("step 'graphs' needs a cuda device (CUDA graphs), not " + device_.str());
#if !PHASEBENCH_CUDA_GRAPHS
    if (step_kind_ == "graphs")
      throw std::runtime_error("step 'graphs': this library was built without the CUDA runtime headers that "
                               "CUDA graphs need (phasebench/worker/build.py found none; see README)");
#endif
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
    for (auto& phase : phases_)
      if (phase.name == slow_phase_) phase.body = slowed(phase.body);
    // The caller's strings are its own after pb_create returns: what is needed later was copied above.
    options_.data_root = options_.device = options_.log_path = options_.slow_phase = options_.loader =
        options_.step = nullptr;
  }
  ~Trainer() {
    if (log_) std::fclose(log_);
  }

  const std::vector<Phase>& phases() const { return phases_; }

  // Prepares the phase untimed, then times its body; the product says what it did.
  Timing run_phase(const std::string& name, pb_result* result) {
    for (const auto& phase : phases_) {
      if (phase.name != name) continue;
      if (whole_step() && split_step_phase(name))
        throw std::invalid_argument("a step '" + step_kind_ + "' trainer replays its step whole: it has no '" +
                                    name + "' phase");
      if (name == "graph_capture") {
        if (step_kind_ != "graphs")
          throw std::invalid_argument("phase 'graph_capture' is not a phase of a step '" + step_kind_ + "' trainer");
        if (one_shot_done_)
          throw std::invalid_argument("'graph_capture' runs once per worker, and it already ran in this one "
                                      "(untimed, before the first phase that steps, or timed): time it in a "
                                      "fresh worker");
      } else if (!needs_no_step(name)) {
        ensure_ready();
      }
      // A training step frees the previous step's tensors itself, as in any training loop.
      const bool continuing = phase.continues_itself && last_phase_ == name;
      std::vector<WeakTensor> earlier;
      if (!continuing) {
        earlier = held();
        release();
      }
      if (phase.prepare) phase.prepare();
      const int32_t leftovers = continuing ? -1 : static_cast<int32_t>(std::count_if(
          earlier.begin(), earlier.end(), [](const WeakTensor& w) { return w.alive(); }));
      earlier.clear();
      // Page faults across the round, read outside the clock (a system call each).
      const auto faults_before = page_faults();
      const Timing timing = timed(phase.body);
      const auto faults_after = page_faults();
      last_phase_ = name;
      if (name == "graph_capture") one_shot_done_ = true;
      if (result) {
        *result = phase.result();
        result->leftovers = leftovers;
        result->cpu_ns = timing.cpu_ns;
        result->thread_cpu_ns = timing.thread_cpu_ns;
        result->minor_faults = faults_after.first - faults_before.first;
        result->major_faults = faults_after.second - faults_before.second;
      }
      return timing;
    }
    throw std::invalid_argument("unknown phase '" + name + "'");
  }

  // The median time of the empty phase: what the clock itself costs here.
  int64_t timer_floor() {
    const std::function<void()> noop = [] {};
    std::vector<int64_t> times(kFloorRounds);
    for (auto& t : times) t = timed(noop).ns;
    std::nth_element(times.begin(), times.begin() + kFloorRounds / 2, times.end());
    return times[kFloorRounds / 2];
  }

  std::vector<torch::Tensor> parameters() { return model_->parameters(); }
  std::string layout() {
    std::ostringstream out;
    for (const auto& item : model_->named_parameters()) {
      out << item.key() << ' ';
      for (size_t d = 0; d < item.value().sizes().size(); ++d)
        out << (d ? "x" : "") << item.value().size(d);
      out << ';';
    }
    return out.str();
  }

  int64_t epoch_batches() { return (dataset_size_ + batch_size_ - 1) / batch_size_; }

  // From a source of its own, so that the trainer's epoch does not move.
  Batch batch_at(int64_t index) {
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
  int64_t peak_device_memory() const {
    if (!device_.is_cuda()) return -1;
    const auto stats = c10::getDeviceAllocator(device_.type())->getDeviceStats(device_.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }

  // An ensemble (README, "Concurrent jobs and ensembles"): member k (1-based) is the Net built right after
  // torch::manual_seed(k), with its own SGD; it replaces the last one. phasebench/train/ensemble.py's LoopEnsemble in C++.
  void start_ensemble(int64_t models) {
    if (models < 1 || models > kMaxEnsemble)
      throw std::invalid_argument("an ensemble of " + std::to_string(models) + " models: from 1 to " +
                                  std::to_string(kMaxEnsemble));
    stop_ensemble();  // freed before the new one is built
    for (int64_t seed = 1; seed <= models; ++seed) {
      torch::manual_seed(seed);
      auto model = std::make_shared<Net>(options_.dropout, width_);
      model->to(device_);
      auto optimizer = std::make_unique<torch::optim::SGD>(
          model->parameters(), torch::optim::SGDOptions(kLearningRate).momentum(kMomentum));
      ensemble_.push_back({std::move(model), std::move(optimizer)});
    }
  }
  void stop_ensemble() {
    ensemble_losses_.clear();
    ensemble_.clear();
  }
  int64_t ensemble_size() const { return static_cast<int64_t>(ensemble_.size()); }

  // One step of every member on the next batch, timed as a phase is: the batch is loaded and copied to the
  // device before the clock starts, and what the last step left is released before that.
  Timing ensemble_step(std::vector<double>& losses) {
    if (ensemble_.empty()) throw std::logic_error("no ensemble: call pb_ensemble_create first");
    ensemble_losses_.clear();
    ensemble_losses_.reserve(ensemble_.size());
    release();
    on_device();
    const Timing timing = timed([this] {
      for (auto& member : ensemble_) {
        auto loss = torch::nll_loss(member.model->forward(data_), target_);
        loss.backward();
        member.optimizer->step();
        member.optimizer->zero_grad();
        ensemble_losses_.push_back(loss.detach());
      }
    });
    losses.clear();
    for (const auto& loss : ensemble_losses_) losses.push_back(loss.item<double>());
    return timing;
  }

  std::vector<torch::Tensor> ensemble_parameters(int64_t member) const {
    if (member < 0 || member >= ensemble_size())
      throw std::out_of_range("member " + std::to_string(member) + " of an ensemble of " +
                              std::to_string(ensemble_size()) + " (members are numbered from 0)");
    return ensemble_[member].model->parameters();
  }

  // One training step, without its log line.
  void step() {
    load_batch();
    copy_batch();
    compute_step();
  }
  // The equivalence tests' step: a graph trainer captures once its warm-up steps have run.
  void advance() {
    if (capture_due()) {
      capture_graphs();
      one_shot_done_ = true;
    }
    step();
  }
  double last_loss() { return loss_.item<double>(); }

  std::pair<double, double> evaluate() {
    torch::NoGradGuard no_grad;
    model_->eval();
    double loss_sum = 0;
    int64_t correct = 0;
    auto loader = make_loader(test_, batch_size_);
    for (const auto& batch : *loader) {
      auto data = batch.data.to(device_), targets = batch.target.to(device_);
      auto output = model_->forward(data);
      loss_sum += torch::nll_loss(output, targets, {}, torch::Reduction::Sum).item<double>();
      correct += output.argmax(1).eq(targets).sum().item<int64_t>();
    }
    model_->train();
    const double n = test_.size().value();
    return {100.0 * correct / n, loss_sum / n};
  }

  // The published run: each phase's total, or with synchronize == 0 only the whole loop. The frees
  // that fall inside a phase's clock stay there, as in the published program.
  int64_t train(int32_t epochs, bool synchronize, int64_t max_steps, std::vector<int64_t>& phase_ns,
                int64_t& steps, int64_t& cpu_ns) {
    const auto more_steps = [&] { return max_steps <= 0 || steps < max_steps; };
    auto index_of = [&](const char* name) {
      for (size_t i = 0; i < phases_.size(); ++i)
        if (phases_[i].name == name) return i;
      throw std::logic_error(std::string("no phase ") + name);
    };
    const std::string& slow_phase = slow_phase_;
    // Each phase's body and where its total goes, made once: nothing but the step in the loop.
    // A one-shot phase (graph_capture) is timed even free-running: once, outside any step, so that a reader
    // can take it out of the loop's time.
    struct RunPhase {
      size_t index;
      std::function<void()> body;
      bool always_timed = false;
    };
    auto phase = [&](const char* name, std::function<void()> body) {
      return RunPhase{index_of(name), name == slow_phase ? slowed(std::move(body)) : std::move(body),
                      std::string(name) == "graph_capture"};
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
                   capture = phase("graph_capture", [&] {
                     capture_graphs();
                     one_shot_done_ = true;
                   }),
                   // Where the step is one graph: the step (a warm-up step, then replays) and the log line.
                   whole = phase("train_step", [&] {
                     compute_step();
                     if (log_due_) print_progress();
                   });
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
        if (capture_due()) run(capture);
        run(copy);
        if (whole_step()) {
          seen_ = (batch_idx + 1) * batch_size_;
          log_due_ = batch_idx % kLogInterval == 0;
          run(whole);
          ++steps;
          continue;
        }
        run(forward_pass);
        run(loss);
        run(backward_pass);
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

 private:
  // The cheapest correct synchronization LibTorch offers: torch::cuda::synchronize() adds
  // availability and device-count checks to this call.
  void sync() const {
    if (device_.is_cuda()) at::detail::getCUDAHooks().deviceSynchronize(device_.index());
  }

  // Synchronize, clock, body, synchronize, clock (README, "What is measured"); on cpu nothing but
  // the body between the two clock reads. The process CPU time is read just outside them.
  Timing timed(const std::function<void()>& body) const {
    if (device_.is_cuda()) {
      sync();
      const int64_t cpu_start = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID),
                    thread_start = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
      const auto start = std::chrono::steady_clock::now();
      body();
      sync();
      const auto end = std::chrono::steady_clock::now();
      return {std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count(),
              cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu_start,
              cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - thread_start};
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

  std::function<void()> slowed(std::function<void()> body) const {
    const int64_t ns = options_.slow_ns;
    const double fraction = options_.slow_fraction;
    if (fraction > 0) {  // a relative slowdown: as much again as this round's body took, times the fraction
      return [body = std::move(body), fraction] {
        const auto start = std::chrono::steady_clock::now();
        body();
        const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
        busy_wait(static_cast<int64_t>(static_cast<double>(took.count()) * fraction));
      };
    }
    return [body = std::move(body), ns] {
      body();
      busy_wait(ns);
    };
  }

  bool whole_step() const { return step_kind_ == "graphs"; }
  bool capture_due() const {
    return step_kind_ == "graphs" && graphs_.empty() && warmup_steps_ >= kGraphWarmupSteps;
  }

  // Forward, loss, backward and update of the batch on the device: a replay once the graphs are captured;
  // before that, on the graph trainer, a warm-up step on a side stream.
  void compute_step() {
    if (!graphs_.empty()) {
      replay();
    } else if (step_kind_ == "graphs") {
      on_side_stream([this] { eager_step(); });
      ++warmup_steps_;
    } else {
      eager_step();
    }
  }
  void eager_step() {
    forward();
    compute_loss();
    backward();
    update();
  }

  // The capture's warm-up steps, where fewer have run: the next real batches, trained.
  void graph_warm_up() {
    while (warmup_steps_ < kGraphWarmupSteps) {
      step();
      ++steps_;
    }
  }
  // Before a phase that steps: the warm-up and the capture, untimed, where they have not run in this worker.
  void ensure_ready() {
    if (step_kind_ != "graphs" || one_shot_done_) return;
    graph_warm_up();
    capture_graphs();
    one_shot_done_ = true;
  }

  // The batch sizes an epoch feeds the step: the full one, and the remainder that ends the epoch.
  std::vector<int64_t> batch_shapes() const {
    const int64_t last = dataset_size_ - (epoch_batches_count() - 1) * batch_size_;
    return last == batch_size_ ? std::vector<int64_t>{batch_size_} : std::vector<int64_t>{batch_size_, last};
  }
  int64_t epoch_batches_count() const { return (dataset_size_ + batch_size_ - 1) / batch_size_; }

  bool is_static(const torch::Tensor& t) const {
    for (const auto& [rows, captured] : graphs_)
      if (captured.holds(t)) return true;
    return false;
  }

#if PHASEBENCH_CUDA_GRAPHS
  // A full synchronization on each side of the side stream's work stands in for the recipe's stream waits:
  // it is stronger, and it runs only in the few warm-up steps.
  void on_side_stream(const std::function<void()>& work) {
    sync();
    {
      c10::cuda::CUDAStreamGuard guard(at::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index()));
      work();
    }
    sync();
  }
  // One CUDA graph per batch shape, each capturing forward, loss, backward and SGD's step (phasebench/train/trainer.py's
  // capture_graphs says why each detail). Capture runs nothing: the model does not train here.
  void capture_graphs() {
    for (const int64_t rows : batch_shapes()) {
      CapturedStep captured;
      captured.data = torch::zeros({rows, 1, kImageSide, kImageSide}, torch::TensorOptions(device_));
      captured.target = torch::zeros({rows}, torch::TensorOptions(device_).dtype(torch::kInt64));
      captured.graph = std::make_unique<CudaGraph>();
      optimizer_->zero_grad();  // set_to_none: the capture allocates this graph's own gradients
      sync();
      {
        c10::cuda::CUDAStreamGuard guard(at::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index()));
        captured.graph->capture_begin();  // a private memory pool: the graphs replay in no fixed order
        captured.output = model_->forward(captured.data);
        captured.loss = torch::nll_loss(captured.output, captured.target);
        captured.loss.backward();
        optimizer_->step();
        captured.graph->capture_end();
      }
      sync();
      graphs_.emplace(rows, std::move(captured));
    }
    optimizer_->zero_grad();
  }
  void replay() {
    auto& captured = graphs_.at(data_.size(0));
    captured.graph->replay();
    output_ = captured.output;
    loss_ = captured.loss;
  }
#else
  [[noreturn]] static void no_graphs() {
    throw std::logic_error("CUDA graphs are not built into this library");
  }
  void on_side_stream(const std::function<void()>&) { no_graphs(); }
  void capture_graphs() { no_graphs(); }
  void replay() { no_graphs(); }
#endif

  void build_model() {
    graphs_.clear();  // a new model needs its own capture
    warmup_steps_ = 0;
    one_shot_done_ = false;
    model_ = std::make_shared<Net>(options_.dropout, width_);
    model_->to(device_);
    optimizer_ = std::make_unique<torch::optim::SGD>(
        model_->parameters(), torch::optim::SGDOptions(kLearningRate).momentum(kMomentum));
  }

  // The next batch, starting a new epoch when the last one ends.
  void load_batch() {
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

  void copy_batch() {
    if (!graphs_.empty()) {  // into the static buffers of the graph of this batch's shape
      auto& captured = graphs_.at(host_.data.size(0));
      captured.data.copy_(host_.data);
      captured.target.copy_(host_.target);
      data_ = captured.data;
      target_ = captured.target;
      return;
    }
    data_ = host_.data.to(device_);
    target_ = host_.target.to(device_);
  }
  void forward() { output_ = model_->forward(data_); }
  void compute_loss() { loss_ = torch::nll_loss(output_, target_); }
  void backward() { loss_.backward(); }
  void update() {
    optimizer_->step();
    optimizer_->zero_grad();
  }
  void print_progress() {
    std::fprintf(log_ ? log_ : stdout, "Train Epoch: %d [%5ld/%5ld]\tLoss: %.4f\n", epoch_,
                 static_cast<long>(seen_), static_cast<long>(dataset_size_), loss_.item<float>());
  }
  void on_device() {
    load_batch();
    copy_batch();
  }
  void forwarded() {
    on_device();
    forward();
    compute_loss();
  }

  // Every tensor a round leaves in the trainer's state, model weights and optimizer state aside.
  std::vector<WeakTensor> held() {
    std::vector<torch::Tensor> tensors = {host_.data, host_.target, data_, target_, output_, loss_,
                                          check_weight_, check_grad_, check_momentum_};
    for (const auto& p : model_->parameters()) tensors.push_back(p.grad());
    if (fresh_model_)
      for (const auto& p : fresh_model_->parameters()) tensors.push_back(p);
    std::vector<WeakTensor> weak;
    for (const auto& t : tensors)
      if (t.defined() && !is_static(t)) weak.emplace_back(t, !source_->keeps_memory_of(t));
    return weak;
  }

  // Frees what earlier rounds left (batches, outputs, losses with their graphs, gradients), so
  // that no timed body frees it (README, "What is measured").
  void release() {
    host_ = Batch();
    data_ = target_ = output_ = loss_ = torch::Tensor();
    check_weight_ = check_grad_ = check_momentum_ = rng_before_ = torch::Tensor();
    fresh_optimizer_.reset();
    fresh_model_.reset();
    optimizer_->zero_grad();  // set_to_none, as Python's
  }

  at::Generator generator() const { return at::globalContext().defaultGenerator(device_); }

  static bool finite(const torch::Tensor& t) { return t.defined() && torch::isfinite(t).all().item<bool>(); }

  // A phase's product, for plain tests to check: its shape, whether it is finite, its loss; the
  // checks that prove the work are filled in by the phase (-1 or NaN where it has none).
  static pb_result product(const torch::Tensor& main, bool all_finite, double loss = std::nan("")) {
    pb_result r{};
    r.loss = loss;
    r.finite = all_finite;
    r.ndim = static_cast<int32_t>(std::min<int64_t>(main.dim(), 4));
    for (int32_t d = 0; d < r.ndim; ++d) r.shape[d] = main.size(d);
    r.batch_index = -1;
    r.leftovers = r.on_device = r.matches_host = r.resident = r.nonzero_grads = r.zero_before = r.distinct = -1;
    r.recompute_error = r.update_error = r.moved = std::nan("");
    return r;
  }
  pb_result loss_product(const torch::Tensor& main) {
    const double loss = loss_.item<double>();
    return product(main, finite(main) && std::isfinite(loss), loss);
  }
  static bool all_finite(const std::vector<torch::Tensor>& tensors) {
    for (const auto& t : tensors)
      if (!finite(t)) return false;
    return true;
  }
  std::vector<torch::Tensor> grads() {
    std::vector<torch::Tensor> out;
    for (const auto& p : model_->parameters()) out.push_back(p.grad());
    return out;
  }
  static double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

  // -- products that prove the work (README, "What is measured"); phasebench/train/trainer.py has the same ----
  pb_result loaded() {
    auto r = product(host_.data, finite(host_.data));
    r.batch_index = host_index_;
    return r;
  }
  pb_result copied() {
    auto r = product(data_, finite(data_));
    r.batch_index = host_index_;
    r.on_device = data_.device() == device_ && target_.device() == device_;
    r.matches_host = torch::equal(data_.cpu(), host_.data.cpu()) && torch::equal(target_.cpu(), host_.target.cpu());
    // Nothing was copied: the batch already lived where it was asked for (always on cpu; on cuda when the
    // whole split lives on the device).
    r.resident = data_.data_ptr() == host_.data.data_ptr() && target_.data_ptr() == host_.target.data_ptr();
    return r;
  }
  // The output against the model run again on the same input with the same dropout draws.
  pb_result forwarded_product() {
    auto gen = generator();
    auto swap_state = [&gen](const torch::Tensor& state) {
      std::lock_guard<std::mutex> lock(gen.mutex());  // not held across the forward: dropout takes it
      auto previous = gen.get_state();
      gen.set_state(state);
      return previous;
    };
    const auto after = swap_state(rng_before_);
    torch::Tensor again;
    {
      torch::NoGradGuard no_grad;
      again = model_->forward(data_);
    }
    swap_state(after);
    auto r = product(output_, finite(output_));
    r.recompute_error = max_abs(again - output_.detach());
    return r;
  }
  pb_result backward_product() {
    auto r = product(model_->conv1->weight.grad(), all_finite(grads()));
    r.zero_before = zero_before_;
    r.nonzero_grads = 0;
    for (const auto& g : grads()) r.nonzero_grads += g.defined() && g.ne(0).any().item<bool>();
    return r;
  }
  void capture_update() {
    const auto& weight = model_->conv1->weight;
    check_weight_ = weight.detach().clone();
    check_grad_ = weight.grad().clone();
    auto& state = optimizer_->state();
    const auto found = state.find(weight.unsafeGetTensorImpl());
    check_momentum_ = found == state.end()
        ? torch::Tensor()
        : static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer().clone();
  }
  // conv1.weight against SGD with momentum: buf = momentum * buf + grad (grad on the first step),
  // weight -= lr * buf.
  pb_result updated_product() {
    const auto buffer = check_momentum_.defined() ? check_momentum_ * kMomentum + check_grad_ : check_grad_;
    const auto expected = check_weight_.add(buffer, -kLearningRate);
    const auto weight = model_->conv1->weight.detach();
    auto r = product(weight, all_finite(model_->parameters()));
    r.update_error = max_abs(weight - expected);
    r.moved = max_abs(weight - check_weight_);
    return r;
  }
  pb_result fresh_product() {
    int64_t n = 0;
    bool shared = false, identical = true;
    const auto fresh = fresh_model_->parameters(), live = model_->parameters();
    for (size_t i = 0; i < fresh.size(); ++i) {
      n += fresh[i].numel();
      for (const auto& p : live) shared = shared || p.data_ptr() == fresh[i].data_ptr();
      identical = identical && torch::equal(fresh[i], live[i]);
    }
    auto r = product(torch::empty({n}), all_finite(fresh));
    r.distinct = !shared && !identical;
    return r;
  }

  // The one place that says what each phase prepares (untimed), times, and produces (README,
  // "What is measured"). The Python twin is phasebench/train/trainer.py's PHASES.
  std::vector<Phase> make_phases() {
    return {
        {"data_loading", nullptr, [this] { load_batch(); }, [this] { return loaded(); }},
        {"copy_to_device", [this] { load_batch(); }, [this] { copy_batch(); }, [this] { return copied(); }},
        {"optimizer_init", nullptr,
         [this] {
           fresh_model_ = std::make_shared<Net>(options_.dropout, width_);
           fresh_model_->to(device_);
           fresh_optimizer_ = std::make_unique<torch::optim::SGD>(
               fresh_model_->parameters(), torch::optim::SGDOptions(kLearningRate).momentum(kMomentum));
         },
         [this] { return fresh_product(); }},
        {"forward",
         [this] {
           on_device();
           auto gen = generator();
           std::lock_guard<std::mutex> lock(gen.mutex());
           rng_before_ = gen.get_state();
         },
         [this] { forward(); }, [this] { return forwarded_product(); }},
        {"loss", [this] { on_device(); forward(); }, [this] { compute_loss(); },
         [this] { return loss_product(loss_); }},
        {"backward",
         [this] {
           forwarded();
           zero_before_ = 1;
           for (const auto& g : grads()) zero_before_ &= !g.defined() || !g.ne(0).any().item<bool>();
         },
         [this] { backward(); }, [this] { return backward_product(); }},
        {"param_update", [this] { forwarded(); backward(); capture_update(); }, [this] { update(); },
         [this] { return updated_product(); }},
        {"progress_print", [this] { forwarded(); }, [this] { print_progress(); },
         [this] { return loss_product(loss_); }},
        {"train_step", nullptr,
         [this] {
           step();
           if (++steps_ % kLogInterval == 0) print_progress();
         },
         [this] {
           auto r = loss_product(output_);
           r.batch_index = host_index_;
           return r;
         },
         /*continues_itself=*/true},
        // Not training phases: the C++ example's per-step loss.item() (README, "How our trainers
        // differ from pytorch/examples"), and the empty timed region (timer floor, worker_overhead).
        {"loss_item", [this] { forwarded(); }, [this] { (void)loss_.item<double>(); },
         [this] { return loss_product(loss_); }},
        {"noop", nullptr, [] {}, [] { return product(torch::empty({0}), true); }},
        // Timed once per worker, the first time a step needs it (README, "CUDA graphs and torch.compile").
        {"graph_capture", [this] { graph_warm_up(); }, [this] { capture_graphs(); },
         [this] { return product(graphs_.at(batch_size_).output, all_finite(model_->parameters())); }},
    };
  }

  pb_options options_;
  torch::Device device_;
  int64_t width_, batch_size_;
  std::string loader_kind_;
  std::string step_kind_;  // "eager" or "graphs"
  std::string slow_phase_;  // test-only: the phase the slow knob slows (pb_options.slow_phase, copied)
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
  std::map<int64_t, CapturedStep> graphs_;  // by batch rows
  int64_t warmup_steps_ = 0;
  bool one_shot_done_ = false;  // graph_capture ran for this model
  bool log_due_ = false;        // the training run's whole step: whether this batch logs
};

}  // namespace

// ---- C ABI ---------------------------------------------------------------------------

struct pb_session {
  Trainer trainer;
};

namespace {

thread_local std::string last_error;

// A handle is a token, never a pointer: (generation << 32) | (slot << 1) | 1. Every pb_create takes a
// new generation, so the handle of a destroyed session is refused even when a newer session lives in
// its slot (a freed address, by contrast, is soon handed out again).
struct Slot {
  std::shared_ptr<pb_session> session;  // shared with the calls using it (session_of)
  uint32_t generation = 0;
};
std::mutex live_mutex;
std::vector<Slot> live_sessions;  // guarded by live_mutex
uint32_t last_generation = 0;

constexpr uint64_t kSlotLimit = uint64_t(1) << 31;

pb_session* handle_of(size_t slot, uint32_t generation) {
  return reinterpret_cast<pb_session*>((uint64_t(generation) << 32) | (uint64_t(slot) << 1) | 1);
}

// The slot a handle names, or throws; call with live_mutex held.
Slot& slot_of(const pb_session* handle) {
  if (!handle) throw std::invalid_argument("null session handle");
  const auto token = reinterpret_cast<uint64_t>(handle);
  const uint64_t slot = (token & 0xFFFFFFFFu) >> 1;
  if (!(token & 1) || slot >= live_sessions.size() || !live_sessions[slot].session ||
      live_sessions[slot].generation != token >> 32)
    throw std::invalid_argument("unknown or destroyed session handle");
  return live_sessions[slot];
}

// Runs f and turns every exception into PB_ERROR with its message.
template <class F>
int guarded(F&& f) noexcept {
  try {
    f();
    return PB_OK;
  } catch (const c10::Error& e) {
    last_error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown C++ exception";
  }
  return PB_ERROR;
}

// The session a handle names, held for one call: taken under the lock, which is released before the call
// does its work, so that calls on different sessions never wait for each other and pb_destroy can see that a
// session is in use (it refuses, "session busy") instead of freeing it under a running call.
std::shared_ptr<pb_session> session_of(pb_session* session) {
  std::lock_guard<std::mutex> lock(live_mutex);
  return slot_of(session).session;
}

template <class T>
void require(T* pointer, const char* name) {
  if (!pointer) throw std::invalid_argument(std::string("null ") + name);
}

void copy_out(const std::string& text, char* buffer, int64_t capacity) {
  require(buffer, "buffer");
  if (static_cast<int64_t>(text.size()) + 1 > capacity)
    throw std::length_error("buffer of " + std::to_string(capacity) + " bytes, " +
                            std::to_string(text.size() + 1) + " needed");
  std::memcpy(buffer, text.c_str(), text.size() + 1);
}

}  // namespace

extern "C" {

const char* pb_last_error(void) { return last_error.c_str(); }

int pb_abi_version(int32_t* version) {
  return guarded([&] {
    require(version, "version output");
    *version = PB_ABI_VERSION;
  });
}

int pb_create(const pb_options* options, pb_session** out) {
  return guarded([&] {
    require(options, "options");
    require(out, "output handle");
    if (options->struct_size != static_cast<int64_t>(sizeof(pb_options)))
      throw std::invalid_argument("pb_options of " + std::to_string(options->struct_size) +
                                  " bytes, this library's has " + std::to_string(sizeof(pb_options)) +
                                  ": the bindings and the library come from different sources");
    require(options->data_root, "data_root");
    *out = nullptr;
    auto session = std::shared_ptr<pb_session>(new pb_session{Trainer(*options)});
    std::lock_guard<std::mutex> lock(live_mutex);
    auto slot = std::find_if(live_sessions.begin(), live_sessions.end(),
                             [](const Slot& s) { return !s.session; });
    if (slot == live_sessions.end()) {
      if (live_sessions.size() >= kSlotLimit) throw std::length_error("too many live sessions");
      slot = live_sessions.emplace(live_sessions.end());
    }
    slot->session = std::move(session);
    slot->generation = ++last_generation;  // wraps after 2^32 sessions, far beyond any run
    *out = handle_of(static_cast<size_t>(slot - live_sessions.begin()), slot->generation);
  });
}

int pb_destroy(pb_session* session) {
  return guarded([&] {
    std::shared_ptr<pb_session> destroyed;  // freed last, after the lock is released
    std::lock_guard<std::mutex> lock(live_mutex);
    auto& slot = slot_of(session);
    // Every other reference is a call's, taken under this lock: none can start while it is held.
    if (slot.session.use_count() > 1)
      throw std::runtime_error("session busy: another call is using it; destroy it once that call has returned");
    destroyed = std::move(slot.session);
  });
}

namespace {
// The phases pb_phase_names lists: the training phases, not noop and loss_item.
bool listed(const Phase& phase) { return phase.name != "noop" && phase.name != "loss_item"; }
}  // namespace

int pb_phase_names(pb_session* session, char* buffer, int64_t capacity) {
  return guarded([&] {
    std::string names;
    const auto held = session_of(session);
    for (const auto& phase : held->trainer.phases())
      if (listed(phase)) names += (names.empty() ? "" : ",") + phase.name;
    copy_out(names, buffer, capacity);
  });
}

int pb_threads(pb_session* session, int32_t* threads) {
  return guarded([&] {
    session_of(session);
    require(threads, "thread count output");
    *threads = torch::get_num_threads();
  });
}

int pb_run_phase(pb_session* session, const char* phase, int64_t* duration_ns, pb_result* result) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(phase, "phase name");
    require(duration_ns, "duration output");
    *duration_ns = trainer.run_phase(phase, result).ns;
  });
}

int pb_timer_floor(pb_session* session, int64_t* duration_ns) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(duration_ns, "duration output");
    *duration_ns = trainer.timer_floor();
  });
}

int pb_param_count(pb_session* session, int64_t* count) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(count, "count output");
    *count = 0;
    for (const auto& p : trainer.parameters()) *count += p.numel();
  });
}

int pb_param_layout(pb_session* session, char* buffer, int64_t capacity) {
  return guarded([&] { copy_out(session_of(session)->trainer.layout(), buffer, capacity); });
}

namespace {
// Checks the caller's buffer length against the model before touching either.
std::vector<torch::Tensor> checked_params(std::vector<torch::Tensor> params, const float* values, int64_t count) {
  require(values, "parameter buffer");
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  if (count != total)
    throw std::length_error("parameter buffer holds " + std::to_string(count) +
                            " floats, the model has " + std::to_string(total));
  return params;
}
std::vector<torch::Tensor> params_for(pb_session* session, const float* values, int64_t count) {
  return checked_params(session_of(session)->trainer.parameters(), values, count);
}
void copy_params_out(const std::vector<torch::Tensor>& params, float* values) {
  int64_t offset = 0;
  for (const auto& p : params) {
    auto flat = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    std::memcpy(values + offset, flat.data_ptr<float>(), flat.numel() * sizeof(float));
    offset += flat.numel();
  }
}
}  // namespace

int pb_get_params(pb_session* session, float* values, int64_t count) {
  return guarded([&] { copy_params_out(params_for(session, values, count), values); });
}

int pb_set_params(pb_session* session, const float* values, int64_t count) {
  return guarded([&] {
    torch::NoGradGuard no_grad;
    int64_t offset = 0;
    for (auto& p : params_for(session, values, count)) {
      auto source = torch::from_blob(const_cast<float*>(values) + offset, p.sizes(), torch::kFloat32);
      p.copy_(source);
      offset += p.numel();
    }
  });
}

int pb_epoch_batches(pb_session* session, int64_t* count) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(count, "count output");
    *count = trainer.epoch_batches();
  });
}

int pb_get_batch(pb_session* session, int64_t index, float* images, int64_t* labels, int64_t capacity,
                 int64_t* batch_size) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(images, "image buffer");
    require(labels, "label buffer");
    require(batch_size, "batch size output");
    auto batch = trainer.batch_at(index);
    const int64_t n = batch.data.size(0);
    if (n > capacity)
      throw std::length_error("batch of " + std::to_string(n) + " images, room for " + std::to_string(capacity));
    auto data = batch.data.to(torch::kFloat32).contiguous();
    auto target = batch.target.to(torch::kInt64).contiguous();
    std::memcpy(images, data.data_ptr<float>(), data.numel() * sizeof(float));
    std::memcpy(labels, target.data_ptr<int64_t>(), n * sizeof(int64_t));
    *batch_size = n;
  });
}

int pb_train_steps(pb_session* session, int64_t steps, double* losses) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(losses, "loss buffer");
    for (int64_t i = 0; i < steps; ++i) {
      trainer.advance();
      losses[i] = trainer.last_loss();
    }
  });
}

int pb_evaluate(pb_session* session, double* accuracy, double* mean_loss) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(accuracy, "accuracy output");
    require(mean_loss, "loss output");
    std::tie(*accuracy, *mean_loss) = trainer.evaluate();
  });
}

int pb_peak_device_memory(pb_session* session, int64_t* bytes) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(bytes, "bytes output");
    *bytes = trainer.peak_device_memory();
  });
}

int pb_ensemble_create(pb_session* session, int64_t models) {
  return guarded([&] { session_of(session)->trainer.start_ensemble(models); });
}

int pb_ensemble_step(pb_session* session, int64_t* duration_ns, int64_t* cpu_ns, int64_t* thread_cpu_ns,
                     double* losses, int64_t capacity) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(duration_ns, "duration output");
    require(cpu_ns, "CPU time output");
    require(thread_cpu_ns, "thread CPU time output");
    require(losses, "loss buffer");
    if (capacity < trainer.ensemble_size())
      throw std::length_error("loss buffer of " + std::to_string(capacity) + ", " +
                              std::to_string(trainer.ensemble_size()) + " needed");
    std::vector<double> values;
    const Timing timing = trainer.ensemble_step(values);
    std::copy(values.begin(), values.end(), losses);
    *duration_ns = timing.ns;
    *cpu_ns = timing.cpu_ns;
    *thread_cpu_ns = timing.thread_cpu_ns;
  });
}

int pb_ensemble_get_params(pb_session* session, int64_t member, float* values, int64_t count) {
  return guarded([&] {
    copy_params_out(checked_params(session_of(session)->trainer.ensemble_parameters(member), values, count), values);
  });
}

int pb_ensemble_destroy(pb_session* session) {
  return guarded([&] { session_of(session)->trainer.stop_ensemble(); });
}

int pb_train(pb_session* session, int32_t epochs, int32_t synchronize, int64_t max_steps, int64_t* phase_ns,
             int64_t phase_capacity, int64_t* steps, int64_t* loop_ns, int64_t* cpu_ns) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(phase_ns, "phase time buffer");
    require(steps, "step count output");
    require(loop_ns, "loop time output");
    require(cpu_ns, "CPU time output");
    const auto& phases = trainer.phases();
    const auto n = std::count_if(phases.begin(), phases.end(), listed);
    if (phase_capacity < n)
      throw std::length_error("phase time buffer of " + std::to_string(phase_capacity) + ", " +
                              std::to_string(n) + " needed");
    std::vector<int64_t> totals(phases.size(), 0);
    *steps = *cpu_ns = 0;
    *loop_ns = trainer.train(epochs, synchronize != 0, max_steps, totals, *steps, *cpu_ns);
    for (size_t i = 0; i < phases.size(); ++i)  // phase_ns follows pb_phase_names
      if (listed(phases[i])) *phase_ns++ = totals[i];
  });
}

}  // extern "C"
