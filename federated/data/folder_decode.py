"""Decoding a folder dataset's images into uint8 tensors of one size, and their statistics.

Images are decoded by torchvision (``torchvision.io.decode_image``: PNG, JPEG, GIF, WebP,
...) with their own channel count; an alpha channel is dropped (1 or 3 channels remain),
and 16-bit images are scaled to 8 bits (:func:`to_uint8`).
Every image must then have the same channel count (grey-scale or RGB, not both).  Images
whose size differs from the target are resized with antialiasing (bilinear, torchvision's
``resize`` on uint8 tensors); the default target is the most common size.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import torch

from federated.cli.error_reason import error_reason
from federated.data.folder_layout import FolderDataError, ImageFile
from federated.runtime.machine_memory import available_memory, gib

# Largest image decoded (height x width): 8192 x 8192, 192 MiB as RGB uint8.  Every image
# is decoded whole before it is resized, so one huge file would exhaust memory before
# any memory check could see it; its header says its size without decoding.
MAX_DECODE_PIXELS = 2**26


def read_header(source: str | BinaryIO) -> tuple[int, int, str] | None:
    """(width, height, Pillow mode) an image file's header declares, without decoding its
    pixels and without Pillow's own bomb check (it would hide the size a refusal names);
    None when Pillow cannot read the header (the decoder judges that image later)."""
    import warnings

    from PIL import Image, UnidentifiedImageError

    pillows_limit = Image.MAX_IMAGE_PIXELS
    try:
        Image.MAX_IMAGE_PIXELS = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(source) as image:
                return image.size[0], image.size[1], image.mode
    except (OSError, ValueError, TypeError, UnidentifiedImageError):
        return None
    finally:
        Image.MAX_IMAGE_PIXELS = pillows_limit


def declared_size(source: str | BinaryIO) -> tuple[int, int] | None:
    """(width, height) from :func:`read_header`, or None."""
    header = read_header(source)
    return None if header is None else header[:2]


def oversize(size: tuple[int, int] | None) -> str | None:
    """What a refusal says of an image of ``size`` (width, height) beyond
    :data:`MAX_DECODE_PIXELS`, or None when it may be decoded."""
    if size is None or size[0] * size[1] <= MAX_DECODE_PIXELS:
        return None
    return (
        f"{size[0]}x{size[1]} pixels (allowed: at most {MAX_DECODE_PIXELS:,} pixels, "
        "e.g. 8192x8192, per image: each is decoded whole; shrink it first)"
    )


def check_decode_size(path: str) -> None:
    """Refuse (one line naming the file) an image whose header declares more than
    :data:`MAX_DECODE_PIXELS`; a header Pillow cannot read is left to the decoder."""
    problem = oversize(declared_size(path))
    if problem:
        raise FolderDataError(f"{path}: {problem}")


def decode_files(files: Sequence[ImageFile]) -> list[torch.Tensor]:
    """Each file as a uint8 (C, H, W) tensor with C in {1, 3}; names a file that fails
    (one too large to decode is named before it is decoded)."""
    # torchvision imports torch._dynamo (about 1 s on a CPU core): imported where used,
    # not by every sweep driver and trial worker that imports this module
    from torchvision.io import ImageReadMode, decode_image, read_file

    images = []
    for item in files:
        check_decode_size(item.path)
        try:
            image = decode_image(read_file(item.path), mode=ImageReadMode.UNCHANGED)
        except (RuntimeError, ValueError, OSError) as err:
            if os.path.getsize(item.path) == 0:
                raise FolderDataError(
                    f"{item.path}: an empty file (0 bytes; allowed: an image)"
                ) from None
            raise FolderDataError(
                f"{item.path}: not a readable image ({error_reason(err)})"
            ) from None
        if image.ndim == 4:  # an animated GIF: its first frame
            image = image[0]
        if image.shape[0] in (2, 4):  # grey + alpha, RGB + alpha
            image = image[:-1]
        images.append(to_uint8(image))
    return images


def to_uint8(image: torch.Tensor) -> torch.Tensor:
    """``image`` on the 0..255 scale as uint8.  A 16-bit PNG decodes to uint16 (0..65535):
    stored as it is into a uint8 tensor its values would wrap modulo 256, so it is scaled,
    rounded, by 255/65535 (= 1/257: 65535 -> 255, 32896 -> 128)."""
    if image.dtype == torch.uint8:
        return image
    if image.dtype == torch.uint16:
        return torch.div(image.to(torch.int32) + 128, 257, rounding_mode="floor").to(torch.uint8)
    import torchvision.transforms.v2.functional as TF  # lazily: see decode_files

    return TF.to_dtype(image, torch.uint8, scale=True)


def check_channels(images: Sequence[torch.Tensor], files: Sequence[ImageFile]) -> int:
    """The one channel count of all images; names the first image that differs."""
    counts = Counter(int(im.shape[0]) for im in images)
    channels = counts.most_common(1)[0][0]
    if len(counts) > 1:
        odd = next(f for f, im in zip(files, images) if im.shape[0] != channels)
        other = next(c for c in counts if c != channels)
        raise FolderDataError(
            f"{odd.path}: {other} channel(s) where {counts[channels]} other images have "
            f"{channels} (allowed: all grey-scale or all RGB)"
        )
    return channels


def most_common_size(images: Sequence[torch.Tensor]) -> tuple[int, int]:
    """(height, width) shared by most images; see :func:`choose_size` for ties."""
    return choose_size([(int(im.shape[1]), int(im.shape[2])) for im in images])


def choose_size(sizes: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The most common (height, width); a tie goes to the *smallest* area, then height.

    Smallest, not largest: the others are resized to it, and every image is held (and a
    model trained) at it.  Downscaling a few images loses detail; upscaling many
    multiplies memory (a tie that picked 300x200 once chose ResNet-50 and was killed
    for memory).  ``--image-size`` overrides the rule."""
    counts = Counter(sizes)
    return max(counts, key=lambda hw: (counts[hw], -hw[0] * hw[1], -hw[0]))


