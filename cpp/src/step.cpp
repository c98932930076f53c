// step.cpp: the step interface's default behaviour and the eager step, which runs forward, loss, backward and
// update one after another, as the published program does. The CUDA-graph step is in graph_step.cpp.
#include "trainer.h"

#include <stdexcept>
#include <string>

namespace phasebench {

void Step::copy_in(const Batch& host, const torch::Device& device, torch::Tensor& data, torch::Tensor& target) {
  data = host.data.to(device);
  target = host.target.to(device);
}

void eager_step(Trainer& trainer) {
  trainer.forward();
  trainer.compute_loss();
  trainer.backward();
  if (trainer.distributed()) trainer.grad_sync();  // data parallel: dist-mnist.cpp's all-reduce after backward
  trainer.update();
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

std::unique_ptr<Step> make_step(const char* kind, const torch::Device& device) {
  const std::string name = kind ? kind : "eager";
  if (name == "compile" || name == "compile-cudagraphs")
    throw std::invalid_argument("step '" + name + "' is torch.compile, which LibTorch does not have");
  if (name == "eager") return std::make_unique<EagerStep>();
  if (name == "graphs") return make_graph_step(device);
  throw std::invalid_argument("unknown step '" + name + "': eager or graphs");
}

}  // namespace phasebench
