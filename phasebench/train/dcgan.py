"""pytorch/examples' C++ DCGAN program (its dcgan.cpp) as a Python user writes it (docs/method.md#the-dcgan-program):
a generator of transposed convolutions with batch norm, a discriminator of convolutions with batch norm and leaky
ReLU, two torch.optim.Adam, torchvision's MNIST normalized to [-1, 1] through a DataLoader, its step cut into the
phases phasebench/programs.py declares. Its C++ twin is cpp/src/dcgan.cpp, which draws the same numbers in the same
order from the same seed.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from phasebench.programs import imported
from phasebench.train import loaders
from phasebench.train.products import all_finite, product
from phasebench.train.program_phases import Phase, PhaseTable, ProgramTrainer
from phasebench.train.timing import timer_for

NOISE_SIZE = 100
BATCH_SIZE = 64
LEARNING_RATE = 2e-4
BETAS = (0.5, 0.5)
LOG_INTERVAL = 10  # batches between progress lines, as the example's kLogInterval
MEAN = STD = 0.5  # Normalize((0.5,), (0.5,)): images in [-1, 1], the generator's tanh range


class Generator(nn.Module):
    def __init__(self, noise_size: int = NOISE_SIZE):
        super().__init__()
        self.conv1 = nn.ConvTranspose2d(noise_size, 256, 4, bias=False)
        self.batch_norm1 = nn.BatchNorm2d(256)
        self.conv2 = nn.ConvTranspose2d(256, 128, 3, stride=2, padding=1, bias=False)
        self.batch_norm2 = nn.BatchNorm2d(128)
        self.conv3 = nn.ConvTranspose2d(128, 64, 4, stride=2, padding=1, bias=False)
        self.batch_norm3 = nn.BatchNorm2d(64)
        self.conv4 = nn.ConvTranspose2d(64, 1, 4, stride=2, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.batch_norm1(self.conv1(x)))
        x = F.relu(self.batch_norm2(self.conv2(x)))
        x = F.relu(self.batch_norm3(self.conv3(x)))
        return torch.tanh(self.conv4(x))


def make_discriminator() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 64, 4, stride=2, padding=1, bias=False),
        nn.LeakyReLU(0.2),
        nn.Conv2d(64, 128, 4, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(128),
        nn.LeakyReLU(0.2),
        nn.Conv2d(128, 256, 4, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(256),
        nn.LeakyReLU(0.2),
        nn.Conv2d(256, 1, 3, stride=1, padding=0, bias=False),
        nn.Sigmoid(),
    )


def make_loader(root: str, batch_size: int) -> torch.utils.data.DataLoader:
    """torchvision's MNIST with ToTensor and Normalize((0.5,), (0.5,)), batches in order (phasebench/train/loaders.py's
    DataLoader, no worker processes)."""
    _, transforms = loaders.torchvision()
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])
    return loaders.data_loader(loaders.mnist(root, True, transform=transform), batch_size)


def adam_class(optimizer: str) -> type:
    """"torch": torch.optim.Adam, as Python users write it; "module:Class": another class of Adam's signature (the
    equivalence tests' LibTorch-form Adam, tests/libtorch_adam.py)."""
    if optimizer == "torch":
        return torch.optim.Adam
    if ":" not in optimizer:
        raise ValueError(f"optimizer '{optimizer}': 'torch' or 'module:Class'")
    return imported(optimizer)


