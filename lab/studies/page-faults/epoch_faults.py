"""Run at the commits it names (docs/page-faults.md): those trees have the old layout, the bench package; the
current tree's modules are phasebench.worker.build, phasebench.worker.cpp_lib and phasebench.data.

One free-running epoch of a trainer, called in this process as its worker calls it, with the page faults and
the time across it: how docs/page-faults.md measured the C++ trainer before and after its fix.

    cd TREE && python lab/studies/page-faults/epoch_faults.py cpp|python [MNIST_ROOT]

Run from the tree whose trainer is measured (its bench/ package and its built library).
"""
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.getcwd())
from bench import build, cpp_lib, data  # noqa: E402

language = sys.argv[1]
source = data.resolve("auto", sys.argv[2] if len(sys.argv) > 2 else "data")
log = f"/tmp/phasebench-epoch-faults-{os.getpid()}.log"
if language == "cpp":
    trainer = cpp_lib.CppTrainer(cpp_lib.load(str(build.library_path())), source.root, log_path=log)
else:
    from bench.trainer import Trainer

    trainer = Trainer(source.root, log_path=log)
before = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter_ns()
_, steps, loop_ns, _ = trainer.train(1, False)
elapsed = time.perf_counter_ns() - start
after = resource.getrusage(resource.RUSAGE_SELF)
os.remove(log)
print(json.dumps({"language": language, "tree": os.getcwd(), "dataset": source.name, "steps": steps,
                  "loop_s": round(loop_ns / 1e9, 3), "minor_faults": after.ru_minflt - before.ru_minflt,
                  "major_faults": after.ru_majflt - before.ru_majflt}))
