"""The CNN-Transformer encoder of the annealed-temperature paper (§3.1).

Three convolution blocks (3x3 convolutions, each followed by BatchNorm and ReLU, then a
2x2 max-pool): 32-64, 128-128 (+ dropout 0.1), 256-256.  The final feature map's
positions become tokens of width 256 for a 6-layer Transformer encoder (8 heads).
The paper leaves three details open; the choices made here:

* a learned positional embedding is added to the tokens (without one the encoder cannot
  tell positions apart);
* the feed-forward width is PyTorch's default (2048) and the layers use PyTorch's
  default dropout (0.1);
* the tokens are averaged into one 256-feature vector, which the projection head
  (256 -> 256 -> out_dim) and the output layer then take, as in every fedsweep model.
"""

from __future__ import annotations

import torch
from torch import nn

from federated.models.pooling import MaxPool2x2

WIDTH = 256
HEADS = 8
LAYERS = 6
FEEDFORWARD = 2048


def _block(cin: int, cmid: int, cout: int, dropout: float = 0.0) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cmid, 3, padding=1),
        nn.BatchNorm2d(cmid),
        nn.ReLU(inplace=True),
        nn.Conv2d(cmid, cout, 3, padding=1),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
        MaxPool2x2(),
    ]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


class CNNTransformer(nn.Module):
    feature_dim = WIDTH

    def __init__(self, in_channels: int = 3, height: int = 32, width: int = 32) -> None:
        super().__init__()
        self.convs = nn.Sequential(
            _block(in_channels, 32, 64),
            _block(64, 128, 128, dropout=0.1),
            _block(128, 256, 256),
        )
        tokens = (height // 8) * (width // 8)
        self.position = nn.Parameter(torch.zeros(1, tokens, WIDTH))
        nn.init.trunc_normal_(self.position, std=0.02)
        layer = nn.TransformerEncoderLayer(
            WIDTH, HEADS, dim_feedforward=FEEDFORWARD, dropout=0.1, batch_first=True
        )
        self.transformer = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        maps = self.convs(x)  # (B, 256, H/8, W/8)
        tokens = maps.flatten(2).transpose(1, 2) + self.position
        return self.transformer(tokens).mean(dim=1)
