// step.h: one training step. StepTensors holds the step's batch on the device and what the step made of it, with
// the pieces the published loop runs in turn; a Step strategy says how a trainer runs them (step.cpp: the eager step
// of the published program; graph_step.cpp: the whole step captured into CUDA graphs and replayed;
// docs/gpu.md#cuda-graphs-and-torchcompile). The trainer asks its step what it needs; it never tests which it has.
#pragma once

#include "data.h"
#include "model.h"

#include <torch/torch.h>

#include <memory>

namespace phasebench {

// The published loop's locals, kept between the phases that time the step's pieces apart.
struct StepTensors {
  torch::Tensor data, target, output, loss;

  void forward(Model& model) { output = model.forward(data); }
  void compute_loss() { loss = torch::nll_loss(output, target); }
  void backward() { loss.backward(); }
  void clear() { data = target = output = loss = torch::Tensor(); }
};

class Trainer;

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
  virtual void copy_in(const Batch& host, const torch::Device& device, StepTensors& step);
  // One step on the batch on the device, leaving its output and loss in the trainer's StepTensors.
  virtual void run(Trainer& trainer) = 0;
  // Whether t is the step's for good (a graph's static tensor): never a round's leftover.
  virtual bool holds(const torch::Tensor&) const { return false; }
  // A new model: what the step made for the last one is dropped.
  virtual void reset() {}
};

// "eager" (nullptr) or "graphs" for a trainer on this device; any other is refused with the reason.
std::unique_ptr<Step> make_step(const std::string& kind, const torch::Device& device);
std::unique_ptr<Step> make_graph_step(const torch::Device& device);  // graph_step.cpp
// Forward, loss, backward (and, data parallel, the gradients' all-reduce) and update, as the published program
// runs them: the eager step.
void eager_step(Trainer& trainer);

}  // namespace phasebench