class DcganTrainer(ProgramTrainer):
    def __init__(self, device: str = "cpu", seed: int = 1, threads: int = 0, batch_size: int = BATCH_SIZE,
                 data_root: str = "data", log_path: str = "", optimizer: str = "torch"):
        self.set_up(device, threads, batch_size)
        # One seed, then the example's construction in its order: the generator, the discriminator, the optimizers,
        # the data.
        torch.manual_seed(seed)
        self.generator = Generator().to(self.device)
        self.discriminator = make_discriminator().to(self.device)
        adam = adam_class(optimizer)
        self.g_optimizer = adam(self.generator.parameters(), lr=LEARNING_RATE, betas=BETAS)
        self.d_optimizer = adam(self.discriminator.parameters(), lr=LEARNING_RATE, betas=BETAS)
        self.loader = make_loader(data_root, batch_size)
        self.batches_per_epoch = len(self.loader)
        self.epoch, self.batch_index, self.batches = 1, -1, iter(self.loader)  # epochs from 1, as the example
        self.log = open(log_path, "a") if log_path else sys.stdout
        self.timed = timer_for(self.device)
        self.trained = 0  # whole steps since the trainer was made
        self.loss: float | None = None  # the generator loss the last progress line (or train_steps) read
        self.release()

    # -- the phases' bodies, as the example's loop writes them -------------------------------------------------
    def data_loading(self) -> None:
        try:
            self.loaded = next(self.batches)
            self.batch_index += 1
        except StopIteration:
            self.epoch, self.batch_index, self.batches = self.epoch + 1, 0, iter(self.loader)
            self.loaded = next(self.batches)

    def copy_to_device(self) -> None:
        self.real_images = self.loaded[0].to(self.device)

    def d_real(self) -> None:
        self.discriminator.zero_grad()
        self.real_labels = torch.empty(self.real_images.size(0), device=self.device).uniform_(0.8, 1.0)
        self.real_output = self.discriminator(self.real_images).reshape(self.real_labels.shape)
        self.d_loss_real = F.binary_cross_entropy(self.real_output, self.real_labels)
        self.d_loss_real.backward()

    def g_forward(self) -> None:
        noise = torch.randn(self.real_images.size(0), NOISE_SIZE, 1, 1, device=self.device)
        self.fake_images = self.generator(noise)

    def d_fake(self) -> None:
        self.fake_labels = torch.zeros(self.real_images.size(0), device=self.device)
        self.fake_output = self.discriminator(self.fake_images.detach()).reshape(self.fake_labels.shape)
        self.d_loss_fake = F.binary_cross_entropy(self.fake_output, self.fake_labels)
        self.d_loss_fake.backward()
        self.d_loss = self.d_loss_real + self.d_loss_fake

    def d_step(self) -> None:
        self.d_optimizer.step()

    def g_loss_backward(self) -> None:
        self.generator.zero_grad()
        self.fake_labels.fill_(1)
        self.fake_output = self.discriminator(self.fake_images).reshape(self.fake_labels.shape)
        self.g_loss = F.binary_cross_entropy(self.fake_output, self.fake_labels)
        self.g_loss.backward()

    def g_step(self) -> None:
        self.g_optimizer.step()

    def progress_print(self) -> None:
        d_loss, g_loss = self.d_loss.item(), self.g_loss.item()
        print(f"[{self.epoch:2d}][{self.batch_index + 1:3d}/{self.batches_per_epoch:3d}] D_loss: {d_loss:.4f} | "
              f"G_loss: {g_loss:.4f}", file=self.log)
        self.loss = g_loss

    # -- what the suite drives --------------------------------------------------------------------------------
    def parameters(self) -> list[float]:
        """Every float tensor, flat: the generator's parameters, the discriminator's, then both networks' batch-norm
        running means and variances, as pb_dcgan_get_params gives the C++ trainer's."""
        tensors = [*self.generator.parameters(), *self.discriminator.parameters()]
        tensors += [buffer for net in (self.generator, self.discriminator) for buffer in net.buffers()
                    if buffer.is_floating_point()]
        return [value for tensor in tensors for value in tensor.detach().cpu().flatten().tolist()]

    def last_loss(self) -> float | None:
        return self.loss

    def batch(self) -> tuple[list[float], list[float]]:
        """The last step's real images (flat) and the real labels d_real drew; empty where none are held."""
        if self.real_images is None or self.real_labels is None:
            return [], []
        return self.real_images.detach().cpu().flatten().tolist(), self.real_labels.cpu().tolist()

    def close(self) -> None:
        if self.log is not sys.stdout:
            self.log.close()

    def step(self) -> torch.Tensor:
        """One whole step, as the example's loop runs it: every phase but the progress line, which comes every
        LOG_INTERVAL batches; the generator's loss, still on the device."""
        for phase in PHASES[:-1]:
            phase.body(self)
        self.trained += 1
        if self.trained % LOG_INTERVAL == 0:
            self.progress_print()
        return self.g_loss.detach()

    def train_steps(self, steps: int) -> list[float]:
        """`steps` whole steps; each one's generator loss, read from the device once after the last (the example
        reads a loss only for its progress line)."""
        if steps < 0:
            raise ValueError("a negative number of steps")
        losses = [self.step() for _ in range(steps)]
        if not losses:
            return []
        read = torch.stack(losses).cpu().tolist()
        self.loss = read[-1]
        return read

    def release(self) -> None:
        """What the last round left, freed before the next one's preparation, as a training loop frees its last
        step's."""
        self.loaded = self.real_images = self.real_labels = self.real_output = None
        self.fake_images = self.fake_labels = self.fake_output = None
        self.d_loss_real = self.d_loss_fake = self.d_loss = self.g_loss = None
        self.grads_zero_before = self.weight_before = None


# -- products that prove each phase's work (docs/method.md#the-dcgan-program); cpp/src/dcgan.cpp has the same -------
def _nonzero(module: nn.Module) -> int:
    return sum(param.grad is not None and bool(param.grad.ne(0).any()) for param in module.parameters())


