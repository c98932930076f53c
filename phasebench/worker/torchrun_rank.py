"""One rank of a data-parallel training run launched by torchrun (docs/distributed.md#several-machines-torchrun):

    torchrun --nnodes 2 --nproc-per-node N --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID \\
        --max-restarts 0 [--local-addr ADDR] -m phasebench.worker.torchrun_rank --impl NAME --options JSON \\
        --steps S --out DIR [--library PATH]

torchrun is the launcher: this module starts the implementation's trainer as the suite's worker would (the same
adapters, phasebench/worker/server.py), joins the group from torchrun's environment (env://; under torchrun's agent
store every rank, rank 0 included, is a store client, which the C++ library never sees: it takes the group from c10d's
registry), trains S steps each timed alone, and writes DIR/rank<RANK>.json: its set-up, joining and loop times, each
step's, and a digest of its parameters (every rank must end with the same).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import sys
import time
from pathlib import Path

from phasebench import registry
from phasebench.devices import rank_device
from phasebench.worker import group
from phasebench.worker.server import CppAdapter, PythonAdapter, on_the_shared_clock


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", required=True)
    parser.add_argument("--options", required=True, help="the trainer's options, JSON")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--library")
    parser.add_argument("--timeout", type=float, default=60.0, help="the process group's timeout, seconds")
    args = parser.parse_args(argv)
    options = json.loads(args.options)
    # One GPU a rank: this node's local rank's (NCCL)
    options["device"] = rank_device(options.get("device", "cpu"), int(os.environ["LOCAL_RANK"]))
    impl = registry.get(args.impl)
    adapter = PythonAdapter(options) if impl.language == "python" else CppAdapter(options, args.library)
    trainer = adapter.trainer
    started = time.perf_counter_ns()
    try:
        name = group.join_env(options.get("device", "cpu"), args.timeout)
    except group.StoreFailed as error:
        print(f"phasebench.worker.torchrun_rank: {error}", file=sys.stderr)
        return 2
    join_ns = time.perf_counter_ns() - started
    trainer.attach(name)
    step_ns, clock = on_the_shared_clock(lambda: trainer.timed_steps(args.steps))
    params = adapter.get_params()
    rank = int(os.environ["RANK"])
    result = {"rank": rank, "world_size": int(os.environ["WORLD_SIZE"]), "local_rank": int(os.environ["LOCAL_RANK"]),
              "group_rank": int(os.environ.get("GROUP_RANK", 0)), "host": socket.gethostname(),
              "master": f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}",
              "agent_store": os.environ.get("TORCHELASTIC_USE_AGENT_STORE"),
              "setup_ns": adapter.setup_ns, "join_ns": join_ns, "step_ns": step_ns,
              "loop_ns": clock["ended_at_ns"] - clock["started_at_ns"], "threads": trainer.threads(),
              "params_sha256": hashlib.sha256(params).hexdigest()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank{rank}.json").write_text(json.dumps(result))
    trainer.close()
    group.leave()
    return 0


if __name__ == "__main__":
    sys.exit(main())
