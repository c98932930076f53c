// program_phases.cpp: the other programs' phase table and the round that times one of its phases
// (program_phases.h).
#include "program_phases.h"

#include "checks.h"
#include "trainer.h"  // resolve_device

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace phasebench {

ProgramPhases::ProgramPhases(std::string program, std::vector<ProgramPhase> phases)
    : program_(std::move(program)), phases_(std::move(phases)) {}

std::vector<std::string> ProgramPhases::names() const {
  std::vector<std::string> names;
  for (const auto& phase : phases_) names.push_back(phase.name);
  return names;
}

Timing ProgramPhases::time_round(const std::string& name, bool checks, pb_result* result, const torch::Device& device,
                                 BodyEvents* events, const std::function<void()>& release,
                                 const std::function<void(const std::string& phase)>& prepare) const {
  // "noop", no phase of the program: the empty body, the count mode's floor (phasebench/worker/count_server.py),
  // as the seed's trainers have it.
  static const ProgramPhase noop{"noop", [] {}, nullptr, [] { return product(torch::empty({0}), true); }};
  const bool empty = name == noop.name;
  // The phases before it, run untimed: none before the empty body.
  const auto phase = empty ? phases_.begin()
                           : std::find_if(phases_.begin(), phases_.end(),
                                          [&](const ProgramPhase& p) { return p.name == name; });
  if (!empty && phase == phases_.end()) {
    std::string known;
    for (const auto& p : phases_) known += (known.empty() ? "" : ", ") + p.name;
    throw std::invalid_argument("unknown phase '" + name + "' of the " + program_ + " program: " + known);
  }
  const ProgramPhase& chosen = empty ? noop : *phase;
  release();
  if (prepare) prepare(chosen.name);
  for (auto earlier = phases_.begin(); earlier != phase; ++earlier) earlier->body();
  if (checks && chosen.check_before) chosen.check_before();
  // Page faults across the round, read outside the clock (a system call each).
  const auto faults_before = page_faults();
  const Timing timing = timed(device, chosen.body, events);
  const auto faults_after = page_faults();
  if (result) {
    *result = checks ? chosen.product() : unset_product();
    record_timing(*result, timing, faults_before, faults_after);
  }
  return timing;
}

torch::Device program_device(const char* name) {
  torch::Device device(name ? name : "cpu");
  if (device.is_cuda() && !torch::cuda::is_available())
    throw std::runtime_error("device " + device.str() + " requested but CUDA is not available");
  return resolve_device(device);
}

bool defined_and_finite(const torch::Tensor& t) { return t.defined() && torch::isfinite(t).all().item<bool>(); }

std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) grads.push_back(p.grad());
  return grads;
}

int32_t nonzero_tensors(const std::vector<torch::Tensor>& tensors) {
  int32_t n = 0;
  for (const auto& t : tensors) n += t.defined() && t.ne(0).any().item<bool>();
  return n;
}

}  // namespace phasebench
