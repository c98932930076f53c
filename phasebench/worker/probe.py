"""`python -m phasebench.worker.probe`: what torch says about this machine, as one JSON line, from a process of its
own, so that pytest's process imports no torch and never initializes CUDA (docs/architecture.md): torch's version,
its CUDA and cuDNN, the intra-op threads it picks, and whether it can use a GPU."""

from __future__ import annotations

import json
import sys


def facts() -> dict:
    import torch

    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "threads": torch.get_num_threads(),
        "cuda_available": torch.cuda.is_available(),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(facts()) + "\n")
