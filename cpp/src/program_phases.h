// program_phases.h: what the suite's other programs (regression.h, dcgan.h) share of their phases: the table a
// program's step is cut into, and the round that times one phase of it (program_phases.cpp). Each program keeps its
// phases' bodies and products; the seed's MNIST trainer (trainer.h) has a round of its own.
#pragma once

#include "phasebench.h"

#include "clock.h"

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace phasebench {

struct ProgramPhase {
  std::string name;
  std::function<void()> body;          // timed
  std::function<void()> check_before;  // untimed, before the body, with the checks on; may be empty
  std::function<pb_result()> product;  // after the body, with the checks on
};

// One program's phases, in the order its step runs them.
class ProgramPhases {
 public:
  // No phases: a trainer makes its table last in its constructor, from the members its bodies use.
  ProgramPhases() = default;
  // `program` names the program in the error for a phase it does not have.
  ProgramPhases(std::string program, std::vector<ProgramPhase> phases);

  std::vector<std::string> names() const;
  std::vector<ProgramPhase>::const_iterator begin() const { return phases_.begin(); }
  std::vector<ProgramPhase>::const_iterator end() const { return phases_.end(); }

  // One round of phase `name` (or "noop", the empty body): `release` frees what the last round left, `prepare` (may
  // be empty) gives the phase what the step before it would have left, the phases before it run untimed, then its
  // body is timed on `device`; with `checks`, its check_before runs before the body and `result` gets its product.
  Timing time_round(const std::string& name, bool checks, pb_result* result, const torch::Device& device,
                    BodyEvents* events, const std::function<void()>& release,
                    const std::function<void(const std::string& phase)>& prepare = nullptr) const;

 private:
  std::string program_;
  std::vector<ProgramPhase> phases_;
};

// What the programs' trainers and products share beyond their phase tables.
// The device a program's options name (NULL: cpu), refused where CUDA is asked for and not available; a bare "cuda"
// resolved as the seed's trainer resolves it (trainer.h resolve_device).
torch::Device program_device(const char* name);
// Whether t is defined and every value of it finite.
bool defined_and_finite(const torch::Tensor& t);
// Each parameter's gradient (undefined where it has none).
std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& parameters);
// How many of the tensors are defined and not all zero.
int32_t nonzero_tensors(const std::vector<torch::Tensor>& tensors);

}  // namespace phasebench
