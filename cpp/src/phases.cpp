// phases.cpp: the one place that says what each phase prepares (untimed), times, and produces
// (docs/method.md#what-is-measured), and the products that prove the work. The Python twin is
// phasebench/train/phases.py's PHASES.
#include "trainer.h"

#include <algorithm>
#include <cmath>
#include <mutex>

namespace phasebench {

namespace {

bool finite(const torch::Tensor& t) { return t.defined() && torch::isfinite(t).all().item<bool>(); }

bool all_finite(const std::vector<torch::Tensor>& tensors) {
  for (const auto& t : tensors)
    if (!finite(t)) return false;
  return true;
}

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

// A phase's product, for plain tests to check: its shape, whether it is finite, its loss; the
// checks that prove the work are filled in by the phase (-1 or NaN where it has none).
pb_result product(const torch::Tensor& main, bool all_finite, double loss = std::nan("")) {
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

}  // namespace

std::vector<Phase> Trainer::make_phases() {
  return {
      {"data_loading", Uses::nothing, nullptr, [this] { load_batch(); }, [this] { return loaded(); }},
      {"copy_to_device", Uses::step, [this] { load_batch(); }, [this] { copy_batch(); }, [this] { return copied(); }},
      {"optimizer_init", Uses::nothing, nullptr,
       [this] {
         fresh_model_ = std::make_shared<Net>(dropout_, width_);
         fresh_model_->to(device_);
         fresh_optimizer_ = std::make_unique<torch::optim::SGD>(
             fresh_model_->parameters(), torch::optim::SGDOptions(kLearningRate).momentum(kMomentum));
       },
       [this] { return fresh_product(); }},
      {"forward", Uses::split_step,
       [this] {
         on_device();
         auto gen = generator();
         std::lock_guard<std::mutex> lock(gen.mutex());
         rng_before_ = gen.get_state();
       },
       [this] { forward(); }, [this] { return forwarded_product(); }},
      {"loss", Uses::split_step, [this] { on_device(); forward(); }, [this] { compute_loss(); },
       [this] { return loss_product(loss_); }},
      {"backward", Uses::split_step,
       [this] {
         forwarded();
         zero_before_ = 1;
         for (const auto& g : grads()) zero_before_ &= !g.defined() || !g.ne(0).any().item<bool>();
       },
       [this] { backward(); }, [this] { return backward_product(); }},
      {"param_update", Uses::split_step, [this] { forwarded(); backward(); capture_update(); }, [this] { update(); },
       [this] { return updated_product(); }},
      // Data parallel only (Trainer::attach): the all-reduce of the gradients backward left.
      {"grad_sync", Uses::split_step,
       [this] {
         if (!distributed()) throw std::invalid_argument("'grad_sync' is a phase of a data-parallel trainer only");
         forwarded();
         backward();
         sync_before_ = model_->conv1->weight.grad().clone();
       },
       [this] { grad_sync(); }, [this] { return synced_product(); }},
      {"progress_print", Uses::split_step, [this] { forwarded(); }, [this] { print_progress(); },
       [this] { return loss_product(loss_); }},
      {"train_step", Uses::step, nullptr,
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
      // Not training phases: the C++ example's per-step loss.item() (docs/method.md#how-our-trainers-differ-from-pytorchexamples-and-why), and the empty timed region (timer floor, worker_overhead).
      {"loss_item", Uses::split_step, [this] { forwarded(); }, [this] { (void)loss_.item<double>(); },
       [this] { return loss_product(loss_); }},
      {"noop", Uses::nothing, nullptr, [] {}, [] { return product(torch::empty({0}), true); }},
      // Timed once per worker, the first time a step needs it (docs/gpu.md#cuda-graphs-and-torchcompile); a
      // phase only of a step that has it.
      {"graph_capture", Uses::one_shot, [this] { warm_up(); }, [this] { step_->run_one_shot(*this); },
       [this] { return product(step_->one_shot_output(), all_finite(model_->parameters())); }},
  };
}

at::Generator Trainer::generator() const { return at::globalContext().defaultGenerator(device_); }

pb_result Trainer::loss_product(const torch::Tensor& main) {
  const double loss = loss_.item<double>();
  return product(main, finite(main) && std::isfinite(loss), loss);
}

std::vector<torch::Tensor> Trainer::grads() {
  std::vector<torch::Tensor> out;
  for (const auto& p : model_->parameters()) out.push_back(p.grad());
  return out;
}

// -- products that prove the work (docs/method.md#what-is-measured); phasebench/train/trainer.py has the same ----
pb_result Trainer::loaded() {
  auto r = product(host_.data, finite(host_.data));
  r.batch_index = host_index_;
  return r;
}

pb_result Trainer::copied() {
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
pb_result Trainer::forwarded_product() {
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

pb_result Trainer::backward_product() {
  auto r = product(model_->conv1->weight.grad(), all_finite(grads()));
  r.zero_before = zero_before_;
  r.nonzero_grads = 0;
  for (const auto& g : grads()) r.nonzero_grads += g.defined() && g.ne(0).any().item<bool>();
  return r;
}

void Trainer::capture_update() {
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
pb_result Trainer::updated_product() {
  const auto buffer = check_momentum_.defined() ? check_momentum_ * kMomentum + check_grad_ : check_grad_;
  const auto expected = check_weight_.add(buffer, -kLearningRate);
  const auto weight = model_->conv1->weight.detach();
  auto r = product(weight, all_finite(model_->parameters()));
  r.update_error = max_abs(weight - expected);
  r.moved = max_abs(weight - check_weight_);
  return r;
}

// grad_sync: every gradient finite and non-zero, and conv1's moved from this rank's own (the shards differ).
pb_result Trainer::synced_product() {
  const auto& grad = model_->conv1->weight.grad();
  auto r = product(grad, all_finite(grads()));
  r.nonzero_grads = 0;
  for (const auto& g : grads()) r.nonzero_grads += g.defined() && g.ne(0).any().item<bool>();
  r.moved = max_abs(grad - sync_before_);
  return r;
}

pb_result Trainer::fresh_product() {
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

}  // namespace phasebench
