"""Train-time augmentation and normalisation, batched on tensors on the run's device.

The augmentation for CIFAR-shaped data (README, "Datasets") is reflect-pad 4, random crop back to
the image size, random horizontal flip, then normalisation (CIFAR-100 adds a +/-15 degree
rotation, as the reference code does).  Instead of padding and cropping image by image,
the crop, its reflect padding and the flip collapse into one gather: output pixel
(i, j) of a sample reads source row ``reflect(dy + i - 4)`` and column
``reflect(dx + j - 4)`` (columns reversed when flipped).  One ``gather`` per batch
replaces a Python loop over samples.

Random parameters for a whole epoch are drawn at once on the CPU from the run's batch
generator, so the stream of random numbers does not depend on the device.
:func:`augment_reference` applies the same parameters one sample at a time with
torchvision's functional ops; tests hold the two to bit-equality.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from federated.data.catalog import DatasetSpec

PAD = 4


@dataclass(frozen=True)
class AugmentParams:
    """Per-sample random parameters of one epoch, in the epoch's sample order."""

    dy: torch.Tensor  # int64 (n,), crop offset in the padded image, 0..2*PAD
    dx: torch.Tensor
    flip: torch.Tensor  # bool (n,)
    angle: torch.Tensor | None  # float32 (n,), degrees, or None without rotation

    def slice(self, start: int, stop: int) -> AugmentParams:
        return AugmentParams(
            self.dy[start:stop],
            self.dx[start:stop],
            self.flip[start:stop],
            None if self.angle is None else self.angle[start:stop],
        )

    def to(self, device: torch.device) -> AugmentParams:
        return AugmentParams(
            self.dy.to(device, non_blocking=True),
            self.dx.to(device, non_blocking=True),
            self.flip.to(device, non_blocking=True),
            None if self.angle is None else self.angle.to(device, non_blocking=True),
        )


class Augmenter:
    """Augments and normalises uint8 batches of one dataset on one device."""

    def __init__(self, spec: DatasetSpec, device: torch.device) -> None:
        self.spec = spec
        self.device = device
        std = torch.tensor(spec.std, dtype=torch.float32)
        mean = torch.tensor(spec.mean, dtype=torch.float32)
        # (x / 255 - mean) / std == x * scale + shift
        self.scale = (1.0 / (255.0 * std)).view(1, -1, 1, 1).to(device)
        self.shift = (-mean / std).view(1, -1, 1, 1).to(device)
        h, w = spec.height, spec.width
        self._rows = torch.arange(h, device=device)
        self._cols = torch.arange(w, device=device)
        # channels -> (scale, shift) for batches whose channels are several images' side
        # by side (packed execution)
        self._tiled: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    @property
    def random(self) -> bool:
        return self.spec.crop_flip or self.spec.rotate_degrees > 0

    def draw(self, n: int, generator: torch.Generator) -> AugmentParams | None:
        """Random parameters for ``n`` samples from ``generator`` (CPU), on the device."""
        if not self.random:
            return None
        dy = torch.randint(0, 2 * PAD + 1, (n,), generator=generator)
        dx = torch.randint(0, 2 * PAD + 1, (n,), generator=generator)
        flip = torch.randint(0, 2, (n,), generator=generator).bool()
        angle = None
        if self.spec.rotate_degrees > 0:
            deg = self.spec.rotate_degrees
            angle = torch.rand(n, generator=generator) * (2 * deg) - deg
        if not self.spec.crop_flip:
            dy.fill_(PAD)
            dx.fill_(PAD)
            flip.zero_()
        return AugmentParams(dy, dx, flip, angle).to(self.device)

    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (B, C, H, W) -> normalised float32 (a float batch on the 0..255 scale,
        e.g. after rotation, takes the same arithmetic).  Channels that hold several
        images side by side (packed execution) take the constants tiled."""
        scale, shift = self._constants(images.shape[1])
        if images.dtype == torch.uint8:
            # in place on the fresh float copy: half the time of addcmul on a CPU core
            return images.float().mul_(scale).add_(shift)
        return images.mul(scale).add_(shift)

    def train_batch(
        self,
        images: torch.Tensor,
        params: AugmentParams | None,
        fold: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Augment and normalise a uint8 batch with its slice of the epoch's parameters.

        ``fold`` rearranges the augmented batch before it is normalised (packed
        execution lays several parties' images side by side in the channels): moving
        uint8 costs a quarter of moving the normalised floats.  Every value is the same
        as without it, only placed elsewhere."""
        out = images
        if params is not None:
            b, c, h, w = images.shape
            rows = _reflect(params.dy[:, None] + self._rows - PAD, h)
            cols = _reflect(params.dx[:, None] + self._cols - PAD, w)
            cols = torch.where(params.flip[:, None], cols.flip(1), cols)
            index = (rows[:, :, None] * w + cols[:, None, :]).view(b, 1, h * w).expand(b, c, h * w)
            out = images.reshape(b, c, h * w).gather(2, index).view(b, c, h, w)
            if params.angle is not None:
                out = rotate_nearest(out.float(), params.angle)
        if fold is not None:
            out = fold(out)
        return self.normalize(out)

    def _constants(self, channels: int) -> tuple[torch.Tensor, torch.Tensor]:
        if channels == self.scale.shape[1]:
            return self.scale, self.shift
        tiled = self._tiled.get(channels)
        if tiled is None:
            copies = channels // self.scale.shape[1]
            tiled = self._tiled[channels] = (
                self.scale.repeat(1, copies, 1, 1),
                self.shift.repeat(1, copies, 1, 1),
            )
        return tiled

    def normalize_float(self, images: torch.Tensor) -> torch.Tensor:
        """Float images on the 0..255 scale -> normalised (:meth:`normalize`'s arithmetic)."""
        return self.normalize(images)


