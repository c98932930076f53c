// checks.cpp: the products that prove each phase's work (checks.h; docs/method.md#what-is-measured), read after
// the clock has stopped.
#include "checks.h"

#include <algorithm>
#include <mutex>

namespace phasebench {

namespace {

bool finite(const torch::Tensor& t) { return t.defined() && torch::isfinite(t).all().item<bool>(); }

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

int32_t nonzero_count(const std::vector<torch::Tensor>& tensors) {
  int32_t n = 0;
  for (const auto& t : tensors) n += t.defined() && t.ne(0).any().item<bool>();
  return n;
}

at::Generator generator_of(const torch::Device& device) { return at::globalContext().defaultGenerator(device); }

}  // namespace

bool all_finite(const std::vector<torch::Tensor>& tensors) {
  for (const auto& t : tensors)
    if (!finite(t)) return false;
  return true;
}

pb_result unset_product() {
  pb_result r{};
  r.loss = std::nan("");
  r.finite = -1;
  r.batch_index = -1;
  r.leftovers = r.on_device = r.matches_host = r.resident = r.nonzero_grads = r.zero_before = r.distinct = -1;
  r.recompute_error = r.update_error = r.moved = std::nan("");
  return r;
}

pb_result product(const torch::Tensor& main, bool all_finite, double loss) {
  pb_result r = unset_product();
  r.loss = loss;
  r.finite = all_finite;
  r.ndim = static_cast<int32_t>(std::min<int64_t>(main.dim(), 4));
  for (int32_t d = 0; d < r.ndim; ++d) r.shape[d] = main.size(d);
  return r;
}

pb_result loss_product(const torch::Tensor& main, const torch::Tensor& loss) {
  const double value = loss.item<double>();
  return product(main, finite(main) && std::isfinite(value), value);
}

pb_result loaded_product(const Batch& host, int64_t batch_index) {
  auto r = product(host.data, finite(host.data));
  r.batch_index = batch_index;
  return r;
}

pb_result copied_product(const Batch& host, const StepTensors& step, const torch::Device& device,
                         int64_t batch_index) {
  auto r = product(step.data, finite(step.data));
  r.batch_index = batch_index;
  r.on_device = step.data.device() == device && step.target.device() == device;
  r.matches_host = torch::equal(step.data.cpu(), host.data.cpu()) && torch::equal(step.target.cpu(), host.target.cpu());
  // Nothing was copied: the batch already lived where it was asked for (always on cpu; on cuda when the
  // whole split lives on the device).
  r.resident = step.data.data_ptr() == host.data.data_ptr() && step.target.data_ptr() == host.target.data_ptr();
  return r;
}

pb_result fresh_product(const Model& fresh, const Model& live) {
  int64_t n = 0;
  bool shared = false, identical = true;
  const auto new_parameters = fresh.parameters(), live_parameters = live.parameters();
  for (size_t i = 0; i < new_parameters.size(); ++i) {
    n += new_parameters[i].numel();
    for (const auto& p : live_parameters) shared = shared || p.data_ptr() == new_parameters[i].data_ptr();
    identical = identical && torch::equal(new_parameters[i], live_parameters[i]);
  }
  auto r = product(torch::empty({n}), all_finite(new_parameters));
  r.distinct = !shared && !identical;
  return r;
}

void Checks::before_forward(const torch::Device& device) {
  auto generator = generator_of(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  rng_before_ = generator.get_state();
}

// The output against the model run again on the same input with the same dropout draws.
pb_result Checks::forwarded(Model& model, const StepTensors& step, const torch::Device& device) {
  auto generator = generator_of(device);
  auto swap_state = [&generator](const torch::Tensor& state) {
    std::lock_guard<std::mutex> lock(generator.mutex());  // not held across the forward: dropout takes it
    auto previous = generator.get_state();
    generator.set_state(state);
    return previous;
  };
  const auto after = swap_state(rng_before_);
  torch::Tensor again;
  {
    torch::NoGradGuard no_grad;
    again = model.forward(step.data);
  }
  swap_state(after);
  auto r = product(step.output, finite(step.output));
  r.recompute_error = max_abs(again - step.output.detach());
  return r;
}

void Checks::before_backward(const Model& model) {
  zero_before_ = 1;
  for (const auto& g : model.gradients()) zero_before_ &= !g.defined() || !g.ne(0).any().item<bool>();
}

pb_result Checks::backward(Model& model) const {
  const auto gradients = model.gradients();
  auto r = product(model.net().conv1->weight.grad(), all_finite(gradients));
  r.zero_before = zero_before_;
  r.nonzero_grads = nonzero_count(gradients);
  return r;
}

void Checks::before_update(Model& model) {
  const auto& weight = model.net().conv1->weight;
  weight_ = weight.detach().clone();
  grad_ = weight.grad().clone();
  auto& state = model.optimizer().state();
  const auto found = state.find(weight.unsafeGetTensorImpl());
  momentum_ = found == state.end()
      ? torch::Tensor()
      : static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer().clone();
}

// conv1.weight against SGD with momentum: buf = momentum * buf + grad (grad on the first step),
// weight -= lr * buf.
pb_result Checks::updated(Model& model) const {
  const auto buffer = momentum_.defined() ? momentum_ * kMomentum + grad_ : grad_;
  const auto expected = weight_.add(buffer, -kLearningRate);
  const auto weight = model.net().conv1->weight.detach();
  auto r = product(weight, all_finite(model.parameters()));
  r.update_error = max_abs(weight - expected);
  r.moved = max_abs(weight - weight_);
  return r;
}

void Checks::before_grad_sync(Model& model) { sync_before_ = model.net().conv1->weight.grad().clone(); }

// grad_sync: every gradient finite and non-zero, and conv1's moved from this rank's own (the shards differ).
pb_result Checks::synced(Model& model) const {
  const auto& grad = model.net().conv1->weight.grad();
  auto r = product(grad, all_finite(model.gradients()));
  r.nonzero_grads = nonzero_count(model.gradients());
  r.moved = max_abs(grad - sync_before_);
  return r;
}

}  // namespace phasebench
