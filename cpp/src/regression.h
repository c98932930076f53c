// regression.h: pytorch/examples' cpp/regression program (docs/method.md#the-regression-program), cut into the timed
// phases its step is made of: a polynomial of degree 4 with random coefficients, batches of its values at random
// points, torch::nn::Linear(4, 1) fitted by torch::smooth_l1_loss and torch::optim::SGD(0.1). Its Python twin is
// phasebench/train/regression.py, which draws the same numbers in the same order from the same seed.
#pragma once

#include "phasebench.h"

#include "clock.h"
#include "program_phases.h"

#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace phasebench {

constexpr int64_t kPolynomialDegree = 4;  // the features x, x^2, x^3, x^4
constexpr double kRegressionLearningRate = 0.1;

class RegressionTrainer {
 public:
  explicit RegressionTrainer(const pb_regression_options& options);

  // The step's phases, in the order it runs them.
  std::vector<std::string> phase_names() const;
  // Releases what the last round left, runs the phases before this one untimed, then times its body; with
  // `checks`, takes what the product is checked against before the body and fills the product after it.
  Timing run_phase(const std::string& name, bool checks, pb_result* result);
  int64_t timer_floor() const { return phasebench::timer_floor(device_, events_.get()); }

  // One whole step, every phase in order; the loss it read.
  double step();
  double last_loss() const { return loss_; }
  std::vector<torch::Tensor> parameters() const { return fc_->parameters(); }
  // The last batch drawn; undefined where none is held.
  const torch::Tensor& features() const { return features_; }
  const torch::Tensor& targets() const { return targets_; }

 private:
  std::vector<ProgramPhase> make_phases();

  // The phases' bodies, as the example's loop writes them.
  void get_batch();
  void zero_grad() { optimizer_->zero_grad(); }
  void forward_loss() { output_ = torch::smooth_l1_loss(fc_(features_), targets_); }
  void loss_item() { loss_ = output_.item<float>(); }
  void backward() { output_.backward(); }
  void update() { optimizer_->step(); }

  bool holds_gradients() const;
  void release();

  torch::Device device_;
  std::unique_ptr<BodyEvents> events_;  // cuda only: the clock's timing events (clock.h)
  int64_t batch_size_;
  torch::Tensor w_target_, b_target_;   // the polynomial's coefficients and constant
  torch::nn::Linear fc_{nullptr};
  std::unique_ptr<torch::optim::SGD> optimizer_;
  ProgramPhases phases_;

  torch::Tensor features_, targets_, output_;
  double loss_ = std::nan("");
  int64_t batches_ = 0;  // batches drawn since the trainer was made
  // What the products are checked against, taken before the body.
  torch::Tensor weight_before_, grad_before_;
  int32_t zero_before_ = -1;
};

}  // namespace phasebench
