// data.h: where a trainer's batches come from: the MNIST splits, their IDX files checked first (idx.cpp), and the
// batch sources (sources.cpp; docs/implementations.md#implementations-and-workloads).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

namespace phasebench {

constexpr int64_t kImageSide = 28;
constexpr double kMean = 0.1307, kStd = 0.3081;

// A split of MNIST, its IDX files checked first (the training split when train, else the test split).
torch::data::datasets::MNIST load_mnist(const std::string& root, bool train);

using Batch = torch::data::Example<>;

// Where an implementation's batches come from: start an epoch, then take batches until there are none.
// phasebench/train/loaders.py holds the Python ones.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual void start_epoch() = 0;
  virtual bool next(Batch& batch) = 0;  // false at the end of the epoch
  // Whether t shares memory the source keeps for good (a slice of its split): such memory outlives
  // every round, so only the tensor itself can be checked for leftovers.
  virtual bool keeps_memory_of(const torch::Tensor&) const { return false; }
};

// Refuses a loader name make_source does not know, before any data is read.
void check_loader(const std::string& kind);

// "published" (LibTorch's loader) or "batched" (slices of the split normalized once, on the device).
// A data-parallel rank's shard (rank, world > 1): of each global batch, the images rank, rank + world, ...:
// DistributedSampler(shuffle=False)'s order with a batch of batch_size / world (docs/distributed.md); "batched" only.
std::unique_ptr<BatchSource> make_source(const std::string& kind, const torch::data::datasets::MNIST& mnist,
                                         int64_t batch_size, const torch::Device& device, int64_t rank = 0,
                                         int64_t world = 1);

}  // namespace phasebench
