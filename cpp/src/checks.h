// checks.h: what proves that a phase did its work (checks.cpp; docs/method.md#what-is-measured): each phase's
// product (pb_result), and the values taken untimed before its body that the product is checked against.
// phasebench/train/trainer.py has the same checks.
#pragma once

#include "phasebench.h"

#include "data.h"
#include "model.h"
#include "step.h"

#include <torch/torch.h>

#include <cmath>
#include <optional>
#include <vector>

namespace phasebench {

// A reference that does not keep a tensor, nor its memory, alive: what a round's leftovers are counted by.
struct WeakTensor {
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> impl;
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;
  WeakTensor(const torch::Tensor& t, bool with_storage) : impl(t.getIntrusivePtr()) {
    if (with_storage && t.has_storage()) storage.emplace(t.storage().getWeakStorageImpl());
  }
  bool alive() const { return !impl.expired() || (storage && !storage->expired()); }
};

bool all_finite(const std::vector<torch::Tensor>& tensors);

// No product: every field unset (-1 or NaN, ndim 0), what a round without its checks reports (pb_set_round_checks).
pb_result unset_product();
// A phase's product, its checks unset (-1 or NaN): the main tensor's shape, whether it is finite, its loss.
pb_result product(const torch::Tensor& main, bool all_finite, double loss = std::nan(""));
// The loss a phase computed or read, with `main`'s shape.
pb_result loss_product(const torch::Tensor& main, const torch::Tensor& loss);
// data_loading: the host batch and its index in the epoch.
pb_result loaded_product(const Batch& host, int64_t batch_index);
// copy_to_device: the batch on the device, equal to the host's, and whether anything was copied.
pb_result copied_product(const Batch& host, const StepTensors& step, const torch::Device& device, int64_t batch_index);
// optimizer_init: the new model's parameters share neither memory nor values with the live model's.
pb_result fresh_product(const Model& fresh, const Model& live);

// The values the split step's products are checked against, taken before each body.
class Checks {
 public:
  // forward: the generator's state, to run the model again with the same dropout draws.
  void before_forward(const torch::Device& device);
  pb_result forwarded(Model& model, const StepTensors& step, const torch::Device& device);
  // backward: whether every gradient was unset or zero.
  void before_backward(const Model& model);
  pb_result backward(Model& model) const;
  // param_update: conv1's weight, gradient and momentum buffer.
  void before_update(Model& model);
  pb_result updated(Model& model) const;
  // grad_sync: conv1's gradient before the all-reduce.
  void before_grad_sync(Model& model);
  pb_result synced(Model& model) const;

  // What a round leaves here, counted with its leftovers; release() frees it before the next round.
  std::vector<torch::Tensor> held() const { return {weight_, grad_, momentum_}; }
  void release() { weight_ = grad_ = momentum_ = rng_before_ = torch::Tensor(); }

 private:
  torch::Tensor weight_, grad_, momentum_, rng_before_, sync_before_;
  int32_t zero_before_ = -1;
};

}  // namespace phasebench
