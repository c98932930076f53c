// dcgan.cpp: pytorch/examples' cpp/dcgan program as the suite times it (dcgan.h): its two models and optimizers,
// its loader, and its one table of phases (what each times and produces); program_phases.cpp times a round of one.
#include "dcgan.h"

#include "checks.h"

#include <stdexcept>
#include <tuple>

namespace phasebench {

namespace {

// The parameter tensors whose gradient is set and not all zero.
int32_t dcgan_nonzero_grads(const std::vector<torch::Tensor>& parameters) {
  return nonzero_tensors(gradients_of(parameters));
}

// max |w - (w0 - (lr / bc1) * exp_avg / (sqrt(exp_avg_sq) / sqrt(bc2) + eps))|, from the parameter's Adam state
// after its step, in the optimizer's own form (bc1 = 1 - beta1^step, bc2 = 1 - beta2^step).
double adam_update_error(torch::optim::Adam& optimizer, const torch::Tensor& weight, const torch::Tensor& before) {
  auto& state = optimizer.state();
  const auto found = state.find(weight.unsafeGetTensorImpl());
  if (found == state.end()) throw std::logic_error("the checked weight has no Adam state after its step");
  const auto& adam = static_cast<const torch::optim::AdamParamState&>(*found->second);
  const auto& options = static_cast<const torch::optim::AdamOptions&>(optimizer.defaults());
  const auto step = static_cast<double>(adam.step());
  const double correction1 = 1 - std::pow(std::get<0>(options.betas()), step);
  const double correction2 = 1 - std::pow(std::get<1>(options.betas()), step);
  const auto denominator = (adam.exp_avg_sq().sqrt() / std::sqrt(correction2)).add(options.eps());
  const auto expected = before.addcdiv(adam.exp_avg(), denominator, -options.lr() / correction1);
  return (weight.detach() - expected).abs().max().item<double>();
}

torch::optim::Adam make_adam(const std::vector<torch::Tensor>& parameters) {
  return torch::optim::Adam(parameters, torch::optim::AdamOptions(kDcganLearningRate)
                                            .betas(std::make_tuple(kDcganBeta1, kDcganBeta2)));
}

}  // namespace

DCGANGeneratorImpl::DCGANGeneratorImpl(int64_t noise_size)
    : conv1(torch::nn::ConvTranspose2dOptions(noise_size, 256, 4).bias(false)),
      batch_norm1(256),
      conv2(torch::nn::ConvTranspose2dOptions(256, 128, 3).stride(2).padding(1).bias(false)),
      batch_norm2(128),
      conv3(torch::nn::ConvTranspose2dOptions(128, 64, 4).stride(2).padding(1).bias(false)),
      batch_norm3(64),
      conv4(torch::nn::ConvTranspose2dOptions(64, 1, 4).stride(2).padding(1).bias(false)) {
  register_module("conv1", conv1);
  register_module("batch_norm1", batch_norm1);
  register_module("conv2", conv2);
  register_module("batch_norm2", batch_norm2);
  register_module("conv3", conv3);
  register_module("batch_norm3", batch_norm3);
  register_module("conv4", conv4);
}

torch::Tensor DCGANGeneratorImpl::forward(torch::Tensor x) {
  x = torch::relu(batch_norm1(conv1(x)));
  x = torch::relu(batch_norm2(conv2(x)));
  x = torch::relu(batch_norm3(conv3(x)));
  x = torch::tanh(conv4(x));
  return x;
}

// The layers are made one statement each, first to last: as the arguments of one call, as the example writes them,
// their order is the compiler's (GCC makes the last first), and the convolutions' weights would be drawn in another
// order than Python's nn.Sequential draws them.
torch::nn::Sequential make_discriminator() {
  using namespace torch::nn;
  const auto leaky = LeakyReLUOptions().negative_slope(0.2);
  Sequential discriminator;
  discriminator->push_back(Conv2d(Conv2dOptions(1, 64, 4).stride(2).padding(1).bias(false)));
  discriminator->push_back(LeakyReLU(leaky));
  discriminator->push_back(Conv2d(Conv2dOptions(64, 128, 4).stride(2).padding(1).bias(false)));
  discriminator->push_back(BatchNorm2d(128));
  discriminator->push_back(LeakyReLU(leaky));
  discriminator->push_back(Conv2d(Conv2dOptions(128, 256, 4).stride(2).padding(1).bias(false)));
  discriminator->push_back(BatchNorm2d(256));
  discriminator->push_back(LeakyReLU(leaky));
  discriminator->push_back(Conv2d(Conv2dOptions(256, 1, 3).stride(1).padding(0).bias(false)));
  discriminator->push_back(Sigmoid());
  return discriminator;
}

DcganTrainer::DcganTrainer(const pb_dcgan_options& options)
    : device_(program_device(options.device)),
      events_(device_.is_cuda() ? std::make_unique<BodyEvents>(device_) : nullptr),
      batch_size_(options.batch_size) {
  if (batch_size_ < 1) throw std::invalid_argument("batch size must be at least 1, got " + std::to_string(batch_size_));
  if (options.threads < 0) throw std::invalid_argument("threads " + std::to_string(options.threads) + ": 0 or more");
  if (!options.data_root) throw std::invalid_argument("null data_root");
  const std::string log_path = options.log_path ? options.log_path : "";
  if (!log_path.empty()) {
    log_.reset(std::fopen(log_path.c_str(), "a"));
    if (!log_) throw std::runtime_error(log_path + ": cannot open log file");
  }
  if (options.threads > 0) torch::set_num_threads(options.threads);
  // One seed, then the example's draws in its order: the generator, the discriminator; then the optimizers and the
  // data, which draw nothing.
  torch::manual_seed(options.seed);
  generator_ = DCGANGenerator(kNoiseSize);
  discriminator_ = make_discriminator();
  generator_->to(device_);
  discriminator_->to(device_);
  generator_optimizer_ = std::make_unique<torch::optim::Adam>(make_adam(generator_->parameters()));
  discriminator_optimizer_ = std::make_unique<torch::optim::Adam>(make_adam(discriminator_->parameters()));
  // LibTorch's MNIST reads the IDX files straight from the folder it is given.
  auto mnist = load_mnist(std::string(options.data_root) + "/MNIST/raw", /*train=*/true);
  const auto size = static_cast<int64_t>(mnist.size().value());
  batches_per_epoch_ = (size + batch_size_ - 1) / batch_size_;
  loader_ = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(mnist)
          .map(torch::data::transforms::Normalize<>(kDcganNormalize, kDcganNormalize))
          .map(torch::data::transforms::Stack<>()),
      batch_size_);
  phases_ = ProgramPhases("dcgan", make_phases());
}

