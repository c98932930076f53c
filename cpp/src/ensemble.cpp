// ensemble.cpp: ensembles (ensemble.h; docs/gpu.md#concurrent-jobs-and-ensembles): member k (1-based) is the Net
// built right after torch::manual_seed(k), with its own SGD, all trained one after another on the same batches.
// phasebench/train/ensemble.py's LoopEnsemble in C++.
#include "ensemble.h"

#include <stdexcept>
#include <string>

namespace phasebench {

namespace {
constexpr int64_t kMaxEnsemble = 4096;  // as phasebench/train/ensemble.py's MAX_MODELS
}  // namespace

void Ensemble::check_size(int64_t models) {
  if (models < 1 || models > kMaxEnsemble)
    throw std::invalid_argument("an ensemble of " + std::to_string(models) + " models: from 1 to " +
                                std::to_string(kMaxEnsemble));
}

Ensemble::Ensemble(int64_t models, double dropout, int64_t width, const torch::Device& device) {
  check_size(models);
  members_.reserve(static_cast<size_t>(models));
  for (int64_t seed = 1; seed <= models; ++seed) {
    torch::manual_seed(seed);
    members_.emplace_back(dropout, width, device);
  }
}

void Ensemble::prepare_step() {
  losses_.clear();
  losses_.reserve(members_.size());
}

void Ensemble::step(const torch::Tensor& data, const torch::Tensor& target) {
  for (auto& member : members_) {
    auto loss = torch::nll_loss(member.forward(data), target);
    loss.backward();
    member.update();
    losses_.push_back(loss.detach());
  }
}

std::vector<double> Ensemble::losses() const {
  std::vector<double> values;
  for (const auto& loss : losses_) values.push_back(loss.item<double>());
  return values;
}

std::vector<torch::Tensor> Ensemble::parameters(int64_t member) const {
  if (member < 0 || member >= size())
    throw std::out_of_range("member " + std::to_string(member) + " of an ensemble of " + std::to_string(size()) +
                            " (members are numbered from 0)");
  return members_[member].parameters();
}

}  // namespace phasebench
