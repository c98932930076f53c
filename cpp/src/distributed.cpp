// distributed.cpp: data-parallel training (docs/distributed.md), as pytorch/examples' cpp/distributed/dist-mnist.cpp
// does it: after backward, each gradient all-reduced (summed) through a c10d process group, waited for, and
// divided by the world size; no bucketing, no overlap with backward.
//
// Route (a) of issue 24's spike: the worker process made the group through torch.distributed (Gloo on cpu, NCCL on
// cuda), which registers it in c10d's group registry under its name; this file takes it from there
// (c10d::resolve_process_group, GroupRegistry.hpp) and calls it through the abstract ProcessGroup interface only.
// The wheel ships ProcessGroup.hpp and GroupRegistry.hpp but not the <gloo/...> headers ProcessGroupGloo.hpp
// includes, so constructing ProcessGroupGloo here (route (b)) would mean declaring gloo's types by hand. A pure C++
// program, built against a LibTorch that ships them, writes instead:
//   auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", c10d::TCPStoreOptions{...});
//   auto options = c10d::ProcessGroupGloo::Options::create();
//   options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface("lo"));
//   auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
// and from there on the same calls as below.
#include "trainer.h"

#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <stdexcept>
#include <string>

namespace phasebench {

struct Trainer::Group {
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

void Trainer::attach(const std::string& group_name) {
  if (distributed()) throw std::invalid_argument("this trainer already belongs to a process group");
  auto group = c10d::resolve_process_group(group_name);  // throws, naming the group, where none is registered
  const int64_t rank = group->getRank(), world = group->getSize();
  const int64_t last = dataset_size_ - (epoch_batches() - 1) * batch_size_;
  if (batch_size_ % world != 0 || last % world != 0)
    throw std::invalid_argument("world size " + std::to_string(world) + " must divide the batch (" +
                                std::to_string(batch_size_) + ") and the epoch's last batch (" +
                                std::to_string(last) + ")");
  group_ = std::make_shared<Group>(Group{std::move(group)});
  rank_ = rank;
  world_ = world;
  source_ = make_source(loader_kind_, mnist_, batch_size_, device_, rank_, world_);
  epoch_started_ = false;
}

void Trainer::grad_sync() {
  if (!distributed()) throw std::logic_error("grad_sync without a process group");
  for (auto& parameter : model_->parameters()) {
    std::vector<torch::Tensor> gradient{parameter.mutable_grad()};
    group_->group->allreduce(gradient)->wait();
    parameter.mutable_grad().div_(static_cast<double>(world_));
  }
}

void Trainer::barrier() { group_->group->barrier()->wait(); }

std::vector<int64_t> Trainer::timed_steps(int64_t steps) {
  ensure_ready();
  std::vector<int64_t> ns;
  ns.reserve(steps);
  for (int64_t i = 0; i < steps; ++i) {
    ns.push_back(timed([this] {
                   step();
                   if (++steps_ % kLogInterval == 0) print_progress();
                 }).ns);
  }
  return ns;
}

}  // namespace phasebench
