// distributed.cpp: data-parallel training (docs/distributed.md), as pytorch/examples' cpp/distributed/dist-mnist.cpp
// does it: after backward, each gradient all-reduced (summed) through a c10d process group, waited for, and
// divided by the world size; no bucketing, no overlap with backward.
//
// The worker process made the group through torch.distributed (Gloo on cpu, NCCL on
// cuda), which registers it in c10d's group registry under its name; this file takes it from there
// (c10d::resolve_process_group, GroupRegistry.hpp) and calls it through the abstract ProcessGroup interface only.
// The wheel ships ProcessGroup.hpp and GroupRegistry.hpp but not the <gloo/...> headers ProcessGroupGloo.hpp
// includes, so constructing ProcessGroupGloo here would mean declaring gloo's types by hand. A pure C++
// program, built against a LibTorch that ships them, writes instead:
//   auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", c10d::TCPStoreOptions{...});
//   auto options = c10d::ProcessGroupGloo::Options::create();
//   options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface("lo"));
//   auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
// and from there on the same calls as below.
#include "process_group.h"

#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <stdexcept>
#include <string>

namespace phasebench {

struct ProcessGroup::Group {
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

ProcessGroup::ProcessGroup(const std::string& group_name)
    : group_(std::make_unique<Group>(Group{c10d::resolve_process_group(group_name)})),
      rank_(group_->group->getRank()),
      world_(group_->group->getSize()) {}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::average_gradients(Model& model) {
  for (auto& parameter : model.parameters()) {
    std::vector<torch::Tensor> gradient{parameter.mutable_grad()};
    group_->group->allreduce(gradient)->wait();
    parameter.mutable_grad().div_(static_cast<double>(world_));
  }
}

void ProcessGroup::barrier() { group_->group->barrier()->wait(); }

}  // namespace phasebench
