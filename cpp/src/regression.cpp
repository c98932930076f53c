// regression.cpp: pytorch/examples' cpp/regression program as the suite times it (regression.h): its draws, its
// model and optimizer, its one table of phases (what each times and produces), and what its round needs beyond
// program_phases.cpp's: the gradients zero_grad zeroes.
#include "regression.h"

#include "checks.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace phasebench {

namespace {

// The columns x, x^2, x^3, x^4 of one batch of points.
torch::Tensor polynomial_features(const torch::Tensor& points) {
  const auto column = points.unsqueeze(1);
  std::vector<torch::Tensor> powers;
  for (int64_t power = 1; power <= kPolynomialDegree; ++power) powers.push_back(column.pow(power));
  return torch::cat(powers, 1);
}

}  // namespace

RegressionTrainer::RegressionTrainer(const pb_regression_options& options)
    : device_(program_device(options.device)),
      events_(device_.is_cuda() ? std::make_unique<BodyEvents>(device_) : nullptr),
      batch_size_(options.batch_size) {
  if (batch_size_ < 1) throw std::invalid_argument("batch size must be at least 1, got " + std::to_string(batch_size_));
  if (options.threads < 0) throw std::invalid_argument("threads " + std::to_string(options.threads) + ": 0 or more");
  if (options.threads > 0) torch::set_num_threads(options.threads);
  // One seed, then the example's draws in its order: the target's coefficients, its constant, the model.
  torch::manual_seed(options.seed);
  const auto on_device = torch::TensorOptions().device(device_);
  w_target_ = torch::randn({kPolynomialDegree, 1}, on_device) * 5;
  b_target_ = torch::randn({1}, on_device) * 5;
  fc_ = torch::nn::Linear(w_target_.size(0), 1);
  fc_->to(device_);
  optimizer_ = std::make_unique<torch::optim::SGD>(fc_->parameters(), torch::optim::SGDOptions(kRegressionLearningRate));
  phases_ = ProgramPhases("regression", make_phases());
}

// A batch of points and the polynomial's values there, as the example's get_batch builds it.
void RegressionTrainer::get_batch() {
  const auto points = torch::randn({batch_size_}, torch::TensorOptions().device(device_));
  features_ = polynomial_features(points);
  targets_ = features_.mm(w_target_) + b_target_.item();
  ++batches_;
}

std::vector<ProgramPhase> RegressionTrainer::make_phases() {
  return {
      {"get_batch", [this] { get_batch(); }, nullptr,
       [this] {
         auto r = product(features_, defined_and_finite(features_) && defined_and_finite(targets_));
         r.batch_index = batches_ - 1;
         return r;
       }},
      {"zero_grad", [this] { zero_grad(); }, [this] { zero_before_ = nonzero_tensors(gradients_of(parameters())) == 0; },
       [this] {
         auto r = product(fc_->weight, all_finite(parameters()));
         r.zero_before = zero_before_;
         r.nonzero_grads = nonzero_tensors(gradients_of(parameters()));
         return r;
       }},
      {"forward_loss", [this] { forward_loss(); }, nullptr,
       [this] {
         torch::NoGradGuard no_grad;
         const auto again = torch::smooth_l1_loss(fc_(features_), targets_);
         auto r = product(output_, defined_and_finite(output_), output_.item<double>());
         r.recompute_error = (again - output_.detach()).abs().max().item<double>();
         return r;
       }},
      {"loss_item", [this] { loss_item(); }, nullptr,
       [this] { return product(output_, defined_and_finite(output_) && std::isfinite(loss_), loss_); }},
      {"backward", [this] { backward(); }, [this] { zero_before_ = nonzero_tensors(gradients_of(parameters())) == 0; },
       [this] {
         auto r = product(fc_->weight.grad(), all_finite(gradients_of(parameters())));
         r.zero_before = zero_before_;
         r.nonzero_grads = nonzero_tensors(gradients_of(parameters()));
         return r;
       }},
      {"update", [this] { update(); },
       [this] {
         weight_before_ = fc_->weight.detach().clone();
         grad_before_ = fc_->weight.grad().clone();
       },
       [this] {
         // SGD without momentum: weight - lr * grad, in the optimizer's own form (add with alpha).
         const auto weight = fc_->weight.detach();
         const auto expected = weight_before_.add(grad_before_, -kRegressionLearningRate);
         auto r = product(weight, all_finite(parameters()));
         r.update_error = (weight - expected).abs().max().item<double>();
         r.moved = (weight - weight_before_).abs().max().item<double>();
         return r;
       }},
  };
}

std::vector<std::string> RegressionTrainer::phase_names() const { return phases_.names(); }

bool RegressionTrainer::holds_gradients() const {
  const auto grads = gradients_of(parameters());
  return std::all_of(grads.begin(), grads.end(), [](const torch::Tensor& g) { return g.defined(); });
}

// What the last round left is freed before the next one's preparation, as a training loop frees its last step's.
void RegressionTrainer::release() {
  features_ = targets_ = output_ = weight_before_ = grad_before_ = torch::Tensor();
  zero_before_ = -1;
}

Timing RegressionTrainer::run_phase(const std::string& name, bool checks, pb_result* result) {
  // zero_grad zeroes the gradients the step before left: a trainer without them gets some first.
  const auto give_gradients = [this](const std::string& phase) {
    if (phase == "zero_grad" && !holds_gradients()) {
      get_batch();
      forward_loss();
      backward();
    }
  };
  return phases_.time_round(name, checks, result, device_, events_.get(), [this] { release(); }, give_gradients);
}

double RegressionTrainer::step() {
  for (const auto& phase : phases_) phase.body();
  return loss_;
}

}  // namespace phasebench
