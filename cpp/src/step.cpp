// step.cpp: the step interface's default behaviour and the eager step, which runs forward, loss, backward and
// update one after another, as the published program does. The CUDA-graph step is in graph_step.cpp.
#include "trainer.h"

#include <stdexcept>
#include <string>

namespace phasebench {

void Step::copy_in(const Batch& host, const torch::Device& device, StepTensors& step) {
  step.data = host.data.to(device);
  step.target = host.target.to(device);
}

void eager_step(Trainer& trainer) {
  auto& model = trainer.model();
  auto& step = trainer.tensors();
  step.forward(model);
  step.compute_loss();
  step.backward();
  if (auto* group = trainer.group()) group->average_gradients(model);  // data parallel: dist-mnist.cpp's all-reduce
  model.update();
}

namespace {

// The published step: its pieces are phases of their own, and it has no one-shot.
class EagerStep : public Step {
 public:
  const char* name() const override { return "eager"; }
  bool whole() const override { return false; }
  void run(Trainer& trainer) override { eager_step(trainer); }
};

}  // namespace

std::unique_ptr<Step> make_step(const std::string& name, const torch::Device& device) {
  if (name == "compile" || name == "compile-cudagraphs")
    throw std::invalid_argument("step '" + name + "' is torch.compile, which LibTorch does not have");
  if (name == "eager") return std::make_unique<EagerStep>();
  if (name == "graphs") return make_graph_step(device);
  throw std::invalid_argument("unknown step '" + name + "': eager or graphs");
}

}  // namespace phasebench