// The next batch; past the epoch's last one, the first of a new epoch (the same order again).
void DcganTrainer::data_loading() {
  if (!batches_ || *batches_ == loader_->end()) {
    batches_.emplace(loader_->begin());
    ++epoch_;
    batch_in_epoch_ = 0;
  }
  batch_ = **batches_;
  ++*batches_;
  ++batch_in_epoch_;
}

void DcganTrainer::d_real() {
  discriminator_->zero_grad();
  const int64_t n = real_images_.size(0);
  real_labels_ = torch::empty({n}, torch::TensorOptions().device(device_)).uniform_(0.8, 1.0);
  real_output_ = discriminator_->forward(real_images_).reshape(real_labels_.sizes());
  d_loss_real_ = torch::binary_cross_entropy(real_output_, real_labels_);
  d_loss_real_.backward();
}

void DcganTrainer::g_forward() {
  noise_ = torch::randn({real_images_.size(0), kNoiseSize, 1, 1}, torch::TensorOptions().device(device_));
  fake_images_ = generator_->forward(noise_);
}

void DcganTrainer::d_fake() {
  fake_labels_ = torch::zeros({real_images_.size(0)}, torch::TensorOptions().device(device_));
  fake_output_ = discriminator_->forward(fake_images_.detach()).reshape(fake_labels_.sizes());
  d_loss_fake_ = torch::binary_cross_entropy(fake_output_, fake_labels_);
  d_loss_fake_.backward();
  d_loss_ = d_loss_real_ + d_loss_fake_;
}

void DcganTrainer::g_loss() {
  generator_->zero_grad();
  fake_labels_.fill_(1);
  fake_output_ = discriminator_->forward(fake_images_).reshape(fake_labels_.sizes());
  g_loss_ = torch::binary_cross_entropy(fake_output_, fake_labels_);
  g_loss_.backward();
}

void DcganTrainer::progress_print() {
  const float d_loss = d_loss_.item<float>(), g_loss = g_loss_.item<float>();
  std::fprintf(log_ ? log_.get() : stdout, "[%2ld][%3ld/%3ld] D_loss: %.4f | G_loss: %.4f\n", static_cast<long>(epoch_),
               static_cast<long>(batch_in_epoch_), static_cast<long>(batches_per_epoch_), d_loss, g_loss);
  loss_ = g_loss;
}

