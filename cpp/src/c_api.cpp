// c_api.cpp: the C ABI of include/phasebench.h. Each function runs its body inside guarded() and takes its
// session through session_of() (a regression trainer through regression_of(), a DCGAN trainer through dcgan_of();
// c_api.h), then asks the trainer.
#include "c_api.h"

#include <ATen/Context.h>

#include <algorithm>
#include <cstdlib>
#include <tuple>

using namespace phasebench;

namespace {

// Checks the caller's buffer length against the model before touching either.
std::vector<torch::Tensor> checked_params(std::vector<torch::Tensor> params, const float* values, int64_t count) {
  require(values, "parameter buffer");
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  if (count != total)
    throw std::length_error("parameter buffer holds " + std::to_string(count) +
                            " floats, the model has " + std::to_string(total));
  return params;
}

std::vector<torch::Tensor> params_for(pb_session session, const float* values, int64_t count) {
  return checked_params(session_of(session)->trainer.model().parameters(), values, count);
}

void copy_params_out(const std::vector<torch::Tensor>& params, float* values) {
  int64_t offset = 0;
  for (const auto& p : params) {
    auto flat = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    std::memcpy(values + offset, flat.data_ptr<float>(), flat.numel() * sizeof(float));
    offset += flat.numel();
  }
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

}  // namespace

extern "C" {

const char* pb_last_error(void) { return last_error().c_str(); }

int pb_abi_version(int32_t* version) {
  return guarded([&] {
    require(version, "version output");
    *version = PB_ABI_VERSION;
  });
}

int pb_read_numerics(pb_numerics_flags* flags) {
  return guarded([&] {
    require(flags, "numerics flags output");
    if (flags->struct_size != static_cast<int64_t>(sizeof(pb_numerics_flags)))
      throw std::invalid_argument("pb_numerics_flags of " + std::to_string(flags->struct_size) +
                                  " bytes, this library's has " + std::to_string(sizeof(pb_numerics_flags)) +
                                  ": the bindings and the library come from different sources");
    const auto& context = at::globalContext();
    const char* workspace = std::getenv("CUBLAS_WORKSPACE_CONFIG");
    const std::string value = workspace ? workspace : "";
    if (value.size() >= sizeof(flags->cublas_workspace_config))
      throw std::length_error("CUBLAS_WORKSPACE_CONFIG of " + std::to_string(value.size()) + " bytes, at most " +
                              std::to_string(sizeof(flags->cublas_workspace_config) - 1) + " are read");
    flags->deterministic_algorithms = context.deterministicAlgorithms();
    flags->cudnn_deterministic = context.deterministicCuDNN();
    flags->cudnn_benchmark = context.benchmarkCuDNN();
    flags->allow_tf32_cudnn = context.allowTF32CuDNN();
    flags->allow_tf32_matmul = context.allowTF32CuBLAS();
    flags->cublas_workspace_config_set = workspace != nullptr;
    std::memset(flags->cublas_workspace_config, 0, sizeof(flags->cublas_workspace_config));
    std::memcpy(flags->cublas_workspace_config, value.data(), value.size());
  });
}

int pb_create(const pb_options* options, pb_session* out) {
  return guarded([&] {
    require(options, "options");
    require(out, "output handle");
    if (options->struct_size != static_cast<int64_t>(sizeof(pb_options)))
      throw std::invalid_argument("pb_options of " + std::to_string(options->struct_size) +
                                  " bytes, this library's has " + std::to_string(sizeof(pb_options)) +
                                  ": the bindings and the library come from different sources");
    require(options->data_root, "data_root");
    *out = 0;
    *out = add_session(std::shared_ptr<Session>(new Session{Trainer(*options)}));
  });
}

// Refused ("session busy") while another call is using the session.
int pb_destroy(pb_session session) {
  return guarded([&] { remove_session(session); });
}

int pb_phase_names(pb_session session, char* buffer, int64_t capacity) {
  return guarded([&] { copy_out(joined(session_of(session)->trainer.phase_names()), buffer, capacity); });
}

int pb_run_phase_names(pb_session session, char* buffer, int64_t capacity) {
  return guarded([&] { copy_out(joined(session_of(session)->trainer.run_phase_names()), buffer, capacity); });
}

int pb_threads(pb_session session, int32_t* threads) {
  return guarded([&] {
    session_of(session);
    require(threads, "thread count output");
    *threads = torch::get_num_threads();
  });
}

int pb_run_phase(pb_session session, const char* phase, int64_t* duration_ns, pb_result* result) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(phase, "phase name");
    require(duration_ns, "duration output");
    *duration_ns = trainer.run_phase(phase, result).ns;
  });
}

