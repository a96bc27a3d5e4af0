"""The MOON paper's CIFAR-10 encoder (§4.1), also used for 28x28 grey-scale inputs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from federated.models.pooling import MaxPool2x2


class SimpleCNN(nn.Module):
    """conv5x5(C->6), ReLU, maxpool2, conv5x5(6->16), ReLU, maxpool2, fc ->120, ReLU,
    fc 120->84, ReLU.  The flatten size follows the input (400 for 32x32, 256 for 28x28).
    Pooling is :class:`~federated.models.pooling.MaxPool2x2`: ``max_pool2d``'s exact
    values and gradients at a fraction of its CPU cost (a module without parameters, so
    the straightforward benchmark loop can put ``nn.MaxPool2d`` in its place)."""

    feature_dim = 84

    def __init__(self, in_channels: int = 3, height: int = 32, width: int = 32) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        flat_h = ((height - 4) // 2 - 4) // 2
        flat_w = ((width - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(16 * flat_h * flat_w, 120)
        self.fc2 = nn.Linear(120, 84)
        self.pool = MaxPool2x2()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return F.relu(self.fc2(F.relu(self.fc1(x))))


class SimpleCNNBN(SimpleCNN):
    """:class:`SimpleCNN` with a ``BatchNorm2d`` after each convolution, before its ReLU
    (``simple-cnn-bn``): the model FedBN and the ``batchnorm`` rule need, as the paper's
    CNN has none.  FedBN's digit CNN also normalises its fully connected layers
    (``BatchNorm1d``); this one does not, so that it trains packed (packed execution
    packs ``BatchNorm2d`` only).  Built from the same random draws as the plain CNN (a
    BatchNorm layer starts at weight 1, bias 0, mean 0, variance 1: no draw)."""

    def __init__(self, in_channels: int = 3, height: int = 32, width: int = 32) -> None:
        super().__init__(in_channels, height, width)
        self.bn1 = nn.BatchNorm2d(6)
        self.bn2 = nn.BatchNorm2d(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        x = torch.flatten(x, 1)
        return F.relu(self.fc2(F.relu(self.fc1(x))))
