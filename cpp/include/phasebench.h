/* phasebench.h: the C ABI of the C++ trainers, MNIST's, the regression program's and the DCGAN program's (cpp/src/;
 * its functions are defined in cpp/src/c_api.cpp).
 * Test-only entry points live in phasebench_testing.h, outside this production ABI.
 *
 * Every function returns PB_OK or PB_ERROR, but pb_last_error, which returns the message: on PB_ERROR it holds one
 * for this thread, which the Python side raises verbatim. No C++ exception crosses this boundary, and a null, unknown
 * or destroyed handle is an error, not a crash. */
#ifndef PHASEBENCH_H
#define PHASEBENCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* Exported from a library built with -fvisibility=hidden (cpp/Makefile). */
#pragma GCC visibility push(default)

#define PB_OK 0
#define PB_ERROR 1
/* Bumped whenever a struct or a signature below changes: phasebench/worker/cpp_lib.py refuses a library whose
 * pb_abi_version() differs (or that lacks it), instead of misreading memory. */
#define PB_ABI_VERSION 11

/* A session: one model, optimizer and data loader. Its handle is a token (a slot and a generation), never an
 * address; 0 is no session, and a destroyed session's token stays refused. */
typedef uint64_t pb_session;

typedef struct {
    int64_t struct_size;    /* sizeof(pb_options) as the caller knows it; pb_create refuses another size */
    const char* data_root;  /* folder holding the MNIST IDX files */
    const char* device;     /* "cpu", "cuda" or "cuda:N" */
    const char* log_path;   /* progress_print's log sink */
    int32_t threads;        /* intra-op threads; 0 keeps LibTorch's default */
    int64_t seed;           /* torch::manual_seed */
    double dropout;         /* 0.5 as published; 0 turns both dropouts off (equivalence tests) */
    /* The workload (docs/implementations.md#implementations-and-workloads): every hidden size times width, and the batch size. */
    int64_t width;          /* 1 as published */
    int64_t batch_size;     /* 64 as published */
    const char* loader;     /* "published" (LibTorch's MNIST, Normalize, Stack) or "batched" (slices of the
                               split normalized once, on the device on cuda); NULL is "published" */
    const char* step;       /* "eager" (NULL) or "graphs": the whole step captured into CUDA graphs, one per batch
                               shape, after warm-up steps, and replayed (cuda only) */
    /* Appended in ABI 9. 1: the equivalence tests' numerics, set in the process's LibTorch before the session is
     * built (deterministic algorithms, cuDNN deterministic without its benchmark, no TF32 in convolutions or matrix
     * products; phasebench/determinism.py); cuBLAS's workspace comes from the environment
     * (CUBLAS_WORKSPACE_CONFIG=:4096:8 before CUDA loads). 0: nothing is set (every timed worker). Else refused. */
    int32_t deterministic;
} pb_options;

/* The numerics settings in effect in this process's LibTorch (at::globalContext()), as pb_read_numerics reads them
 * back: 1 or 0 each. */
typedef struct {
    int64_t struct_size;                 /* sizeof(pb_numerics_flags) as the caller knows it; another is refused */
    int32_t deterministic_algorithms;    /* deterministicAlgorithms() */
    int32_t cudnn_deterministic;         /* deterministicCuDNN() */
    int32_t cudnn_benchmark;             /* benchmarkCuDNN() */
    int32_t allow_tf32_cudnn;            /* allowTF32CuDNN() */
    int32_t allow_tf32_matmul;           /* allowTF32CuBLAS() */
    int32_t cublas_workspace_config_set; /* 1: CUBLAS_WORKSPACE_CONFIG is in the process's environment */
    char cublas_workspace_config[64];    /* its value, NUL-terminated ("" where unset); a longer one is refused */
} pb_numerics_flags;