int pb_set_round_checks(pb_session session, int32_t on) {
  return guarded([&] {
    const auto held = session_of(session);
    if (on != 0 && on != 1)
      throw std::invalid_argument("round checks " + std::to_string(on) + ": 1 (on) or 0 (off)");
    held->trainer.set_round_checks(on == 1);
  });
}

int pb_timer_floor(pb_session session, int64_t* duration_ns) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(duration_ns, "duration output");
    *duration_ns = trainer.timer_floor();
  });
}

int pb_param_count(pb_session session, int64_t* count) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(count, "count output");
    *count = 0;
    for (const auto& p : trainer.model().parameters()) *count += p.numel();
  });
}

int pb_param_layout(pb_session session, char* buffer, int64_t capacity) {
  return guarded([&] { copy_out(session_of(session)->trainer.model().layout(), buffer, capacity); });
}

int pb_get_params(pb_session session, float* values, int64_t count) {
  return guarded([&] { copy_params_out(params_for(session, values, count), values); });
}

int pb_set_params(pb_session session, const float* values, int64_t count) {
  return guarded([&] {
    torch::NoGradGuard no_grad;
    int64_t offset = 0;
    for (auto& p : params_for(session, values, count)) {
      auto source = torch::from_blob(const_cast<float*>(values) + offset, p.sizes(), torch::kFloat32);
      p.copy_(source);
      offset += p.numel();
    }
  });
}

int pb_epoch_batches(pb_session session, int64_t* count) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(count, "count output");
    *count = trainer.epoch_batches();
  });
}

int pb_get_batch(pb_session session, int64_t index, float* images, int64_t* labels, int64_t capacity,
                 int64_t* batch_size) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(images, "image buffer");
    require(labels, "label buffer");
    require(batch_size, "batch size output");
    auto batch = trainer.batch_at(index);
    const int64_t n = batch.data.size(0);
    if (n > capacity)
      throw std::length_error("batch of " + std::to_string(n) + " images, room for " + std::to_string(capacity));
    auto data = batch.data.to(torch::kFloat32).contiguous();
    auto target = batch.target.to(torch::kInt64).contiguous();
    std::memcpy(images, data.data_ptr<float>(), data.numel() * sizeof(float));
    std::memcpy(labels, target.data_ptr<int64_t>(), n * sizeof(int64_t));
    *batch_size = n;
  });
}

int pb_train_steps(pb_session session, int64_t steps, double* losses) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(losses, "loss buffer");
    for (int64_t i = 0; i < steps; ++i) {
      trainer.advance();
      losses[i] = trainer.last_loss();
    }
  });
}

int pb_evaluate(pb_session session, double* accuracy, double* mean_loss) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(accuracy, "accuracy output");
    require(mean_loss, "loss output");
    std::tie(*accuracy, *mean_loss) = trainer.evaluate();
  });
}

int pb_peak_device_memory(pb_session session, int64_t* bytes) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(bytes, "bytes output");
    *bytes = trainer.peak_device_memory();
  });
}

int pb_ensemble_create(pb_session session, int64_t models) {
  return guarded([&] { session_of(session)->trainer.start_ensemble(models); });
}

int pb_ensemble_step(pb_session session, int64_t* duration_ns, int64_t* cpu_ns, int64_t* thread_cpu_ns,
                     double* losses, int64_t capacity) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(duration_ns, "duration output");
    require(cpu_ns, "CPU time output");
    require(thread_cpu_ns, "thread CPU time output");
    require(losses, "loss buffer");
    if (capacity < trainer.ensemble_size())
      throw std::length_error("loss buffer of " + std::to_string(capacity) + ", " +
                              std::to_string(trainer.ensemble_size()) + " needed");
    std::vector<double> values;
    const Timing timing = trainer.ensemble_step(values);
    std::copy(values.begin(), values.end(), losses);
    *duration_ns = timing.ns;
    *cpu_ns = timing.cpu_ns;
    *thread_cpu_ns = timing.thread_cpu_ns;
  });
}

int pb_ensemble_get_params(pb_session session, int64_t member, float* values, int64_t count) {
  return guarded([&] {
    copy_params_out(checked_params(session_of(session)->trainer.ensemble_parameters(member), values, count), values);
  });
}

int pb_ensemble_destroy(pb_session session) {
  return guarded([&] { session_of(session)->trainer.stop_ensemble(); });
}

