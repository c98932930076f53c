// dcgan.h: pytorch/examples' cpp/dcgan program, cut into the timed phases its step is made of: a generator of
// transposed convolutions and a discriminator of convolutions, trained on MNIST by torch::binary_cross_entropy and
// two torch::optim::Adam (lr 2e-4, betas 0.5 and 0.5). Its Python twin is phasebench/train/dcgan.py, which draws the
// same numbers in the same order from the same seed. As the suite's MNIST program, it loads its batches in order
// (SequentialSampler) and on the calling thread, where the example shuffles them with two loader threads.
#pragma once

#include "phasebench.h"

#include "clock.h"
#include "data.h"
#include "program_phases.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace phasebench {

constexpr int64_t kNoiseSize = 100;
constexpr double kDcganLearningRate = 2e-4;
constexpr double kDcganBeta1 = 0.5, kDcganBeta2 = 0.5;
constexpr int64_t kDcganLogInterval = 10;  // batches between progress lines
constexpr double kDcganNormalize = 0.5;     // Normalize's mean and standard deviation: images in [-1, 1], as tanh's

// The example's generator. Its members are declared, so constructed, in the order they are registered, so that
// parameters() lists conv1.weight, batch_norm1.weight, batch_norm1.bias, conv2.weight, ..., conv4.weight.
struct DCGANGeneratorImpl : torch::nn::Module {
  explicit DCGANGeneratorImpl(int64_t noise_size);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::ConvTranspose2d conv1;
  torch::nn::BatchNorm2d batch_norm1;
  torch::nn::ConvTranspose2d conv2;
  torch::nn::BatchNorm2d batch_norm2;
  torch::nn::ConvTranspose2d conv3;
  torch::nn::BatchNorm2d batch_norm3;
  torch::nn::ConvTranspose2d conv4;
};
TORCH_MODULE(DCGANGenerator);

// The example's discriminator: four convolutions, LeakyReLU(0.2) and batch norm between them, a sigmoid at the end.
torch::nn::Sequential make_discriminator();

class DcganTrainer {
 public:
  explicit DcganTrainer(const pb_dcgan_options& options);

  // The step's phases, in the order it runs them.
  std::vector<std::string> phase_names() const;
  // Releases what the last round left, runs the phases before this one untimed, then times its body; with
  // `checks`, takes what the product is checked against before the body and fills the product after it.
  Timing run_phase(const std::string& name, bool checks, pb_result* result);
  int64_t timer_floor() const { return phasebench::timer_floor(device_, events_.get()); }

  // `steps` whole steps (the log line every kDcganLogInterval batches trained); each step's generator loss, read
  // once after the last step.
  std::vector<double> train_steps(int64_t steps);
  double last_loss() const { return loss_; }
  // Every float tensor of both models: the generator's parameters, the discriminator's, then the generator's and
  // the discriminator's batch norm running means and variances (num_batches_tracked, an integer, left out).
  std::vector<torch::Tensor> state_tensors() const;
  // The last step's real images and the labels d_real drew for them; undefined where none are held.
  const torch::Tensor& real_images() const { return real_images_; }
  const torch::Tensor& real_labels() const { return real_labels_; }

 private:
  std::vector<ProgramPhase> make_phases();

  // The phases' bodies, as the example's loop writes them.
  void data_loading();
  void copy_to_device() { real_images_ = batch_.data.to(device_); }
  void d_real();
  void g_forward();
  void d_fake();
  void d_step() { discriminator_optimizer_->step(); }
  void g_loss();
  void g_step() { generator_optimizer_->step(); }
  void progress_print();

  // Phases 1-8, then progress_print when the batches trained since creation reach a multiple of the interval.
  void step();
  void release();

  torch::Device device_;
  std::unique_ptr<BodyEvents> events_;  // cuda only: the clock's timing events (clock.h)
  int64_t batch_size_;
  struct CloseFile {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  std::unique_ptr<std::FILE, CloseFile> log_;  // the progress lines' file; null: stdout
  DCGANGenerator generator_{nullptr};
  torch::nn::Sequential discriminator_{nullptr};
  std::unique_ptr<torch::optim::Adam> generator_optimizer_, discriminator_optimizer_;

  using Dataset = torch::data::datasets::MapDataset<
      torch::data::datasets::MapDataset<torch::data::datasets::MNIST, torch::data::transforms::Normalize<>>,
      torch::data::transforms::Stack<>>;
  using Loader = torch::data::StatelessDataLoader<Dataset, torch::data::samplers::SequentialSampler>;
  std::unique_ptr<Loader> loader_;
  std::optional<torch::data::Iterator<Batch>> batches_;  // the epoch's; empty before the first
  int64_t batches_per_epoch_ = 0;
  int64_t epoch_ = 0;           // from 1, the epoch the last batch came from
  int64_t batch_in_epoch_ = 0;  // batches drawn in this epoch, the last one's index + 1
  int64_t trained_ = 0;         // whole steps since the trainer was made (step(), train_steps)

  ProgramPhases phases_;

  // The step's tensors, named as the example names them.
  Batch batch_;
  torch::Tensor real_images_, real_labels_, real_output_, d_loss_real_;
  torch::Tensor noise_, fake_images_, fake_labels_, fake_output_, d_loss_fake_, d_loss_, g_loss_;
  double loss_ = std::nan("");  // the generator loss the last step or progress_print read
  // What the products are checked against, taken before the body.
  torch::Tensor weight_before_;
  int32_t zero_before_ = -1;
};

}  // namespace phasebench
