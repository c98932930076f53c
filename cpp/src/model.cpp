// model.cpp: a Net and its SGD (model.h).
#include "model.h"

#include <sstream>

namespace phasebench {

Model::Model(double dropout, int64_t width, const torch::Device& device)
    : dropout_(dropout), width_(width), device_(device) {
  rebuild();
}

void Model::rebuild() {
  net_ = std::make_shared<Net>(dropout_, width_);
  net_->to(device_);
  optimizer_ = std::make_unique<torch::optim::SGD>(
      net_->parameters(), torch::optim::SGDOptions(kLearningRate).momentum(kMomentum));
}

std::vector<torch::Tensor> Model::gradients() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : net_->parameters()) out.push_back(p.grad());
  return out;
}

std::string Model::layout() const {
  std::ostringstream out;
  for (const auto& item : net_->named_parameters()) {
    out << item.key() << ' ';
    for (size_t d = 0; d < item.value().sizes().size(); ++d)
      out << (d ? "x" : "") << item.value().size(d);
    out << ';';
  }
  return out.str();
}

}  // namespace phasebench
