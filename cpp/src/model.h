// model.h: the network of pytorch/examples' cpp/mnist, declared once, and the model and optimizer state a trainer
// (and each ensemble member) trains: a Net with its SGD.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

namespace phasebench {

constexpr double kLearningRate = 0.01, kMomentum = 0.5;

// The network of examples/cpp/mnist; width multiplies every hidden size, as phasebench/spec.py derives them.
struct Net : torch::nn::Module {
  Net(double dropout, int64_t width)
      : conv1(torch::nn::Conv2dOptions(1, 10 * width, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(10 * width, 20 * width, /*kernel_size=*/5)),
        conv2_drop(torch::nn::Dropout2dOptions(dropout)),
        fc1(20 * width * 4 * 4, 50 * width),
        fc2(50 * width, 10),
        dropout(dropout),
        fc1_inputs(20 * width * 4 * 4) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, fc1_inputs});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/dropout, /*train=*/is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  double dropout;
  int64_t fc1_inputs;
};

// A Net on its device and its SGD with momentum, as the published program makes them.
class Model {
 public:
  Model(double dropout, int64_t width, const torch::Device& device);

  // A new Net and SGD in place of these: the old Net is freed before the new SGD is made, as assigning the
  // published program's two variables in turn frees them.
  void rebuild();

  Net& net() { return *net_; }
  torch::optim::SGD& optimizer() { return *optimizer_; }
  std::vector<torch::Tensor> parameters() const { return net_->parameters(); }
  std::vector<torch::Tensor> gradients() const;
  // "name d0xd1...;" for every parameter, in named_parameters() order.
  std::string layout() const;

  torch::Tensor forward(const torch::Tensor& data) { return net_->forward(data); }
  // The optimizer's step, then zero_grad (set_to_none), as the published loop runs them.
  void update() {
    optimizer_->step();
    optimizer_->zero_grad();
  }
  void zero_grad() { optimizer_->zero_grad(); }

 private:
  double dropout_;
  int64_t width_;
  torch::Device device_;
  std::shared_ptr<Net> net_;
  std::unique_ptr<torch::optim::SGD> optimizer_;
};

}  // namespace phasebench
