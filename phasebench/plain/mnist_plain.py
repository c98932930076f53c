"""The training loop of pytorch/examples' MNIST as a Python user writes it, with nothing of the suite around it:
the step's tensors are locals that die with each iteration. It is the reference the suite's Python trainer is
held to (docs/page-faults.md; `python -m phasebench.plain`): the same Net, loader, optimizer and log line as
phasebench/train/trainer.py, both splits opened before training as pytorch/examples' main.py opens them, zero_grad after
step() as in the suite. One JSON line of figures on stdout.

    python phasebench/plain/mnist_plain.py ROOT [--threads N] [--epochs N] [--max-steps N] [--log PATH] [--seed N]

ROOT holds MNIST/raw, as torchvision's MNIST expects.
"""

import argparse
import json
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    log = open(args.log, "w") if args.log else sys.stdout

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    train_set = datasets.MNIST(args.root, train=True, transform=transform)
    datasets.MNIST(args.root, train=False, transform=transform)  # main.py opens the test split before training
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=64, shuffle=False)

    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter_ns()
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    steps = 0
    for epoch in range(1, args.epochs + 1):
        for batch_idx, (data, target) in enumerate(train_loader):
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if batch_idx % 10 == 0:
                print(f"Train Epoch: {epoch} [{(batch_idx + 1) * len(data):5d}/{len(train_set):5d}]\tLoss: {loss.item():.4f}",
                      file=log)
            steps += 1
            if steps == args.max_steps:
                break
        if steps == args.max_steps:
            break
    loop_ns = time.perf_counter_ns() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    if log is not sys.stdout:
        log.close()
    print(json.dumps({"language": "python", "steps": steps, "loop_ns": loop_ns,
                      "minor_faults": after.ru_minflt - before.ru_minflt,
                      "major_faults": after.ru_majflt - before.ru_majflt}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
