// phasebench.cpp: the pytorch/examples C++ MNIST program, cut into the timed phases of
// SPEC §2, behind the C ABI of phasebench.h. It reads like examples/cpp/mnist/mnist.cpp:
// the same Net, the same loader, the same optimizer and log line.
#include "phasebench.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kBatchSize = 64;
constexpr int64_t kLogInterval = 10;
constexpr int64_t kImageSide = 28;

// The network of examples/cpp/mnist, declared once.
struct Net : torch::nn::Module {
  explicit Net(double dropout)
      : conv1(torch::nn::Conv2dOptions(1, 10, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(10, 20, /*kernel_size=*/5)),
        conv2_drop(torch::nn::Dropout2dOptions(dropout)),
        fc1(320, 50),
        fc2(50, 10),
        dropout(dropout) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 320});
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
};

// LibTorch's MNIST reader checks magic numbers and sizes but silently accepts a truncated
// image file, and it allocates before it looks: check each file's header against its size.
// Same checks, order and messages as bench/data.py's check_split.
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
  using Mode = torch::data::datasets::MNIST::Mode;
  return torch::data::datasets::MNIST(root, train ? Mode::kTrain : Mode::kTest);
}

// The idiomatic LibTorch loader (SPEC §1): Normalize, Stack, sequential batches of 64.
auto make_loader(const torch::data::datasets::MNIST& mnist) {
  return torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      torch::data::datasets::MNIST(mnist)
          .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
          .map(torch::data::transforms::Stack<>()),
      kBatchSize);
}
using Loader = decltype(make_loader(std::declval<torch::data::datasets::MNIST>()));
using Batch = torch::data::Example<>;

struct Phase {
  std::string name;
  std::function<void()> prepare;  // untimed
  std::function<void()> body;     // timed
  std::function<pb_result()> result;
};

class Trainer {
 public:
  explicit Trainer(const pb_options& options)
      : options_(options),
        device_(options.device ? options.device : "cpu"),
        slow_phase_(options.slow_phase ? options.slow_phase : ""),
        mnist_(load_mnist(options.data_root ? options.data_root : "", /*train=*/true)),
        loader_(make_loader(mnist_)) {
    if (device_.is_cuda() && !torch::cuda::is_available())
      throw std::runtime_error("device " + device_.str() + " requested but CUDA is not available");
    if (options.threads > 0) torch::set_num_threads(options.threads);
    torch::manual_seed(options.seed);
    if (options.log_path) {
      log_ = std::fopen(options.log_path, "w");
      if (!log_) throw std::runtime_error(std::string(options.log_path) + ": cannot open log file");
    }
    dataset_size_ = mnist_.size().value();
    build_model();
    phases_ = make_phases();
  }
  ~Trainer() {
    if (log_) std::fclose(log_);
  }

  const std::vector<Phase>& phases() const { return phases_; }