/* What a phase produced, so that a plain test can check it did real work. The checks are -1
 * (integers) or NaN (doubles) where a phase has none (docs/method.md#what-is-measured). A round run with the
 * session's round checks off (pb_set_round_checks) makes no product: only cpu_ns, thread_cpu_ns and the page faults
 * are filled, and every other field is unset (loss NaN, ndim 0, finite -1, the checks -1 or NaN). */
typedef struct {
    double loss;             /* the loss this phase computed or read; NaN when it has none */
    int64_t shape[4];        /* shape of the phase's main tensor (see Trainer::make_phases, cpp/src/phases.cpp) */
    int32_t ndim;
    int32_t finite;          /* 1 when every value checked is finite */
    int64_t batch_index;     /* data_loading, copy_to_device, train_step: the batch's index in its epoch */
    int64_t cpu_ns;          /* the process's CPU time across the timed body (all threads) */
    int64_t thread_cpu_ns;   /* the CPU time of the thread that ran it */
    int32_t leftovers;       /* tensors earlier rounds left that were alive when the clock started */
    int32_t on_device;       /* copy_to_device: data and target are on the requested device */
    int32_t matches_host;    /* copy_to_device: and equal to the host batch */
    int32_t resident;        /* copy_to_device: nothing was copied, the batch already lived on the device */
    int32_t nonzero_grads;   /* backward: parameters with a non-zero gradient */
    int32_t zero_before;     /* backward: every gradient was unset or zero when the clock started */
    int32_t distinct;        /* optimizer_init: new parameters, sharing neither memory nor values */
    double recompute_error;  /* forward: max |output - the model run again with the same draws| */
    double update_error;     /* param_update: max |w - (w0 - lr * buf)| of conv1.weight */
    double moved;            /* param_update: max |w - w0| of conv1.weight */
    int64_t minor_faults;    /* the process's minor and major page faults across the round (getrusage, */
    int64_t major_faults;    /* read just outside the clock) */
    /* Appended in ABI 9, after every earlier field, which keep their offsets. On cuda only; -1 on cpu, and in a
     * library built without the CUDA runtime's headers (docs/method.md#what-is-measured): */
    int64_t host_cpu_ns;     /* the CPU time of the thread that ran the body up to its end, before the closing
                                synchronize (thread_cpu_ns includes that synchronize, which can spin) */
    int64_t gpu_ns;          /* the time between CUDA events recorded on the current stream just before and just
                                after the body (the stream's span, docs/gpu.md#host-cpu-and-gpu-time) */
} pb_result;

const char* pb_last_error(void);

/* PB_ABI_VERSION as this library was built. */
int pb_abi_version(int32_t* version);

/* The process's numerics flags (pb_numerics_flags), read from LibTorch and the environment: no session needed. */
int pb_read_numerics(pb_numerics_flags* flags);

/* The library copies what it needs of the options' strings: the caller may free or change them once pb_create
 * has returned. */
int pb_create(const pb_options* options, pb_session* out);
/* Refused ("session busy") while another thread's call is using the session; no call ever holds the library's
 * lock for its whole length, so calls on different sessions never wait for one another. */
int pb_destroy(pb_session session);

/* Comma-separated training phase names, in order, as this library implements them. */
int pb_phase_names(pb_session session, char* buffer, int64_t capacity);

/* Comma-separated names of pb_train's totals, in the order it fills phase_ns: pb_phase_names' names, except
 * that step_in_run (a step replayed whole and its log line, inside the run) stands where train_step (which
 * also loads and copies its batch) stands there. */
int pb_run_phase_names(pb_session session, char* buffer, int64_t capacity);

/* The intra-op thread count in effect (at::get_num_threads), to check it matches Python's. */
int pb_threads(pb_session session, int32_t* threads);

/* Release what earlier rounds left, prepare the phase untimed, then time its body: synchronize,
 * clock, body, synchronize, clock (on cuda: an event recorded on each side of the body, and the thread's CPU time
 * read before the closing synchronize). Also "loss_item" and "noop", which are not training phases.
 * "graph_capture" (step "graphs") runs once per session: a second request is an error; a phase that
 * steps before it runs its warm-up steps and the capture first, untimed. */