int pb_train(pb_session session, const pb_train_options* options, int64_t* phase_ns, int64_t phase_capacity,
             pb_train_totals* totals) {
  return guarded([&] {
    const auto held = session_of(session);
    auto& trainer = held->trainer;
    require(options, "run options");
    require(phase_ns, "phase time buffer");
    require(totals, "totals output");
    if (options->struct_size != static_cast<int64_t>(sizeof(pb_train_options)))
      throw std::invalid_argument("pb_train_options of " + std::to_string(options->struct_size) +
                                  " bytes, this library's has " + std::to_string(sizeof(pb_train_options)) +
                                  ": the bindings and the library come from different sources");
    const auto n = static_cast<int64_t>(trainer.run_phase_names().size());
    if (phase_capacity < n)
      throw std::length_error("phase time buffer of " + std::to_string(phase_capacity) + ", " +
                              std::to_string(n) + " needed");
    const RunTotals run = trainer.train({options->epochs, options->synchronize != 0, options->max_steps});
    std::copy(run.phase_ns.begin(), run.phase_ns.end(), phase_ns);
    *totals = {run.steps, run.loop_ns, run.cpu_ns};
  });
}

int pb_dist_attach(pb_session session, const char* group_name) {
  return guarded([&] {
    const auto held = session_of(session);
    require(group_name, "group name");
    held->trainer.attach(group_name);
  });
}

int pb_dist_steps(pb_session session, int64_t steps, int64_t* step_ns) {
  return guarded([&] {
    const auto held = session_of(session);
    require(step_ns, "step time buffer");
    if (steps < 0) throw std::invalid_argument("a negative number of steps");
    const auto ns = held->trainer.timed_steps(steps);
    std::copy(ns.begin(), ns.end(), step_ns);
  });
}

// -- the regression program (regression.h) ------------------------------------------------------------------------

int pb_regression_create(const pb_regression_options* options, pb_regression* out) {
  return guarded([&] {
    require(options, "options");
    require(out, "output handle");
    if (options->struct_size != static_cast<int64_t>(sizeof(pb_regression_options)))
      throw std::invalid_argument("pb_regression_options of " + std::to_string(options->struct_size) +
                                  " bytes, this library's has " + std::to_string(sizeof(pb_regression_options)) +
                                  ": the bindings and the library come from different sources");
    *out = 0;
    *out = add_regression(std::make_shared<RegressionTrainer>(*options));
  });
}

// Refused ("regression busy") while another call is using it.
int pb_regression_destroy(pb_regression trainer) {
  return guarded([&] { remove_regression(trainer); });
}

int pb_regression_phase_names(pb_regression trainer, char* buffer, int64_t capacity) {
  return guarded([&] { copy_out(joined(regression_of(trainer)->phase_names()), buffer, capacity); });
}

int pb_regression_run_phase(pb_regression trainer, const char* phase, int32_t checks, int64_t* duration_ns,
                            pb_result* result) {
  return guarded([&] {
    const auto held = regression_of(trainer);
    require(phase, "phase name");
    require(duration_ns, "duration output");
    if (checks != 0 && checks != 1)
      throw std::invalid_argument("round checks " + std::to_string(checks) + ": 1 (on) or 0 (off)");
    *duration_ns = held->run_phase(phase, checks == 1, result).ns;
  });
}

int pb_regression_timer_floor(pb_regression trainer, int64_t* duration_ns) {
  return guarded([&] {
    const auto held = regression_of(trainer);
    require(duration_ns, "duration output");
    *duration_ns = held->timer_floor();
  });
}

int pb_regression_train_steps(pb_regression trainer, int64_t steps, double* losses) {
  return guarded([&] {
    const auto held = regression_of(trainer);
    require(losses, "loss buffer");
    if (steps < 0) throw std::invalid_argument("a negative number of steps");
    for (int64_t i = 0; i < steps; ++i) losses[i] = held->step();
  });
}

int pb_regression_last_loss(pb_regression trainer, double* loss) {
  return guarded([&] {
    const auto held = regression_of(trainer);
    require(loss, "loss output");
    *loss = held->last_loss();
  });
}

int pb_regression_param_count(pb_regression trainer, int64_t* count) {
  return guarded([&] {
    const auto held = regression_of(trainer);
    require(count, "count output");
    *count = 0;
    for (const auto& p : held->parameters()) *count += p.numel();
  });
}

int pb_regression_get_params(pb_regression trainer, float* values, int64_t count) {
  return guarded([&] { copy_params_out(checked_params(regression_of(trainer)->parameters(), values, count), values); });
}