  int64_t run_phase(const std::string& name, pb_result* result) {
    for (const auto& phase : phases_) {
      if (phase.name != name) continue;
      if (phase.prepare) phase.prepare();
      const int64_t ns = timed(phase.body, name);
      if (result) *result = phase.result();
      return ns;
    }
    throw std::invalid_argument("unknown phase '" + name + "'");
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

  int64_t epoch_batches() { return (dataset_size_ + kBatchSize - 1) / kBatchSize; }

  Batch batch_at(int64_t index) {
    auto loader = make_loader(mnist_);
    int64_t i = 0;
    for (auto& batch : *loader)
      if (i++ == index) return batch;
    throw std::out_of_range("batch " + std::to_string(index) + " of an epoch of " +
                            std::to_string(i) + " batches");
  }

  // One training step, without its log line.
  void step() {
    host_ = next_batch();
    copy_batch();
    forward();
    compute_loss();
    backward();
    update();
  }
  double last_loss() { return loss_.item<double>(); }

  std::pair<double, double> evaluate() {
    if (!test_) test_.emplace(load_mnist(options_.data_root, /*train=*/false));
    torch::NoGradGuard no_grad;
    model_->eval();
    double loss_sum = 0;
    int64_t correct = 0;
    auto loader = make_loader(*test_);
    for (const auto& batch : *loader) {
      auto data = batch.data.to(device_), targets = batch.target.to(device_);
      auto output = model_->forward(data);
      loss_sum += torch::nll_loss(output, targets, {}, torch::Reduction::Sum).item<double>();
      correct += output.argmax(1).eq(targets).sum().item<int64_t>();
    }
    model_->train();
    const double n = test_->size().value();
    return {100.0 * correct / n, loss_sum / n};
  }

  // The published run: each phase's total, or with synchronize == 0 only the whole loop.
  int64_t train(int32_t epochs, bool synchronize, std::vector<int64_t>& phase_ns, int64_t& steps) {
    auto index_of = [&](const char* name) {
      for (size_t i = 0; i < phases_.size(); ++i)
        if (phases_[i].name == name) return i;
      throw std::logic_error(std::string("no phase ") + name);
    };
    auto time_into = [&](const char* name, const std::function<void()>& body) {
      if (synchronize)
        phase_ns[index_of(name)] += timed(body, name);
      else
        body();
    };
    sync();
    const auto start = std::chrono::steady_clock::now();
    time_into("optimizer_init", [&] { build_model(); });
    for (int32_t epoch = 1; epoch <= epochs; ++epoch) {
      epoch_ = epoch;
      auto it = loader_->begin();
      bool more = true;
      for (int64_t batch_idx = 0;; ++batch_idx) {
        time_into("data_loading", [&] {
          more = it != loader_->end();
          if (more) {
            host_ = *it;
            ++it;
          }
        });
        if (!more) break;
        time_into("copy_to_device", [&] { copy_batch(); });
        time_into("forward", [&] { forward(); });
        time_into("loss", [&] { compute_loss(); });
        time_into("backward", [&] { backward(); });
        time_into("param_update", [&] { update(); });
        seen_ = (batch_idx + 1) * kBatchSize;
        if (batch_idx % kLogInterval == 0) time_into("progress_print", [&] { print_progress(); });
        ++steps;
      }
    }
    sync();
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
        .count();
  }

 private:
  void sync() {
    if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  }

  // SPEC §3: synchronize, clock, body, synchronize, clock.
  int64_t timed(const std::function<void()>& body, const std::string& name) {
    sync();
    const auto start = std::chrono::steady_clock::now();
    body();
    if (name == slow_phase_) std::this_thread::sleep_for(std::chrono::nanoseconds(options_.slow_ns));
    sync();
    const auto end = std::chrono::steady_clock::now();
    return std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
  }

  void build_model() {
    model_ = std::make_shared<Net>(options_.dropout);
    model_->to(device_);
    optimizer_ = std::make_unique<torch::optim::SGD>(
        model_->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
  }

  // The next batch, starting a new epoch when the last one ends.
  Batch next_batch() {
    if (!batches_ || *batches_ == loader_->end()) {
      batches_.emplace(loader_->begin());
      ++epoch_;
      seen_ = 0;
    }
    Batch batch = **batches_;
    ++*batches_;
    seen_ += batch.data.size(0);
    return batch;
  }

  void copy_batch() {
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

  static bool finite(const torch::Tensor& t) { return t.defined() && torch::isfinite(t).all().item<bool>(); }

  // A phase's product, for plain tests to check: its shape, whether it is finite, its loss.
  static pb_result product(const torch::Tensor& main, bool all_finite, double loss = std::nan("")) {
    pb_result r{};
    r.loss = loss;
    r.finite = all_finite;
    r.ndim = static_cast<int32_t>(std::min<int64_t>(main.dim(), 4));
    for (int32_t d = 0; d < r.ndim; ++d) r.shape[d] = main.size(d);
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

  // The one place that says what each phase prepares (untimed), times, and produces (SPEC §2).
  // The Python twin is bench/trainer.py's PHASES.
  std::vector<Phase> make_phases() {
    auto on_device = [this] {
      host_ = next_batch();
      copy_batch();
    };
    auto forwarded = [this, on_device] {
      on_device();
      forward();
      compute_loss();
    };
    return {
        {"data_loading", nullptr, [this] { host_ = next_batch(); },
         [this] { return product(host_.data, finite(host_.data)); }},
        {"copy_to_device", [this] { host_ = next_batch(); }, [this] { copy_batch(); },
         [this] { return product(data_, finite(data_)); }},
        {"optimizer_init", [this] { fresh_model_.reset(); fresh_optimizer_.reset(); },
         [this] {
           fresh_model_ = std::make_shared<Net>(options_.dropout);
           fresh_model_->to(device_);
           fresh_optimizer_ = std::make_unique<torch::optim::SGD>(
               fresh_model_->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
         },
         [this] {
           int64_t n = 0;
           for (const auto& p : fresh_model_->parameters()) n += p.numel();
           return product(torch::empty({n}), all_finite(fresh_model_->parameters()));
         }},
        {"forward", [this, on_device] { on_device(); optimizer_->zero_grad(); }, [this] { forward(); },
         [this] { return product(output_, finite(output_)); }},
        {"loss", [this, on_device] { on_device(); optimizer_->zero_grad(); forward(); },
         [this] { compute_loss(); }, [this] { return loss_product(loss_); }},
        {"backward", [this, forwarded] { optimizer_->zero_grad(); forwarded(); }, [this] { backward(); },
         [this] { return product(model_->conv1->weight.grad(), all_finite(grads())); }},
        {"param_update", [this, forwarded] { forwarded(); backward(); }, [this] { update(); },
         [this] { return product(model_->conv1->weight, all_finite(model_->parameters())); }},
        {"progress_print", forwarded, [this] { print_progress(); }, [this] { return loss_product(loss_); }},
        {"train_step", nullptr,
         [this] {
           step();
           if (++steps_ % kLogInterval == 0) print_progress();
         },
         [this] { return loss_product(output_); }},
        // worker_overhead: the timed region with nothing in it. Not a training phase.
        {"noop", nullptr, [] {}, [] { return product(torch::empty({0}), true); }},
    };
  }

  pb_options options_;
  torch::Device device_;
  std::string slow_phase_;
  torch::data::datasets::MNIST mnist_;
  std::optional<torch::data::datasets::MNIST> test_;
  Loader loader_;
  std::optional<torch::data::Iterator<Batch>> batches_;
  std::shared_ptr<Net> model_, fresh_model_;
  std::unique_ptr<torch::optim::SGD> optimizer_, fresh_optimizer_;
  std::vector<Phase> phases_;
  Batch host_;
  torch::Tensor data_, target_, output_, loss_;
  FILE* log_ = nullptr;
  int32_t epoch_ = 0;
  int64_t seen_ = 0, steps_ = 0, dataset_size_ = 0;
};

}  // namespace

// ---- C ABI ---------------------------------------------------------------------------

struct pb_session {
  Trainer trainer;
};

namespace {

thread_local std::string last_error;
std::mutex live_mutex;
std::set<const pb_session*> live_sessions;  // so that a destroyed handle is refused, not used

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

Trainer& trainer_of(pb_session* session) {
  std::lock_guard<std::mutex> lock(live_mutex);
  if (!session) throw std::invalid_argument("null session handle");
  if (!live_sessions.count(session))
    throw std::invalid_argument("unknown or destroyed session handle");
  return session->trainer;
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

int pb_create(const pb_options* options, pb_session** out) {
  return guarded([&] {
    require(options, "options");
    require(out, "output handle");
    require(options->data_root, "data_root");
    *out = nullptr;
    auto* session = new pb_session{Trainer(*options)};
    std::lock_guard<std::mutex> lock(live_mutex);
    live_sessions.insert(session);
    *out = session;
  });
}

int pb_destroy(pb_session* session) {
  return guarded([&] {
    trainer_of(session);
    {
      std::lock_guard<std::mutex> lock(live_mutex);
      live_sessions.erase(session);
    }
    delete session;
  });
}

namespace {
// The phases pb_phase_names lists: all but worker_overhead's empty one.
bool listed(const Phase& phase) { return phase.name != "noop"; }
}  // namespace

int pb_phase_names(pb_session* session, char* buffer, int64_t capacity) {
  return guarded([&] {
    std::string names;
    for (const auto& phase : trainer_of(session).phases())
      if (listed(phase)) names += (names.empty() ? "" : ",") + phase.name;
    copy_out(names, buffer, capacity);
  });
}

int pb_threads(pb_session* session, int32_t* threads) {
  return guarded([&] {
    trainer_of(session);
    require(threads, "thread count output");
    *threads = torch::get_num_threads();
  });
}

int pb_run_phase(pb_session* session, const char* phase, int64_t* duration_ns, pb_result* result) {
  return guarded([&] {
    auto& trainer = trainer_of(session);
    require(phase, "phase name");
    require(duration_ns, "duration output");
    *duration_ns = trainer.run_phase(phase, result);
  });
}

int pb_param_count(pb_session* session, int64_t* count) {
  return guarded([&] {
    auto& trainer = trainer_of(session);
    require(count, "count output");
    *count = 0;
    for (const auto& p : trainer.parameters()) *count += p.numel();
  });
}

int pb_param_layout(pb_session* session, char* buffer, int64_t capacity) {
  return guarded([&] { copy_out(trainer_of(session).layout(), buffer, capacity); });
}

namespace {
// Checks the caller's buffer length against the model before touching either.
std::vector<torch::Tensor> params_for(pb_session* session, const float* values, int64_t count) {
  auto params = trainer_of(session).parameters();
  require(values, "parameter buffer");
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  if (count != total)
    throw std::length_error("parameter buffer holds " + std::to_string(count) +
                            " floats, the model has " + std::to_string(total));
  return params;
}
}  // namespace

int pb_get_params(pb_session* session, float* values, int64_t count) {
  return guarded([&] {
    int64_t offset = 0;
    for (const auto& p : params_for(session, values, count)) {
      auto flat = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
      std::memcpy(values + offset, flat.data_ptr<float>(), flat.numel() * sizeof(float));
      offset += flat.numel();
    }
  });
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
    auto& trainer = trainer_of(session);
    require(count, "count output");
    *count = trainer.epoch_batches();
  });
}

int pb_get_batch(pb_session* session, int64_t index, float* images, int64_t* labels, int64_t capacity,
                 int64_t* batch_size) {
  return guarded([&] {
    auto& trainer = trainer_of(session);
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
    auto& trainer = trainer_of(session);
    require(losses, "loss buffer");
    for (int64_t i = 0; i < steps; ++i) {
      trainer.step();
      losses[i] = trainer.last_loss();
    }
  });
}

int pb_evaluate(pb_session* session, double* accuracy, double* mean_loss) {
  return guarded([&] {
    auto& trainer = trainer_of(session);
    require(accuracy, "accuracy output");
    require(mean_loss, "loss output");
    std::tie(*accuracy, *mean_loss) = trainer.evaluate();
  });
}

int pb_train(pb_session* session, int32_t epochs, int32_t synchronize, int64_t* phase_ns,
             int64_t phase_capacity, int64_t* steps, int64_t* loop_ns) {
  return guarded([&] {
    auto& trainer = trainer_of(session);
    require(phase_ns, "phase time buffer");
    require(steps, "step count output");
    require(loop_ns, "loop time output");
    const auto& phases = trainer.phases();
    const auto n = std::count_if(phases.begin(), phases.end(), listed);
    if (phase_capacity < n)
      throw std::length_error("phase time buffer of " + std::to_string(phase_capacity) + ", " +
                              std::to_string(n) + " needed");
    std::vector<int64_t> totals(phases.size(), 0);
    *steps = 0;
    *loop_ns = trainer.train(epochs, synchronize != 0, totals, *steps);
    for (size_t i = 0; i < phases.size(); ++i)  // phase_ns follows pb_phase_names
      if (listed(phases[i])) *phase_ns++ = totals[i];
  });
}

}  // extern "C"
