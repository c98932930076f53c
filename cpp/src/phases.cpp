// phases.cpp: the one place that says what each phase prepares (untimed), times, and produces
// (docs/method.md#what-is-measured), and what its product is checked against, taken untimed before the body (a
// Phase's check_before, left out with the product when the round checks are off); the products and their checks are
// in checks.cpp. The Python twin is phasebench/train/phases.py's PHASES.
#include "trainer.h"

#include <stdexcept>

namespace phasebench {

std::vector<Phase> Trainer::make_phases() {
  return {
      {"data_loading", Uses::nothing, nullptr, [this] { load_batch(); },
       [this] { return loaded_product(host_, host_index_); }},
      {"copy_to_device", Uses::step, [this] { load_batch(); }, [this] { copy_batch(); },
       [this] { return copied_product(host_, tensors_, device(), host_index_); }},
      {"optimizer_init", Uses::nothing, nullptr,
       [this] { fresh_.emplace(settings_.dropout, settings_.width, device()); },
       [this] { return fresh_product(*fresh_, *model_); }},
      {"forward", Uses::split_step, [this] { on_device(); }, [this] { tensors_.forward(*model_); },
       [this] { return checks_.forwarded(*model_, tensors_, device()); }, /*continues_itself=*/false,
       [this] { checks_.before_forward(device()); }},
      {"loss", Uses::split_step,
       [this] {
         on_device();
         tensors_.forward(*model_);
       },
       [this] { tensors_.compute_loss(); }, [this] { return loss_product(tensors_.loss, tensors_.loss); }},
      {"backward", Uses::split_step, [this] { forwarded(); }, [this] { tensors_.backward(); },
       [this] { return checks_.backward(*model_); }, /*continues_itself=*/false,
       [this] { checks_.before_backward(*model_); }},
      {"param_update", Uses::split_step,
       [this] {
         forwarded();
         tensors_.backward();
       },
       [this] { model_->update(); }, [this] { return checks_.updated(*model_); }, /*continues_itself=*/false,
       [this] { checks_.before_update(*model_); }},
      // Data parallel only (Trainer::attach): the all-reduce of the gradients backward left.
      {"grad_sync", Uses::split_step,
       [this] {
         if (!group_) throw std::invalid_argument("'grad_sync' is a phase of a data-parallel trainer only");
         forwarded();
         tensors_.backward();
       },
       [this] { group_->average_gradients(*model_); }, [this] { return checks_.synced(*model_); },
       /*continues_itself=*/false, [this] { checks_.before_grad_sync(*model_); }},
      {"progress_print", Uses::split_step, [this] { forwarded(); }, [this] { print_progress(); },
       [this] { return loss_product(tensors_.loss, tensors_.loss); }},
      {"train_step", Uses::step, nullptr,
       [this] {
         step();
         if (++steps_ % kLogInterval == 0) print_progress();
       },
       [this] {
         auto r = loss_product(tensors_.output, tensors_.loss);
         r.batch_index = host_index_;
         return r;
       },
       /*continues_itself=*/true},
      // Not training phases: the C++ example's per-step loss.item()
      // (docs/method.md#how-our-trainers-differ-from-pytorchexamples-and-why), and the empty timed region (timer
      // floor, worker_overhead).
      {"loss_item", Uses::split_step, [this] { forwarded(); }, [this] { (void)tensors_.loss.item<double>(); },
       [this] { return loss_product(tensors_.loss, tensors_.loss); }},
      {"noop", Uses::nothing, nullptr, [] {}, [] { return product(torch::empty({0}), true); }},
      // Timed once per worker, the first time a step needs it (docs/gpu.md#cuda-graphs-and-torchcompile); a
      // phase only of a step that has it.
      {"graph_capture", Uses::one_shot, [this] { warm_up(); }, [this] { step_->run_one_shot(*this); },
       [this] { return product(step_->one_shot_output(), all_finite(model_->parameters())); }},
  };
}

}  // namespace phasebench
