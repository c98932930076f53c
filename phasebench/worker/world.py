"""The pytest side of a data-parallel world (docs/distributed.md): W of the suite's own workers of one implementation,
each one rank of a process group, asked the same request together.

Rank 0 opens the TCPStore on 127.0.0.1 port 0 and reports the port the kernel gave it; the others are handed it. A
request goes to every rank before any reply is read (the ranks meet in the collectives); a rank that dies or hangs
makes its peers' collectives fail within the group's timeout (--dist-timeout), after which the ranks still owing a
reply are killed: the failure names each rank and its cause, the culprit first, and the world is not used again.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from phasebench.devices import rank_device
from phasebench.worker.client import Worker, WorkerDied, describe_exit
from phasebench.worker.protocol import DistJoin, DistStore, Request, Start

GRACE_S = 5.0  # after the first rank failed: how much longer than the group's timeout its peers may take


class WorldFailed(RuntimeError):
    """A rank of the world failed; the message names every rank that did and why."""


class World:
    def __init__(self, spawns, device: str, timeout_s: float):
        """spawns: one callable per rank that starts its worker; timeout_s: the process group's timeout."""
        self.device, self.timeout_s, self.size = device, timeout_s, len(spawns)
        self.workers: list[Worker] = []
        self.broken = False
        self.replaced: str | None = None  # what this world replaced in its pool (WorldPool.get)
        with ThreadPoolExecutor(self.size) as pool:
            futures = [pool.submit(spawn) for spawn in spawns]
        self.workers = [future.result() for future in futures if future.exception() is None]
        failed = [future.exception() for future in futures if future.exception() is not None]
        if failed:
            self.kill()
            raise failed[0]
        try:
            self.port = self.workers[0].request(DistStore(self.size, timeout_s)).port
            self.joined = self.request_all([DistJoin(rank, self.size, rank_device(device, rank), timeout_s,
                                                     self.port) for rank in range(self.size)])
        except BaseException:
            self.kill()
            raise

    def restart(self, options: list[dict]) -> None:
        """Every rank's trainer started again with other options, one dict a rank (the equivalence tests: dropout),
        in the same group."""
        self.request_all([Start(each) for each in options])
        self.joined = self.request_all([DistJoin(rank, self.size, rank_device(self.device, rank),
                                                 self.timeout_s, self.port) for rank in range(self.size)])

    @property
    def name(self) -> str:
        return f"{self.workers[0].impl} world of {self.size} on {self.device}"

    def alive(self) -> bool:
        return not self.broken and all(worker.alive() for worker in self.workers)

    def request_all(self, message: Request | list[Request], timeout: float | None = None) -> list:
        """Every rank's reply to `message` (or to message[rank], a list), in rank order; WorldFailed names the ranks
        that failed, the one that died or hung first."""
        messages = message if isinstance(message, list) else [message] * self.size
        for worker, each in zip(self.workers, messages):
            worker.send(each)
        pool, hung = ThreadPoolExecutor(self.size), set()
        futures = [pool.submit(worker.receive, each, timeout) for worker, each in zip(self.workers, messages)]
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        if pending and any(future.exception() for future in done):
            # A rank failed: its peers fail within the group's timeout; whoever still owes a reply after that hangs.
            done, pending = wait(pending, timeout=self.timeout_s + GRACE_S)
            for rank, (worker, future) in enumerate(zip(self.workers, futures)):
                if future in pending:
                    hung.add(rank)
                    worker.process.kill()
            wait(pending)
        pool.shutdown()
        failures = [(rank, future.exception()) for rank, future in enumerate(futures) if future.exception()]
        if failures:
            self.broken = True
            self.kill()
            raise WorldFailed(self.describe(failures, messages[0], hung))
        return [future.result() for future in futures]

    def describe(self, failures, message, hung=()) -> str:
        """The culprits first (a rank that died, or that was killed when it did not answer), then the peers their
        death made fail, each with its cause in one line."""
        what = message.what

        def line(rank, error):
            if rank in hung:
                return (f"rank {rank}: hung: no answer {self.timeout_s + GRACE_S:g} s after a peer failed (the group's "
                        f"timeout, --dist-timeout {self.timeout_s:g} s, + {GRACE_S:g} s), killed")
            return f"rank {rank}: {str(error).splitlines()[0]}"

        culprits = [(rank, error) for rank, error in failures if isinstance(error, WorkerDied) or rank in hung]
        peers = [(rank, error) for rank, error in failures if (rank, error) not in culprits]
        if not culprits:  # every rank answered with an error of its own (a usage error, a store that failed)
            return f"{self.name}, '{what}': " + "; ".join(line(rank, error) for rank, error in peers)
        text = f"{self.name}, '{what}': " + "; ".join(line(rank, error) for rank, error in culprits)
        if peers:
            text += "; its peers failed within the group's timeout: " + "; ".join(
                line(rank, error) for rank, error in peers)
        return text

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()

    def kill(self) -> None:
        for worker in self.workers:
            try:
                worker.kill()
                worker.close()
            except OSError:
                pass
        self.broken = True


def why_replaced(world: World) -> str:
    """What a world that is replaced had gone through: a failed request, or the ranks that had died and how."""
    dead = [f"rank {rank} (pid {worker.pid}) had died with {describe_exit(worker.process.returncode)}"
            for rank, worker in enumerate(world.workers) if not worker.alive() and worker.process.returncode is not None]
    return f"{world.name} " + ("; ".join(dead) if dead else "had failed a request and was not used again")


class WorldPool:
    """One world at a time, per (implementation, device, world size, workload): a new key stops the old world (each
    rank holds a model and the split), and a broken world is replaced on next use; the replacement says what it
    replaced in `replaced` until a case takes it (take_replaced), as WorkerPool's do."""

    def __init__(self, make_world):
        self.make_world = make_world
        self.key, self.world = None, None
        self.lock = threading.Lock()

    def get(self, key) -> World:
        dead = None
        if self.world is not None and self.key == key and not self.world.alive():
            dead = why_replaced(self.world)
        if self.world is not None and (self.key != key or not self.world.alive()):
            self.release()
        if self.world is None:
            self.world, self.key = self.make_world(*key), key
            self.world.replaced = dead
        return self.world

    @staticmethod
    def take_replaced(world: World) -> str | None:
        """What the world replaced, once (WorkerPool.take_replaced)."""
        replaced, world.replaced = getattr(world, "replaced", None), None
        return replaced

    def release(self) -> None:
        world, self.world, self.key = self.world, None, None
        if world is not None and not world.broken:
            world.stop()