int pb_run_phase(pb_session session, const char* phase, int64_t* duration_ns, pb_result* result);

/* Whether the session's next pb_run_phase rounds do what proves their work
 * (docs/method.md#switches-for-the-intervention-study): on (1, a new session's setting), each round takes weak
 * references to what earlier rounds left and counts those alive when the clock starts, takes what the product is
 * checked against before the body (the generator's state, the gradients, conv1's weight) and makes the product after
 * it. Off (0), it does none of that, only the release of what earlier rounds left and the phase's own preparation;
 * its pb_result holds the round's CPU times and page faults, nothing else. The clock holds the same body either way.
 * Any other value is refused. pb_train, pb_dist_steps and pb_ensemble_step make no product and are not affected. */
int pb_set_round_checks(pb_session session, int32_t on);

/* The median time of the empty phase in this session: what the clock itself costs. */
int pb_timer_floor(pb_session session, int64_t* duration_ns);

/* Parameters as one flat float32 buffer, in named_parameters() order. */
int pb_param_count(pb_session session, int64_t* count);
int pb_param_layout(pb_session session, char* buffer, int64_t capacity); /* "name d0xd1...;" */
int pb_get_params(pb_session session, float* values, int64_t count);
int pb_set_params(pb_session session, const float* values, int64_t count);

/* Batch `index` of an epoch from a fresh loader: up to `capacity` images (28*28 floats each). */
int pb_epoch_batches(pb_session session, int64_t* count);
int pb_get_batch(pb_session session, int64_t index, float* images, int64_t* labels,
                 int64_t capacity, int64_t* batch_size);

/* `steps` training steps from the session's loader; losses[i] is step i's loss. */
int pb_train_steps(pb_session session, int64_t steps, double* losses);

/* Accuracy (percent) and mean loss on the test split. */
int pb_evaluate(pb_session session, double* accuracy, double* mean_loss);

typedef struct {
    int64_t struct_size;  /* sizeof(pb_train_options) as the caller knows it; pb_train refuses another size */
    int32_t epochs;
    int32_t synchronize;  /* 0: only the whole loop is timed (and a one-shot phase) */
    int64_t max_steps;    /* above 0: stop after that many steps (a check, not the published run) */
} pb_train_options;

typedef struct {
    int64_t steps;    /* the steps trained */
    int64_t loop_ns;  /* the whole loop: optimizer init and every epoch */
    int64_t cpu_ns;   /* the process CPU time across the timed bodies */
} pb_train_totals;

/* The published run: optimizer init, then `epochs` epochs. With synchronize != 0 each phase is timed as in
 * pb_run_phase and phase_ns[i] totals name i of pb_run_phase_names (step_in_run stays 0 unless the step is one
 * graph); with 0 no phase is timed and only the whole loop is, and graph_capture (timed once, outside any step,
 * either way). Where the step is one graph, step_in_run times it whole, with its log line, and forward, loss,
 * backward, param_update and progress_print stay 0. phase_capacity: phase_ns's length, at least the names'. */
int pb_train(pb_session session, const pb_train_options* options, int64_t* phase_ns, int64_t phase_capacity,
             pb_train_totals* totals);

/* Ensembles (docs/gpu.md#concurrent-jobs-and-ensembles): `models` (1 to 4096) independent Nets, member k
 * (from 1) built right after torch::manual_seed(k), each with its own SGD, trained one after another on the
 * same batches. It replaces the session's last ensemble and reseeds the generator; the session's own model
 * is left as it is. */
int pb_ensemble_create(pb_session session, int64_t models);

/* One step of every member on the session's next batch: the batch is loaded and copied to the device
 * untimed, then the members' forward, loss, backward and update are timed as pb_run_phase times a phase
 * (cpu_ns and thread_cpu_ns as in pb_result). losses[k] is member k's loss; capacity >= the member count. */
int pb_ensemble_step(pb_session session, int64_t* duration_ns, int64_t* cpu_ns, int64_t* thread_cpu_ns,
                     double* losses, int64_t capacity);