def header_shape(path: str) -> tuple[int, int, int] | None:
    """(channels, height, width) from an image file's header, without decoding its pixels,
    or None when Pillow cannot read the header (decoding judges that file later).

    Channels are 1 for grey-scale modes, else 3 (alpha is dropped when decoding)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            width, height = image.size
            grey = image.mode in ("1", "L", "LA", "I", "I;16", "F")
    except (OSError, ValueError, UnidentifiedImageError, Image.DecompressionBombError):
        return None
    return (1 if grey else 3), height, width


def stack_resized(images: Sequence[torch.Tensor], size: tuple[int, int]) -> torch.Tensor:
    """(N, C, H, W) uint8 of every image at ``size`` (resized only where it differs)."""
    if not images:
        return torch.empty(0, 1, *size, dtype=torch.uint8)
    import torchvision.transforms.v2.functional as TF  # lazily: see decode_files

    out = torch.empty(len(images), images[0].shape[0], *size, dtype=torch.uint8)
    for i, image in enumerate(images):
        if tuple(image.shape[1:]) != size:
            image = TF.resize(image, list(size), antialias=True)
        out[i] = image
    return out


def channel_stats(images: torch.Tensor, chunk: int = 4096) -> tuple[tuple[float, ...], ...]:
    """Per-channel mean and std of uint8 (N, C, H, W) images on the 0..1 scale (float64)."""
    c = images.shape[1]
    total = torch.zeros(c, dtype=torch.float64)
    squares = torch.zeros(c, dtype=torch.float64)
    for start in range(0, images.shape[0], chunk):
        x = images[start : start + chunk].to(torch.float64).div_(255.0)
        total += x.sum(dim=(0, 2, 3))
        squares += x.square().sum(dim=(0, 2, 3))
    n = images.shape[0] * images.shape[2] * images.shape[3]
    mean = total / n
    std = (squares / n - mean.square()).clamp_min(0).sqrt()
    # a constant channel would divide by zero when normalising
    std = torch.where(std > 0, std, torch.ones_like(std))
    return tuple(float(v) for v in mean), tuple(float(v) for v in std)


# The sides ``image_size`` may ask for.  Below 8 pixels a side an image holds too little
# for any of the models (their convolutions and poolings need room) and is almost always a
# typo (``--image-size 1`` for ``1x...``); above 4,096 one image is 48 MiB as RGB uint8.
MIN_IMAGE_SIDE = 8
MAX_IMAGE_SIDE = 4096
IMAGE_SIZE_FORM = "N or HxW, e.g. 32 or 64x48"


class ImageSizeError(ValueError):
    """An ``image_size`` text that is malformed or out of range; ``allowed`` says what is."""

    def __init__(self, text: str, allowed: str) -> None:
        self.allowed = allowed
        super().__init__(f"image_size={text!r} (allowed: {allowed})")


def parse_image_size(text: str) -> tuple[int, int]:
    """``"32"`` -> (32, 32); ``"64x48"`` -> (64, 48) (height x width, pixels).  Raises
    :class:`ImageSizeError` for a malformed text or a side outside
    [:data:`MIN_IMAGE_SIDE`, :data:`MAX_IMAGE_SIDE`]."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:[x×]\s*(\d+))?\s*", str(text))
    if not match:
        raise ImageSizeError(text, f"{IMAGE_SIZE_FORM}, in pixels")
    sides = [g for g in match.groups() if g is not None]
    # a side of more digits than any allowed one is out of range without int() (which
    # refuses texts beyond 4,300 digits with its own error)
    h, w = (int(g) if len(g) <= 6 else MAX_IMAGE_SIDE + 1 for g in (sides[0], sides[-1]))
    if not (MIN_IMAGE_SIDE <= h <= MAX_IMAGE_SIDE and MIN_IMAGE_SIDE <= w <= MAX_IMAGE_SIDE):
        raise ImageSizeError(
            text, f"{MIN_IMAGE_SIDE} to {MAX_IMAGE_SIDE} pixels a side ({IMAGE_SIZE_FORM})"
        )
    return h, w


def check_decode_memory(root: Path, files: Sequence[ImageFile], image_size: str | None) -> None:
    """Refuse, before decoding, a folder whose decoded images would not fit in memory.

    From the files' headers (no pixels decoded): the originals, all held while decoding,
    plus the stacked (N, C, H, W) uint8 tensor at the size the run will use (the given
    ``image_size``, else :func:`choose_size`'s) and the hold-out's copy of it.  A header
    Pillow cannot read counts as the target size (decoding names that file)."""
    shapes = [header_shape(item.path) for item in files]
    known = [s for s in shapes if s is not None]
    if image_size:
        size = parse_image_size(image_size)
    elif known:
        size = choose_size([(h, w) for _, h, w in known])
    else:
        return  # no header readable: decoding will name the first bad file
    channels = max((c for c, _, _ in known), default=3)
    target = channels * size[0] * size[1]
    originals = sum(c * h * w for c, h, w in known) + target * (len(files) - len(known))
    needed = originals + 2 * target * len(files)
    available = available_memory()
    if available is not None and needed > available:
        raise FolderDataError(
            f"{root}: {len(files)} images at {size[0]}x{size[1]} ({channels} channel(s)) need "
            f"about {gib(needed)} to decode and hold, and this machine has {gib(available)} "
            "available (pass a smaller --image-size, or use fewer images)"
        )
