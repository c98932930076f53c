"""The network and its optimizer, declared once: pytorch/examples' C++ MNIST Net, parameter for parameter, and
SGD(lr 0.01, momentum 0.5). The optimizer's flags are a piece of an implementation (python-foreach,
python-fused). Its C++ twin is the Net in cpp/src/model.h."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from phasebench.spec import DEFAULT as DEFAULT_WORKLOAD
from phasebench.spec import Workload

LEARNING_RATE, MOMENTUM = 0.01, 0.5
# torch.optim.SGD's flags per optimizer piece: "sgd" as published.
OPTIMIZER_FLAGS = {"sgd": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}


class Net(nn.Module):
    """The network of examples/cpp/mnist; width W multiplies every hidden size."""

    def __init__(self, dropout: float = 0.5, workload: Workload = DEFAULT_WORKLOAD):
        super().__init__()
        w = workload
        self.conv1 = nn.Conv2d(1, w.conv1_channels, kernel_size=5)
        self.conv2 = nn.Conv2d(w.conv1_channels, w.conv2_channels, kernel_size=5)
        self.conv2_drop = nn.Dropout2d(dropout)
        self.fc1 = nn.Linear(w.fc1_inputs, w.fc1_units)
        self.fc2 = nn.Linear(w.fc1_units, 10)
        self.dropout, self.fc1_inputs = dropout, w.fc1_inputs

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, self.fc1_inputs)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def optimizer_flags(kind: str) -> dict:
    if kind not in OPTIMIZER_FLAGS:
        raise ValueError(f"unknown optimizer '{kind}': {', '.join(OPTIMIZER_FLAGS)}")
    return OPTIMIZER_FLAGS[kind]


def sgd(params, flags: dict) -> torch.optim.SGD:
    return torch.optim.SGD(params, lr=LEARNING_RATE, momentum=MOMENTUM, **flags)