/* Member `member`'s (from 0) parameters, as pb_get_params gives the session model's. */
int pb_ensemble_get_params(pb_session session, int64_t member, float* values, int64_t count);

/* Frees the ensemble; none is not an error. */
int pb_ensemble_destroy(pb_session session);

/* Peak bytes allocated on the session's device since its last pb_train began (LibTorch's caching
 * allocator); -1 on cpu. */
int pb_peak_device_memory(pb_session session, int64_t* bytes);

/* Data parallel (docs/distributed.md): the session joins the c10d process group registered under group_name (the
 * worker made it through torch.distributed, which registers it in c10d's group registry). From then on its
 * batches are this rank's shard of each global batch (the batched loader only; the world size must divide the
 * batch and the epoch's last batch), every step all-reduces each gradient after backward and divides it by the
 * world size (pytorch/examples' dist-mnist.cpp), the phase "grad_sync" times that alone, and every phase's clock
 * starts just after a barrier. A collective that a dead or hung peer never joins fails after the group's timeout. */
int pb_dist_attach(pb_session session, const char* group_name);

/* `steps` training steps as the phase train_step runs them (loading and copying the shard, the step, its log line
 * when due), each timed alone: step_ns[i] is step i's time. */
int pb_dist_steps(pb_session session, int64_t steps, int64_t* step_ns);

/* pytorch/examples' regression program (cpp/src/regression.cpp; docs/method.md#the-regression-program), added in
 * ABI 10: a polynomial of degree 4 fitted by torch::nn::Linear(4, 1) with torch::smooth_l1_loss and
 * torch::optim::SGD(0.1), its step cut into the phases pb_regression_phase_names lists. A regression trainer's
 * handle is a token as a session's is, from a table of its own: a session's handle is refused here, and this one
 * by the session functions. */
typedef uint64_t pb_regression;

typedef struct {
    int64_t struct_size;  /* sizeof(pb_regression_options) as the caller knows it; another size is refused */
    const char* device;   /* "cpu", "cuda" or "cuda:N"; NULL is "cpu" */
    int32_t threads;      /* intra-op threads; 0 keeps LibTorch's default */
    int64_t seed;         /* torch::manual_seed, before the target polynomial and the model are drawn */
    int64_t batch_size;   /* 32 as published */
} pb_regression_options;

int pb_regression_create(const pb_regression_options* options, pb_regression* out);
/* Refused ("regression busy") while another thread's call is using it. */
int pb_regression_destroy(pb_regression trainer);

/* Comma-separated phase names, in the order a step runs them. */
int pb_regression_phase_names(pb_regression trainer, char* buffer, int64_t capacity);

/* Release what the last round left, run the step's phases before this one untimed (zero_grad's round first gives
 * the model gradients to zero where it has none), then time its body as pb_run_phase does. checks: 1 makes the
 * product (pb_result: shape, finite and loss, and the checks the phase has), 0 none (every field but the CPU times
 * and page faults unset, as with pb_set_round_checks off); any other value is refused. */
int pb_regression_run_phase(pb_regression trainer, const char* phase, int32_t checks, int64_t* duration_ns,
                            pb_result* result);

/* The median time of the empty phase for this trainer's device. */
int pb_regression_timer_floor(pb_regression trainer, int64_t* duration_ns);

/* `steps` whole steps (every phase in order); losses[i] is step i's loss. */
int pb_regression_train_steps(pb_regression trainer, int64_t steps, double* losses);

/* The loss the last step (or loss_item round) read; NaN before any. */
int pb_regression_last_loss(pb_regression trainer, double* loss);

/* The model's parameters as one flat float32 buffer (the weight's 4 values, then the bias). */
int pb_regression_param_count(pb_regression trainer, int64_t* count);
int pb_regression_get_params(pb_regression trainer, float* values, int64_t count);

/* The last batch drawn: `rows` rows of 4 features (x, x^2, x^3, x^4) and their targets; room for `capacity` rows.
 * rows is 0 where no batch is held. */
