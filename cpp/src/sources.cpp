// sources.cpp: where the trainer's batches come from (docs/implementations.md#implementations-and-workloads).
#include "data.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace phasebench {

namespace {

// The idiomatic LibTorch loader (docs/method.md#how-our-trainers-differ-from-pytorchexamples-and-why): Normalize, Stack,
// sequential batches.
auto make_loader(const torch::data::datasets::MNIST& mnist, int64_t batch_size) {
  return torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      torch::data::datasets::MNIST(mnist)
          .map(torch::data::transforms::Normalize<>(kMean, kStd))
          .map(torch::data::transforms::Stack<>()),
      batch_size);
}
using Loader = decltype(make_loader(std::declval<torch::data::datasets::MNIST>(), 1));

// cpp: LibTorch's MNIST, mapped through Normalize and Stack, in a sequential data loader.
class PublishedSource : public BatchSource {
 public:
  PublishedSource(const torch::data::datasets::MNIST& mnist, int64_t batch_size)
      : loader_(make_loader(mnist, batch_size)) {}
  void start_epoch() override { batches_.emplace(loader_->begin()); }
  bool next(Batch& batch) override {
    if (*batches_ == loader_->end()) return false;
    batch = **batches_;
    ++*batches_;
    return true;
  }

 private:
  Loader loader_;
  std::optional<torch::data::Iterator<Batch>> batches_;
};

// cpp-batched: the split normalized once with the transform's own operation, each batch a slice of it; on
// cuda the split lives on the device, so copy_to_device copies nothing.
class SplitSource : public BatchSource {
 public:
  SplitSource(const torch::data::datasets::MNIST& mnist, int64_t batch_size, const torch::Device& device,
              int64_t rank, int64_t world)
      : images_(torch::data::transforms::Normalize<>(kMean, kStd)(mnist.images()).to(device)),
        targets_(mnist.targets().to(device)),
        batch_size_(batch_size),
        rank_(rank),
        world_(world) {}
  void start_epoch() override { next_ = 0; }
  bool keeps_memory_of(const torch::Tensor& t) const override {
    return t.is_alias_of(images_) || t.is_alias_of(targets_);
  }
  bool next(Batch& batch) override {
    const int64_t size = images_.size(0);
    if (next_ >= size) return false;
    const int64_t end = std::min(next_ + batch_size_, size);
    // A rank's shard of the global batch: DistributedSampler(shuffle=False) hands rank r the indices r, r + W, ...
    // of the split, so its k-th batch of batch_size / W is the global batch k's images r, r + W, ...
    batch = Batch(images_.slice(0, next_ + rank_, end, world_), targets_.slice(0, next_ + rank_, end, world_));
    next_ = end;
    return true;
  }

 private:
  torch::Tensor images_, targets_;
  int64_t batch_size_;
  int64_t rank_, world_;
  int64_t next_ = 0;
};

}  // namespace

void check_loader(const std::string& kind) {
  if (kind != "published" && kind != "batched")
    throw std::invalid_argument("unknown loader '" + kind + "': published or batched");
}

std::unique_ptr<BatchSource> make_source(const std::string& kind, const torch::data::datasets::MNIST& mnist,
                                         int64_t batch_size, const torch::Device& device, int64_t rank,
                                         int64_t world) {
  if (kind == "published" && world == 1) return std::make_unique<PublishedSource>(mnist, batch_size);
  if (kind == "batched") return std::make_unique<SplitSource>(mnist, batch_size, device, rank, world);
  if (kind == "published") throw std::invalid_argument("a data-parallel rank's shard needs the batched loader");
  throw std::invalid_argument("unknown loader '" + kind + "': published or batched");
}

}  // namespace phasebench
