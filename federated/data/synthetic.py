"""Generated CIFAR-shaped data: offline tests and benchmarks.

Each class has a blocky random colour template (4x4 cells); a sample is its class
template rolled by up to 3 pixels in each direction plus one of a bank of uniform
integer noise images (a bank, because drawing fresh noise for 60,000 images costs
seconds of single-threaded RNG and buys nothing here).  Easy to learn, cheap to
make, and a fixed function of its size (the run seed does not change it), so every run
and every machine sees the same images.  It stands in for no real accuracy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

NOISE = 48  # +/- uint8 levels of per-pixel noise
NOISE_BANK = 1024
SHIFTS = range(-3, 4)  # pixels a template is rolled by, in each direction
BLOCK_BYTES = 1 << 18  # int16 images combined at a time: about a core's L2 cache


def synthetic_images(
    n: int, n_classes: int = 10, shape: tuple[int, int, int] = (3, 32, 32), *, seed: int = 1234
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` uint8 images of ``shape`` with int64 labels, balanced over ``n_classes``."""
    g = torch.Generator().manual_seed(seed)
    c, h, w = shape
    cells = torch.randint(0, 2, (n_classes, c, 4, 4), generator=g).float()
    templates = (F.interpolate(cells, size=(h, w), mode="nearest") * 160 + 48).to(torch.int16)
    labels = torch.arange(n) % n_classes
    labels = labels[torch.randperm(n, generator=g)]
    bank = torch.randint(-NOISE, NOISE + 1, (NOISE_BANK, c, h, w), generator=g, dtype=torch.int16)
    pick = torch.randint(0, NOISE_BANK, (n,), generator=g)
    shifts = torch.randint(SHIFTS.start, SHIFTS.stop, (n, 2), generator=g)
    # every class template rolled by every shift, then each image one row of it plus its
    # noise, a cache-sized block at a time: a gather of the whole set at once was 4x slower
    # (memory-bound), and the images, all of them, equal the per-shift construction's
    rolled = torch.stack(
        [torch.roll(templates, shifts=(dy, dx), dims=(2, 3)) for dy in SHIFTS for dx in SHIFTS]
    ).reshape(len(SHIFTS) ** 2 * n_classes, c * h * w)
    shift_index = (shifts[:, 0] - SHIFTS.start) * len(SHIFTS) + shifts[:, 1] - SHIFTS.start
    which = shift_index * n_classes + labels
    noise = bank.reshape(NOISE_BANK, c * h * w)
    images = torch.empty(n, c * h * w, dtype=torch.uint8)
    block = max(1, BLOCK_BYTES // (2 * c * h * w))
    for start in range(0, n, block):
        rows = slice(start, start + block)
        mixed = torch.index_select(rolled, 0, which[rows])
        mixed += torch.index_select(noise, 0, pick[rows])
        images[rows] = mixed.clamp_(0, 255)
    return images.reshape(n, c, h, w), labels
