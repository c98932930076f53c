"""The numerics a worker trains under: the flags that decide which kernels cuda runs and in what precision, set by
the equivalence tests' workers (the trainer option `deterministic`) and left at torch's defaults by every timed
worker (docs/method.md#both-implementations-train-the-same-model).

On cuda, cuDNN picks its convolution algorithms by heuristics or by timing them (benchmark mode), some of them add
in any order (atomics), and it runs float32 convolutions in TF32 by default; cuBLAS may split a product's
reduction differently from one handle's workspace to another's. Two runs of the same training can then differ in the
last bits, and a difference that tips a max-pool's choice grows with every step. With the flags of DETERMINISTIC,
the same kernels run the same reductions in float32 in both languages, eager or replayed from a CUDA graph.

Each worker reports the flags in effect in its start reply (protocol.Started's `flags`): the Python worker reads
torch's, the C++ worker LibTorch's own through pb_read_numerics. torch is imported on the first call only: the
pytest process and the C++ worker import this module without loading torch.
"""

from __future__ import annotations

import os

# cuBLAS is deterministic with a fixed workspace per handle: ":4096:8" (or ":16:8") in the environment before the
# process's first cuBLAS handle, which torch's deterministic mode demands of every cuBLAS call on cuda.
CUBLAS_WORKSPACE_VARIABLE = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_WORKSPACE_CONFIG = ":4096:8"

FLAG_NAMES = ("deterministic_algorithms", "cudnn_deterministic", "cudnn_benchmark", "allow_tf32_cudnn",
              "allow_tf32_matmul", "cublas_workspace_config")
DETERMINISTIC = {"deterministic_algorithms": True, "cudnn_deterministic": True, "cudnn_benchmark": False,
                 "allow_tf32_cudnn": False, "allow_tf32_matmul": False,
                 "cublas_workspace_config": CUBLAS_WORKSPACE_CONFIG}
# torch's own defaults, as a timed worker keeps them; the workspace is whatever the worker's environment holds.
TORCH_DEFAULTS = {"deterministic_algorithms": False, "cudnn_deterministic": False, "cudnn_benchmark": False,
                  "allow_tf32_cudnn": True, "allow_tf32_matmul": False}


def environment(deterministic: bool) -> dict[str, str]:
    """What a worker's environment gets at its spawn, before it loads CUDA: the workspace, where deterministic."""
    return {CUBLAS_WORKSPACE_VARIABLE: CUBLAS_WORKSPACE_CONFIG} if deterministic else {}


def make_deterministic() -> None:
    """DETERMINISTIC's flags in this process's torch (the Python trainer's); the C++ trainer sets LibTorch's
    (cpp/src/trainer.cpp make_deterministic). The workspace comes from the environment (environment())."""
    import torch

    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def read() -> dict:
    """The flags in effect in this process's torch, by FLAG_NAMES."""
    import torch

    return {"deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32,
            "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "cublas_workspace_config": os.environ.get(CUBLAS_WORKSPACE_VARIABLE)}
