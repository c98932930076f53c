// mnist_plain.cpp: the training loop of pytorch/examples' cpp/mnist as a C++ user writes it, with nothing of
// the suite around it: the step's tensors are locals that die at the end of each iteration. It is the
// reference the suite's C++ trainer is held to (docs/page-faults.md; `python -m phasebench.plain`): the same Net,
// loader, optimizer and log line as the suite's trainer (cpp/src/), both splits opened before training as the example
// opens them, zero_grad after step() as in the suite, one JSON line of figures on stdout.
//
//   mnist_plain RAW_DIR [--threads N] [--epochs N] [--max-steps N] [--log PATH] [--seed N]
#include <torch/torch.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

struct Net : torch::nn::Module {
  Net()
      : conv1(torch::nn::Conv2dOptions(1, 10, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(10, 20, /*kernel_size=*/5)),
        fc1(320, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 320});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/0.5, /*train=*/is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s RAW_DIR [--threads N] [--epochs N] [--max-steps N] [--log PATH] [--seed N]\n",
                 argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  int threads = 0, epochs = 1;
  long max_steps = 0, seed = 1;
  const char* log_path = nullptr;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--epochs")) epochs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max-steps")) max_steps = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed")) seed = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--log")) log_path = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (threads > 0) torch::set_num_threads(threads);
  torch::manual_seed(seed);
  FILE* log = log_path ? std::fopen(log_path, "w") : stdout;
  if (!log) {
    std::perror(log_path);
    return 1;
  }

  auto dataset = torch::data::datasets::MNIST(root)
                     .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                     .map(torch::data::transforms::Stack<>());
  const size_t dataset_size = dataset.size().value();
  // The example opens its test split before training (for its test pass after each epoch).
  auto test_dataset = torch::data::datasets::MNIST(root, torch::data::datasets::MNIST::Mode::kTest);
  auto data_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(std::move(dataset), 64);

  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto start = std::chrono::steady_clock::now();
  Net model;
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
  long steps = 0;
  for (int epoch = 1; epoch <= epochs && (max_steps <= 0 || steps < max_steps); ++epoch) {
    size_t batch_idx = 0;
    for (auto& batch : *data_loader) {
      auto data = batch.data, targets = batch.target;
      auto output = model.forward(data);
      auto loss = torch::nll_loss(output, targets);
      loss.backward();
      optimizer.step();
      optimizer.zero_grad();
      if (batch_idx++ % 10 == 0)
        std::fprintf(log, "Train Epoch: %d [%5ld/%5ld]\tLoss: %.4f\n", epoch, static_cast<long>(batch_idx * batch.data.size(0)),
                     static_cast<long>(dataset_size), loss.item<float>());
      if (++steps == max_steps) break;
    }
  }
  const auto loop_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  getrusage(RUSAGE_SELF, &after);
  if (log != stdout) std::fclose(log);
  std::printf("{\"language\": \"cpp\", \"steps\": %ld, \"loop_ns\": %lld, \"minor_faults\": %ld, \"major_faults\": %ld}\n",
              steps, static_cast<long long>(loop_ns), after.ru_minflt - before.ru_minflt,
              after.ru_majflt - before.ru_majflt);
  return 0;
}
