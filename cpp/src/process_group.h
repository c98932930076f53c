// process_group.h: data-parallel training's c10d process group (distributed.cpp; docs/distributed.md).
#pragma once

#include "model.h"

#include <memory>
#include <string>

namespace phasebench {

class ProcessGroup {
 public:
  // The group registered under group_name in c10d's registry (the worker made it through torch.distributed);
  // throws, naming it, where none is registered.
  explicit ProcessGroup(const std::string& group_name);
  ~ProcessGroup();

  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }
  // Each gradient all-reduced (summed) in turn, then divided by the world size: dist-mnist.cpp's algorithm.
  void average_gradients(Model& model);
  void barrier();

 private:
  struct Group;  // the c10d group, so that only distributed.cpp includes c10d's headers
  std::unique_ptr<Group> group_;
  int64_t rank_ = 0, world_ = 1;
};

}  // namespace phasebench