std::vector<ProgramPhase> DcganTrainer::make_phases() {
  const auto remember_zero = [this](const std::vector<torch::Tensor>& parameters) {
    zero_before_ = dcgan_nonzero_grads(parameters) == 0;
  };
  const auto first_conv = [this]() -> torch::Tensor& { return discriminator_->ptr(0)->as<torch::nn::Conv2d>()->weight; };
  // A loss's backward pass into a network: the output it scored, the loss, the network's gradients.
  const auto backward_product = [](const torch::Tensor& output, const torch::Tensor& loss,
                                   const std::vector<torch::Tensor>& parameters) {
    auto r = product(output, defined_and_finite(output) && all_finite(gradients_of(parameters)), loss.item<double>());
    r.nonzero_grads = dcgan_nonzero_grads(parameters);
    return r;
  };
  // An Adam step: the network's first weight, how far it moved and how far from Adam's update written out.
  const auto step_product = [this](torch::optim::Adam& optimizer, const torch::Tensor& weight,
                                   const std::vector<torch::Tensor>& parameters) {
    auto r = product(weight.detach(), all_finite(parameters));
    r.moved = (weight.detach() - weight_before_).abs().max().item<double>();
    r.update_error = adam_update_error(optimizer, weight, weight_before_);
    return r;
  };
  return {
      {"data_loading", [this] { data_loading(); }, nullptr,
       [this] {
         auto r = product(batch_.data, defined_and_finite(batch_.data));
         r.batch_index = batch_in_epoch_ - 1;
         return r;
       }},
      {"copy_to_device", [this] { copy_to_device(); }, nullptr,
       [this] {
         auto r = product(real_images_, defined_and_finite(real_images_));
         r.on_device = real_images_.device() == device_;
         r.matches_host = torch::equal(real_images_.cpu(), batch_.data.cpu());
         // Nothing was copied: the batch already lived where it was asked for (always on cpu).
         r.resident = real_images_.data_ptr() == batch_.data.data_ptr();
         return r;
       }},
      {"d_real", [this] { d_real(); }, [this, remember_zero] { remember_zero(discriminator_->parameters()); },
       [this, backward_product] {
         auto r = backward_product(real_output_, d_loss_real_, discriminator_->parameters());
         r.zero_before = zero_before_;
         return r;
       }},
      {"g_forward", [this] { g_forward(); }, nullptr, [this] { return product(fake_images_, defined_and_finite(fake_images_)); }},
      {"d_fake", [this] { d_fake(); }, nullptr,
       [this, backward_product] { return backward_product(fake_output_, d_loss_fake_, discriminator_->parameters()); }},
      {"d_step", [this] { d_step(); }, [this, first_conv] { weight_before_ = first_conv().detach().clone(); },
       [this, first_conv, step_product] {
         return step_product(*discriminator_optimizer_, first_conv(), discriminator_->parameters());
       }},
      {"g_loss", [this] { g_loss(); }, [this, remember_zero] { remember_zero(generator_->parameters()); },
       [this, backward_product] {
         auto r = backward_product(fake_output_, g_loss_, generator_->parameters());
         r.zero_before = zero_before_;
         return r;
       }},
      {"g_step", [this] { g_step(); }, [this] { weight_before_ = generator_->conv1->weight.detach().clone(); },
       [this, step_product] {
         return step_product(*generator_optimizer_, generator_->conv1->weight, generator_->parameters());
       }},
      {"progress_print", [this] { progress_print(); }, nullptr,
       [this] { return product(g_loss_, defined_and_finite(d_loss_) && std::isfinite(loss_), loss_); }},
  };
}

std::vector<std::string> DcganTrainer::phase_names() const { return phases_.names(); }

// What the last round left is freed before the next one's preparation, as a training loop frees its last step's.
void DcganTrainer::release() {
  batch_ = Batch();
  real_images_ = real_labels_ = real_output_ = d_loss_real_ = torch::Tensor();
  noise_ = fake_images_ = fake_labels_ = fake_output_ = d_loss_fake_ = d_loss_ = g_loss_ = torch::Tensor();
  weight_before_ = torch::Tensor();
  zero_before_ = -1;
}

Timing DcganTrainer::run_phase(const std::string& name, bool checks, pb_result* result) {
  return phases_.time_round(name, checks, result, device_, events_.get(), [this] { release(); });
}

void DcganTrainer::step() {
  for (const auto& phase : phases_)
    if (phase.name != "progress_print") phase.body();
  if (++trained_ % kDcganLogInterval == 0) progress_print();
}

std::vector<double> DcganTrainer::train_steps(int64_t steps) {
  if (steps < 0) throw std::invalid_argument("a negative number of steps");
  std::vector<torch::Tensor> g_losses;
  g_losses.reserve(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) {
    step();
    g_losses.push_back(g_loss_.detach());
  }
  if (g_losses.empty()) return {};
  // One host read after the loop: the example synchronizes only where it logs.
  const auto read = torch::stack(g_losses).to(torch::kCPU).contiguous();
  const float* values = read.data_ptr<float>();
  std::vector<double> losses(values, values + steps);
  loss_ = losses.back();
  return losses;
}

std::vector<torch::Tensor> DcganTrainer::state_tensors() const {
  std::vector<torch::Tensor> tensors = generator_->parameters();
  for (const auto& p : discriminator_->parameters()) tensors.push_back(p);
  for (const auto& buffers : {generator_->buffers(), discriminator_->buffers()})
    for (const auto& b : buffers)
      if (b.is_floating_point()) tensors.push_back(b);
  return tensors;
}

}  // namespace phasebench
