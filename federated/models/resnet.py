"""ResNet-50 with the CIFAR stem (the MOON paper's CIFAR-100 / Tiny-ImageNet encoder)."""

from __future__ import annotations

from torch import nn


def cifar_resnet50(in_channels: int = 3) -> nn.Module:
    """torchvision ResNet-50 with a 3x3 stride-1 first convolution, no max-pool and no
    final fc: returns the 2048 pooled features for 32x32 (or larger) inputs."""
    # torchvision imports torch._dynamo (about 1 s on a CPU core): imported where used,
    # not by every sweep driver and trial worker that imports this module
    from torchvision.models import resnet50

    net = resnet50(weights=None)
    net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")
    net.maxpool = nn.Identity()
    net.fc = nn.Identity()
    return net


RESNET50_FEATURES = 2048