def _grads_finite(module: nn.Module) -> bool:
    return all(param.grad is None or bool(torch.isfinite(param.grad).all()) for param in module.parameters())


def _remember_zero(module_of: Callable[[DcganTrainer], nn.Module]) -> Callable[[DcganTrainer], None]:
    def remember(t: DcganTrainer) -> None:
        t.grads_zero_before = _nonzero(module_of(t)) == 0
    return remember


def _first_weight(module: nn.Module) -> torch.Tensor:
    return next(module.parameters())  # the generator's conv1.weight, the discriminator's first convolution's


def _remember_weight(module_of: Callable[[DcganTrainer], nn.Module]) -> Callable[[DcganTrainer], None]:
    def remember(t: DcganTrainer) -> None:
        t.weight_before = _first_weight(module_of(t)).detach().clone()
    return remember


def _loaded(t: DcganTrainer) -> dict:
    images = t.loaded[0]
    return product(images, all_finite([images]), batch=t.batch_index)


def _copied(t: DcganTrainer) -> dict:
    host, images = t.loaded[0], t.real_images
    return product(images, all_finite([images]), on_device=images.device == t.device,
                   matches_host=torch.equal(images.cpu(), host.cpu()), resident=images.data_ptr() == host.data_ptr())


def _backward(output: torch.Tensor, loss: torch.Tensor, module: nn.Module, zero_before: bool | None = None) -> dict:
    """A loss's backward pass into `module`: the output it scored, the loss, the module's gradients (and whether they
    were zero when the clock started, where the phase zeroes them itself)."""
    return product(output, all_finite([output]) and _grads_finite(module), loss.item(), zero_before=zero_before,
                   nonzero_grads=_nonzero(module))


def _real(t: DcganTrainer) -> dict:
    return _backward(t.real_output, t.d_loss_real, t.discriminator, t.grads_zero_before)


def _generated(t: DcganTrainer) -> dict:
    return product(t.fake_images, all_finite([t.fake_images]))


def _fake(t: DcganTrainer) -> dict:
    return _backward(t.fake_output, t.d_loss_fake, t.discriminator)


def _stepped(module_of: Callable[[DcganTrainer], nn.Module], optimizer_of) -> Callable[[DcganTrainer], dict]:
    """The first weight against Adam's update written out from its state after the step: w0 - lr / bc1 * m /
    (sqrt(v) / sqrt(bc2) + eps)."""
    def stepped(t: DcganTrainer) -> dict:
        module, optimizer = module_of(t), optimizer_of(t)
        weight = _first_weight(module)
        state = optimizer.state[weight]
        step = float(state["step"])
        (beta1, beta2), eps = BETAS, optimizer.defaults["eps"]
        denominator = state["exp_avg_sq"].sqrt() / math.sqrt(1 - beta2 ** step) + eps
        expected = t.weight_before - LEARNING_RATE / (1 - beta1 ** step) * state["exp_avg"] / denominator
        moved = (weight.detach() - t.weight_before).abs().max().item()
        return product(weight, all_finite(module.parameters()), update_error=(weight.detach() - expected).abs().max().item(),
                       moved=moved)
    return stepped


def _g_loss(t: DcganTrainer) -> dict:
    return _backward(t.fake_output, t.g_loss, t.generator, t.grads_zero_before)


def _printed(t: DcganTrainer) -> dict:
    return product(t.g_loss.detach(), all_finite([t.g_loss]) and math.isfinite(t.loss), t.loss)


def _discriminator(t: DcganTrainer) -> nn.Module:
    return t.discriminator


def _generator(t: DcganTrainer) -> nn.Module:
    return t.generator


PHASES = (
    Phase("data_loading", DcganTrainer.data_loading, _loaded),
    Phase("copy_to_device", DcganTrainer.copy_to_device, _copied),
    Phase("d_real", DcganTrainer.d_real, _real, _remember_zero(_discriminator)),
    Phase("g_forward", DcganTrainer.g_forward, _generated),
    Phase("d_fake", DcganTrainer.d_fake, _fake),
    Phase("d_step", DcganTrainer.d_step, _stepped(_discriminator, lambda t: t.d_optimizer),
          _remember_weight(_discriminator)),
    Phase("g_loss", DcganTrainer.g_loss_backward, _g_loss, _remember_zero(_generator)),
    Phase("g_step", DcganTrainer.g_step, _stepped(_generator, lambda t: t.g_optimizer), _remember_weight(_generator)),
    Phase("progress_print", DcganTrainer.progress_print, _printed),
)
DcganTrainer.table = PhaseTable("dcgan", PHASES)