int pb_regression_get_batch(pb_regression trainer, float* features, float* targets, int64_t capacity,
                            int64_t* rows);

/* pytorch/examples' DCGAN program (cpp/src/dcgan.cpp), added in ABI 11: a generator of transposed convolutions and
 * a discriminator of convolutions trained on MNIST by torch::binary_cross_entropy and two torch::optim::Adam (lr 2e-4,
 * betas 0.5 and 0.5), its step cut into the phases pb_dcgan_phase_names lists. Its batches come in order
 * (SequentialSampler) and on the calling thread, as the MNIST program's do; past the epoch's last batch a new epoch
 * starts. A DCGAN trainer's handle is a token from a table of its own: a session's or a regression trainer's handle
 * is refused here, and this one by their functions. */
typedef uint64_t pb_dcgan;

typedef struct {
    int64_t struct_size;    /* sizeof(pb_dcgan_options) as the caller knows it; another size is refused */
    const char* device;     /* "cpu", "cuda" or "cuda:N"; NULL is "cpu" */
    int32_t threads;        /* intra-op threads; 0 keeps LibTorch's default */
    int64_t seed;           /* torch::manual_seed, before the generator and the discriminator are drawn */
    int64_t batch_size;     /* 64 as published */
    const char* data_root;  /* the folder holding MNIST/raw (the IDX files of the training split) */
    const char* log_path;   /* the progress lines' file, appended to; NULL or "": stdout */
} pb_dcgan_options;

/* The library copies what it needs of the options' strings. */
int pb_dcgan_create(const pb_dcgan_options* options, pb_dcgan* out);
/* Refused ("dcgan busy") while another thread's call is using it. */
int pb_dcgan_destroy(pb_dcgan trainer);

/* Comma-separated phase names, in the order a step runs them. */
int pb_dcgan_phase_names(pb_dcgan trainer, char* buffer, int64_t capacity);

/* Release what the last round left, run the step's phases before this one untimed, then time its body as
 * pb_run_phase does. checks: 1 makes the product (pb_result: shape, finite and loss, and the checks the phase has:
 * data_loading's batch_index; copy_to_device's on_device, matches_host and resident; d_real's and g_loss's
 * zero_before and nonzero_grads, d_fake's nonzero_grads, over the discriminator's or the generator's parameters;
 * d_step's and g_step's moved and update_error, of the discriminator's first convolution's weight or the generator's
 * conv1.weight against Adam's update from its state after the step), 0 none (every field but the CPU times and page
 * faults unset); any other value is refused. */
int pb_dcgan_run_phase(pb_dcgan trainer, const char* phase, int32_t checks, int64_t* duration_ns, pb_result* result);

/* The median time of the empty phase for this trainer's device. */
int pb_dcgan_timer_floor(pb_dcgan trainer, int64_t* duration_ns);

/* `steps` whole steps (every phase in order, progress_print only when the steps trained since creation reach a
 * multiple of 10); g_losses[i] is step i's generator loss, all read once after the last step. */
int pb_dcgan_train_steps(pb_dcgan trainer, int64_t steps, double* g_losses);

/* The generator loss the last step (or progress_print round) read; NaN before any. */
int pb_dcgan_last_loss(pb_dcgan trainer, double* loss);

/* Every float tensor of the two models as one flat float32 buffer: the generator's parameters, the discriminator's,
 * then the generator's and the discriminator's batch norm running means and variances, each in module order. */
int pb_dcgan_param_count(pb_dcgan trainer, int64_t* count);
int pb_dcgan_get_params(pb_dcgan trainer, float* values, int64_t count);

/* The last step's real images (`rows` of 28*28 floats, normalized) and the labels d_real drew for them; room for
 * `capacity` rows. rows is 0 where no batch is held or no labels were drawn since the last round's release. */
int pb_dcgan_get_batch(pb_dcgan trainer, float* images, float* labels, int64_t capacity, int64_t* rows);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