int pb_regression_get_batch(pb_regression trainer, float* features, float* targets, int64_t capacity,
                            int64_t* rows) {
  return guarded([&] {
    const auto held = regression_of(trainer);
    require(features, "feature buffer");
    require(targets, "target buffer");
    require(rows, "row count output");
    if (!held->features().defined()) {
      *rows = 0;
      return;
    }
    const auto x = held->features().detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const auto y = held->targets().detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t n = x.size(0);
    if (n > capacity)
      throw std::length_error("batch of " + std::to_string(n) + " rows, room for " + std::to_string(capacity));
    std::memcpy(features, x.data_ptr<float>(), x.numel() * sizeof(float));
    std::memcpy(targets, y.data_ptr<float>(), y.numel() * sizeof(float));
    *rows = n;
  });
}

// -- the DCGAN program (dcgan.h) ----------------------------------------------------------------------------------

int pb_dcgan_create(const pb_dcgan_options* options, pb_dcgan* out) {
  return guarded([&] {
    require(options, "options");
    require(out, "output handle");
    if (options->struct_size != static_cast<int64_t>(sizeof(pb_dcgan_options)))
      throw std::invalid_argument("pb_dcgan_options of " + std::to_string(options->struct_size) +
                                  " bytes, this library's has " + std::to_string(sizeof(pb_dcgan_options)) +
                                  ": the bindings and the library come from different sources");
    require(options->data_root, "data_root");
    *out = 0;
    *out = add_dcgan(std::make_shared<DcganTrainer>(*options));
  });
}

// Refused ("dcgan busy") while another call is using it.
int pb_dcgan_destroy(pb_dcgan trainer) {
  return guarded([&] { remove_dcgan(trainer); });
}

int pb_dcgan_phase_names(pb_dcgan trainer, char* buffer, int64_t capacity) {
  return guarded([&] { copy_out(joined(dcgan_of(trainer)->phase_names()), buffer, capacity); });
}

int pb_dcgan_run_phase(pb_dcgan trainer, const char* phase, int32_t checks, int64_t* duration_ns, pb_result* result) {
  return guarded([&] {
    const auto held = dcgan_of(trainer);
    require(phase, "phase name");
    require(duration_ns, "duration output");
    if (checks != 0 && checks != 1)
      throw std::invalid_argument("round checks " + std::to_string(checks) + ": 1 (on) or 0 (off)");
    *duration_ns = held->run_phase(phase, checks == 1, result).ns;
  });
}

int pb_dcgan_timer_floor(pb_dcgan trainer, int64_t* duration_ns) {
  return guarded([&] {
    const auto held = dcgan_of(trainer);
    require(duration_ns, "duration output");
    *duration_ns = held->timer_floor();
  });
}

int pb_dcgan_train_steps(pb_dcgan trainer, int64_t steps, double* g_losses) {
  return guarded([&] {
    const auto held = dcgan_of(trainer);
    require(g_losses, "loss buffer");
    const auto losses = held->train_steps(steps);
    std::copy(losses.begin(), losses.end(), g_losses);
  });
}

int pb_dcgan_last_loss(pb_dcgan trainer, double* loss) {
  return guarded([&] {
    const auto held = dcgan_of(trainer);
    require(loss, "loss output");
    *loss = held->last_loss();
  });
}

int pb_dcgan_param_count(pb_dcgan trainer, int64_t* count) {
  return guarded([&] {
    const auto held = dcgan_of(trainer);
    require(count, "count output");
    *count = 0;
    for (const auto& t : held->state_tensors()) *count += t.numel();
  });
}

int pb_dcgan_get_params(pb_dcgan trainer, float* values, int64_t count) {
  return guarded([&] { copy_params_out(checked_params(dcgan_of(trainer)->state_tensors(), values, count), values); });
}

int pb_dcgan_get_batch(pb_dcgan trainer, float* images, float* labels, int64_t capacity, int64_t* rows) {
  return guarded([&] {
    const auto held = dcgan_of(trainer);
    require(images, "image buffer");
    require(labels, "label buffer");
    require(rows, "row count output");
    if (!held->real_images().defined() || !held->real_labels().defined()) {
      *rows = 0;
      return;
    }
    const auto x = held->real_images().detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const auto y = held->real_labels().detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t n = x.size(0);
    if (n > capacity)
      throw std::length_error("batch of " + std::to_string(n) + " images, room for " + std::to_string(capacity));
    std::memcpy(images, x.data_ptr<float>(), x.numel() * sizeof(float));
    std::memcpy(labels, y.data_ptr<float>(), y.numel() * sizeof(float));
    *rows = n;
  });
}

}  // extern "C"
