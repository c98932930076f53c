"""The pytest side of a training run launched by torchrun (docs/distributed.md#several-machines-torchrun): two torchrun
agents (--nnodes 2, c10d rendezvous, a shared --rdzv-id, --max-restarts 0), each starting --nproc-per-node ranks of
phasebench.worker.torchrun_rank. torchrun is the launcher; this only starts the two agents as two machines' shells
would.

Where the machine allows (root, `ip netns` and veth from iproute2), each agent runs in a network namespace of its own,
with its own address on a veth pair (10.224.0.1 and .2): two hosts as far as the network stack goes, on one kernel. Else
both run on 127.0.0.1 (--local-addr 127.0.0.1). The result says which. No torch here: the pytest process imports none.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from phasebench.repository import ROOT
from phasebench.worker import build

SUBNET = "10.224.0"
VETH = ("pbv0", "pbv1")


class TorchrunFailed(RuntimeError):
    """An agent failed: one line that says why (its last lines follow)."""


def namespaces_usable() -> str | None:
    """Why the agents cannot have namespaces of their own here (None when they can)."""
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("ip"):
        return "no ip (iproute2)"
    return None


class Network:
    """Two agents' network: two namespaces joined by a veth pair, or 127.0.0.1 for both."""

    def __init__(self, use_namespaces: bool = True):
        why = namespaces_usable() if use_namespaces else "asked for 127.0.0.1"
        self.names: tuple[str, str] | None = None
        if why is None:
            tag = f"pb{os.getpid() % 100000}{uuid.uuid4().hex[:4]}"
            names = (f"{tag}a", f"{tag}b")
            try:
                self._create(names)
                self.names = names
            except (subprocess.CalledProcessError, OSError) as error:
                why = f"ip netns failed: {error}"
                self._delete(names)
        self.why_loopback = why
        self.addresses = (f"{SUBNET}.1", f"{SUBNET}.2") if self.names else ("127.0.0.1", "127.0.0.1")
        self.interfaces = VETH if self.names else ("lo", "lo")

    @staticmethod
    def _create(names):
        def ip(*args):
            subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

        for name in names:
            ip("netns", "add", name)
        ip("link", "add", VETH[0], "netns", names[0], "type", "veth", "peer", "name", VETH[1], "netns", names[1])
        for index, name in enumerate(names):
            ip("-n", name, "addr", "add", f"{SUBNET}.{index + 1}/24", "dev", VETH[index])
            ip("-n", name, "link", "set", VETH[index], "up")
            ip("-n", name, "link", "set", "lo", "up")

    @staticmethod
    def _delete(names):
        for name in names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)

    def describe(self) -> str:
        if self.names:
            return (f"two network namespaces ({self.names[0]}, {self.names[1]}) joined by a veth pair, agents at "
                    f"{self.addresses[0]} and {self.addresses[1]}")
        return f"both agents on 127.0.0.1 ({self.why_loopback})"

    def prefix(self, node: int) -> list[str]:
        return ["ip", "netns", "exec", self.names[node]] if self.names else []

    def port(self) -> int:
        """The rendezvous port: in a fresh namespace any port is free (29400, torchrun's usual); on 127.0.0.1 one the
        kernel hands out now (the agent binds it a moment later: a small race, which a fresh namespace does not have)."""
        if self.names:
            return 29400
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]

    def close(self):
        if self.names:
            self._delete(self.names)
            self.names = None


def launch(impl: str, options: dict, steps: int, out: Path, library: str | None, timeout_s: float,
           dist_timeout_s: float = 60.0, nproc_per_node: int = 1, use_namespaces: bool = True) -> dict:
    """Two agents train `steps` steps; returns {"ranks": [each rank's result], "network": ..., "command": ...}."""
    network = Network(use_namespaces)
    try:
        port, rdzv_id = network.port(), f"phasebench-{uuid.uuid4().hex[:12]}"
        agents, logs = [], []
        agent_logs = [out.parent / f"{out.name}-agent{node}-logs" for node in range(2)]
        for node in range(2):
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                       "--nproc-per-node", str(nproc_per_node), "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", f"{network.addresses[0]}:{port}", "--rdzv-id", rdzv_id,
                       "--max-restarts", "0", "--local-addr", network.addresses[node],
                       # The agent's own log folder beside the run's: by default it makes /tmp/torchelastic_* and
                       # leaves it there, two per launch.
                       "--log-dir", str(agent_logs[node]),
                       # The first agent hosts the rendezvous store. torchrun infers it from the endpoint naming this
                       # machine's hostname or one of its addresses; a namespace's own address is neither, so say it.
                       "--rdzv-conf", f"is_host={'true' if node == 0 else 'false'},join_timeout={int(timeout_s)}",
                       "-m", "phasebench.worker.torchrun_rank", "--impl", impl, "--options", json.dumps(options),
                       "--steps", str(steps), "--out", str(out), "--timeout", str(dist_timeout_s)]
            command += ["--library", library] if library else []
            log = open(out.parent / f"{out.name}-agent{node}.log", "w+")
            logs.append(log)
            env = os.environ | build.sanitizer_runtime_env() | {"GLOO_SOCKET_IFNAME": network.interfaces[node],
                                                               "OMP_NUM_THREADS": str(options.get("threads") or 1)}
            agents.append(subprocess.Popen(network.prefix(node) + command, stdout=log, stderr=subprocess.STDOUT,
                                           cwd=ROOT, env=env))
        deadline = time.monotonic() + timeout_s
        failures = []
        for node, agent in enumerate(agents):
            try:
                code = agent.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for other in agents:
                    other.kill()
                code = f"killed after {timeout_s:g} s"
            if code != 0:
                logs[node].seek(0)
                tail = [line.rstrip() for line in logs[node].read().splitlines() if line.strip()][-8:]
                failures.append((node, code, tail))
        for log in logs:
            log.close()
        if failures:
            node, code, tail = failures[0]
            why = next((line for line in reversed(tail) if "Error" in line or "error" in line), tail[-1] if tail else "")
            raise TorchrunFailed(f"torchrun agent {node} ended with {code}: {why}\n" + "\n".join(tail))
        ranks = sorted((json.loads(path.read_text()) for path in out.glob("rank*.json")), key=lambda r: r["rank"])
        return {"ranks": ranks, "network": network.describe(), "namespaces": bool(network.names),
                "rdzv": f"c10d at {network.addresses[0]}:{port}, id {rdzv_id}", "command": " ".join(command[2:]),
                "agent_logs": [str(folder) for folder in agent_logs]}
    finally:
        network.close()