def _reflect(index: torch.Tensor, size: int) -> torch.Tensor:
    """Index into a reflect-padded axis -> index into the unpadded axis (no edge repeat)."""
    index = index.abs()
    return torch.where(index >= size, 2 * (size - 1) - index, index)


def rotate_nearest(images: torch.Tensor, degrees: torch.Tensor) -> torch.Tensor:
    """Rotate each float image by its angle about the centre; nearest pixel, zero fill."""
    theta = torch.deg2rad(degrees.to(images.dtype))
    cos, sin = torch.cos(theta), torch.sin(theta)
    zero = torch.zeros_like(cos)
    matrix = torch.stack([torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1)
    grid = F.affine_grid(matrix, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="nearest", padding_mode="zeros", align_corners=False)


def augment_reference(
    augmenter: Augmenter, images: torch.Tensor, params: AugmentParams | None
) -> torch.Tensor:
    """The same augmentation written the plain way: one sample at a time, torchvision ops.

    Used by the reference execution path and by tests that pin the batched path to it.
    """
    if params is None:
        return torch.cat([augmenter.normalize(img[None]) for img in images])
    # torchvision imports torch._dynamo (about 1 s on a CPU core): imported where used,
    # not by every sweep driver and trial worker that imports this module
    import torchvision.transforms.v2.functional as TF

    out = []
    for k, img in enumerate(images):
        x = TF.pad(img, [PAD, PAD, PAD, PAD], padding_mode="reflect")
        x = TF.crop(x, int(params.dy[k]), int(params.dx[k]), img.shape[1], img.shape[2])
        if bool(params.flip[k]):
            x = TF.horizontal_flip(x)
        if params.angle is not None:
            rotated = rotate_nearest(x[None].float(), params.angle[k : k + 1])
            out.append(augmenter.normalize_float(rotated))
        else:
            out.append(augmenter.normalize(x[None]))
    return torch.cat(out)
