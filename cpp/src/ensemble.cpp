// ensemble.cpp: ensembles (docs/gpu.md#concurrent-jobs-and-ensembles): member k (1-based) is the Net built right
// after torch::manual_seed(k), with its own SGD, all trained one after another on the same batches.
// phasebench/train/ensemble.py's LoopEnsemble in C++.
#include "trainer.h"

#include <stdexcept>

namespace phasebench {

namespace {
constexpr int64_t kMaxEnsemble = 4096;  // as phasebench/train/ensemble.py's MAX_MODELS
}  // namespace

// It replaces the last one.
void Trainer::start_ensemble(int64_t models) {
  if (models < 1 || models > kMaxEnsemble)
    throw std::invalid_argument("an ensemble of " + std::to_string(models) + " models: from 1 to " +
                                std::to_string(kMaxEnsemble));
  stop_ensemble();  // freed before the new one is built
  for (int64_t seed = 1; seed <= models; ++seed) {
    torch::manual_seed(seed);
    auto model = std::make_shared<Net>(dropout_, width_);
    model->to(device_);
    auto optimizer = std::make_unique<torch::optim::SGD>(
        model->parameters(), torch::optim::SGDOptions(kLearningRate).momentum(kMomentum));
    ensemble_.push_back({std::move(model), std::move(optimizer)});
  }
}

void Trainer::stop_ensemble() {
  ensemble_losses_.clear();
  ensemble_.clear();
}

// One step of every member on the next batch, timed as a phase is: the batch is loaded and copied to the
// device before the clock starts, and what the last step left is released before that.
Timing Trainer::ensemble_step(std::vector<double>& losses) {
  if (ensemble_.empty()) throw std::logic_error("no ensemble: call pb_ensemble_create first");
  ensemble_losses_.clear();
  ensemble_losses_.reserve(ensemble_.size());
  release();
  on_device();
  const Timing timing = timed([this] {
    for (auto& member : ensemble_) {
      auto loss = torch::nll_loss(member.model->forward(data_), target_);
      loss.backward();
      member.optimizer->step();
      member.optimizer->zero_grad();
      ensemble_losses_.push_back(loss.detach());
    }
  });
  losses.clear();
  for (const auto& loss : ensemble_losses_) losses.push_back(loss.item<double>());
  return timing;
}

std::vector<torch::Tensor> Trainer::ensemble_parameters(int64_t member) const {
  if (member < 0 || member >= ensemble_size())
    throw std::out_of_range("member " + std::to_string(member) + " of an ensemble of " +
                            std::to_string(ensemble_size()) + " (members are numbered from 0)");
  return ensemble_[member].model->parameters();
}

}  // namespace phasebench
