// ensemble.h: ensembles (ensemble.cpp; docs/gpu.md#concurrent-jobs-and-ensembles).
#pragma once

#include "model.h"

#include <torch/torch.h>

#include <vector>

namespace phasebench {

// `models` independent Nets, member k (from 1) built right after torch::manual_seed(k), each with its own SGD.
class Ensemble {
 public:
  // Refuses a size outside 1 to 4096 (phasebench/train/ensemble.py's MAX_MODELS), before anything is freed or built.
  static void check_size(int64_t models);
  Ensemble(int64_t models, double dropout, int64_t width, const torch::Device& device);

  int64_t size() const { return static_cast<int64_t>(members_.size()); }
  // Before a timed step: the last step's losses dropped, room for this one's.
  void prepare_step();
  // One step of every member on the batch, one member after another: forward, loss, backward, update.
  void step(const torch::Tensor& data, const torch::Tensor& target);
  // The last step's losses, one per member.
  std::vector<double> losses() const;
  std::vector<torch::Tensor> parameters(int64_t member) const;

 private:
  std::vector<Model> members_;
  std::vector<torch::Tensor> losses_;
};

}  // namespace phasebench
