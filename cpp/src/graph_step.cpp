// graph_step.cpp: the CUDA-graph step (cpp-graphs; docs/gpu.md#cuda-graphs-and-torchcompile): after warm-up
// steps, the whole step captured into one CUDA graph per batch shape, then replayed. Its twin is
// phasebench/train/steps.py's GraphStep, which says why each detail.
#include "trainer.h"

// CUDA graphs need the CUDA runtime's headers, which a CPU-only machine may lack: phasebench/worker/build.py
// defines PHASEBENCH_CUDA_GRAPHS where it found them, and without it a "graphs" trainer is refused at creation.
// This is the only file that tests it.
#if PHASEBENCH_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <map>
#include <mutex>
#include <set>
#include <stdexcept>

namespace phasebench {

#if PHASEBENCH_CUDA_GRAPHS

namespace {

// Eager steps before a capture, on a side stream, as torch's whole-network capture recipe does: the first
// creates SGD's momentum buffers, the later ones settle lazy initializations (cuBLAS workspaces, cuDNN plans).
// They are the run's first real batches: they train and count (phasebench/train/trainer.py's GRAPH_WARMUP_STEPS).
constexpr int64_t kGraphWarmupSteps = 3;

// One batch shape's CUDA graph of a whole training step and its static tensors: each batch is copied into
// data and target, and a replay leaves its output and loss in output and loss.
struct CapturedStep {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  torch::Tensor data, target, output, loss;
  bool holds(const torch::Tensor& t) const {
    for (const auto* own : {&data, &target, &output, &loss})
      if (t.unsafeGetTensorImpl() == own->unsafeGetTensorImpl()) return true;
    return false;
  }
};

// A side stream of the trainer's device for the duration of one piece of work.
void on_side_stream(const torch::Device& device, const std::function<void()>& work) {
  c10::cuda::CUDAStreamGuard guard(at::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index()));
  work();
}

class GraphStep : public Step {
 public:
  const char* name() const override { return "graphs"; }
  bool whole() const override { return true; }
  const char* one_shot() const override { return "graph_capture"; }
  bool warmed_up() const override { return warmup_steps_ >= kGraphWarmupSteps; }
  bool ready() const override { return !graphs_.empty(); }

  // One CUDA graph per batch shape, each capturing forward, loss, backward and SGD's step. Capture runs
  // nothing: the model does not train here. A shape no warm-up step ran is warmed up first.
  void run_one_shot(Trainer& trainer) override {
    const auto& device = trainer.device();
    auto& model = trainer.model();
    for (const int64_t rows : trainer.batch_shapes()) {
      if (!warmed_shapes_.contains(rows)) warm_up_shape(trainer, rows);
      CapturedStep captured;
      captured.data = torch::zeros({rows, 1, kImageSide, kImageSide}, torch::TensorOptions(device));
      captured.target = torch::zeros({rows}, torch::TensorOptions(device).dtype(torch::kInt64));
      captured.graph = std::make_unique<at::cuda::CUDAGraph>();
      model.zero_grad();  // set_to_none: the capture allocates this graph's own gradients
      sync(device);
      on_side_stream(device, [&] {
        captured.graph->capture_begin();  // a private memory pool: the graphs replay in no fixed order
        captured.output = model.forward(captured.data);
        captured.loss = torch::nll_loss(captured.output, captured.target);
        captured.loss.backward();
        model.optimizer().step();
        captured.graph->capture_end();
      });
      sync(device);
      graphs_.emplace(rows, std::move(captured));
    }
    model.zero_grad();
    full_rows_ = trainer.batch_shapes().front();
  }
  torch::Tensor one_shot_output() const override { return graphs_.at(full_rows_).output; }

  // Once captured, into the static buffers of the graph of this batch's shape.
  void copy_in(const Batch& host, const torch::Device& device, StepTensors& step) override {
    if (graphs_.empty()) return Step::copy_in(host, device, step);
    auto& captured = graphs_.at(host.data.size(0));
    captured.data.copy_(host.data);
    captured.target.copy_(host.target);
    step.data = captured.data;
    step.target = captured.target;
  }

  // A replay once the graphs are captured; before that, a warm-up step on a side stream. A full
  // synchronization on each side of the side stream's work stands in for the recipe's stream waits: it is
  // stronger, and it runs only in the few warm-up steps.
  void run(Trainer& trainer) override {
    if (!graphs_.empty()) {
      auto& captured = graphs_.at(trainer.tensors().data.size(0));
      captured.graph->replay();
      trainer.stepped(captured.output, captured.loss);
      return;
    }
    sync(trainer.device());
    on_side_stream(trainer.device(), [&] { eager_step(trainer); });
    sync(trainer.device());
    ++warmup_steps_;
    warmed_shapes_.insert(trainer.tensors().data.size(0));
  }

  bool holds(const torch::Tensor& t) const override {
    for (const auto& [rows, captured] : graphs_)
      if (captured.holds(t)) return true;
    return false;
  }
  void reset() override {  // a new model needs its own capture
    graphs_.clear();
    warmup_steps_ = 0;
    warmed_shapes_.clear();
  }

 private:
  // Forward, loss and backward of a batch of `rows` zeros on a side stream: the capture recipe runs every shape
  // it captures eagerly on a side stream first, and the warm-up steps run the shapes of their batches only (full
  // ones), never the remainder that ends an epoch. It trains nothing: no optimizer step (SGD's work does not
  // depend on the batch's rows, and the warm-up steps ran it), the gradients are unset again, and the device's
  // generator is put back, so the steps draw the dropout masks they would have drawn. As steps.py's
  // GraphStep.warm_up_shape.
  void warm_up_shape(Trainer& trainer, int64_t rows) {
    const auto& device = trainer.device();
    auto& model = trainer.model();
    const auto data = torch::zeros({rows, 1, kImageSide, kImageSide}, torch::TensorOptions(device));
    const auto target = torch::zeros({rows}, torch::TensorOptions(device).dtype(torch::kInt64));
    auto generator = at::globalContext().defaultGenerator(device);
    torch::Tensor generator_state;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());  // not held across the forward: dropout takes it
      generator_state = generator.get_state();
    }
    model.zero_grad();
    sync(device);
    on_side_stream(device, [&] { torch::nll_loss(model.forward(data), target).backward(); });
    sync(device);
    model.zero_grad();
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(generator_state);
    }
    warmed_shapes_.insert(rows);
  }

  std::map<int64_t, CapturedStep> graphs_;  // by batch rows
  int64_t warmup_steps_ = 0;
  std::set<int64_t> warmed_shapes_;  // the batch rows a warm-up ran on a side stream, for this model
  int64_t full_rows_ = 0;
};

}  // namespace

#endif

std::unique_ptr<Step> make_graph_step(const torch::Device& device) {
  if (!device.is_cuda())
    throw std::invalid_argument("step 'graphs' needs a cuda device (CUDA graphs), not " + device.str());
#if PHASEBENCH_CUDA_GRAPHS
  return std::make_unique<GraphStep>();
#else
  throw std::runtime_error("step 'graphs': this library was built without the CUDA runtime headers that "
                           "CUDA graphs need (phasebench/worker/build.py found none; see docs/gpu.md#cuda-graphs-and-torchcompile)");
#endif
}

}  // namespace phasebench
