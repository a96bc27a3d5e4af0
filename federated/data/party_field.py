"""Natural parties from a field's values: an ``hf:`` data set's column (a writer id), a
detection image's own field (Street's camera, ``device1_id`` or ``device2_id``).  One rule
for both: a value is a party when at least
:data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` training images carry it (smaller
ones are left out, their images belong to no party), and parties are sorted, numbers
numerically."""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

import numpy as np
import torch

from federated.data.folder_layout import MIN_PARTY_IMAGES


def party_sort_key(value: str) -> tuple:
    """Integers by value, before other names in text order.  Compared digit by digit, never
    through ``int()``: a party value of thousands of digits is a name like any other
    (Python refuses to convert more than 4,300 digits)."""
    if not re.fullmatch(r"-?\d+", value):
        return (1, (), value)
    negative = value.startswith("-")
    digits = value.lstrip("-").lstrip("0") or "0"
    if digits == "0":
        negative = False
    sign = -1 if negative else 1
    # by sign, then magnitude (length, then digits), reversed for negative numbers
    magnitude = (len(digits), *map(int, digits))
    return (0, (sign, *(sign * d for d in magnitude)), value)


class NaturalParties(NamedTuple):
    """A field's parties under the one rule (module docstring)."""

    index: torch.Tensor  # each training image's party, int64 (N,); -1: in no party
    names: list[str]  # the parties' values, sorted
    left_out: list[tuple[str, int]]  # values under the floor and their images, sorted


def parties_by_value(values: np.ndarray) -> NaturalParties:
    """Each training image's party (an index into the sorted names, -1 for an image
    without a value or of a value under MIN_PARTY_IMAGES images), the names, and the
    values left out with their image counts (said to the user: a camera dropped without
    a word reads as a camera that never existed)."""
    text = np.array(["" if v is None else str(v) for v in values.tolist()], dtype=object)
    counts = Counter(text.tolist())
    names = sorted(
        (v for v, n in counts.items() if v and n >= MIN_PARTY_IMAGES), key=party_sort_key
    )
    left_out = sorted(
        ((v, n) for v, n in counts.items() if v and n < MIN_PARTY_IMAGES),
        key=lambda vn: party_sort_key(vn[0]),
    )
    index = {v: i for i, v in enumerate(names)}
    parties = torch.tensor([index.get(v, -1) for v in text.tolist()], dtype=torch.int64)
    return NaturalParties(parties, names, left_out)


def left_out_words(field: str, left_out: tuple[tuple[str, int], ...]) -> str | None:
    """One warning line naming the values of ``field`` left out under the floor, or None."""
    if not left_out:
        return None
    shown = ", ".join(f"{v!r} ({n} image{'s' if n != 1 else ''})" for v, n in left_out[:5])
    more = f" and {len(left_out) - 5} more" if len(left_out) > 5 else ""
    images = sum(n for _, n in left_out)
    return (
        f"warning: partition_by={field}: {len(left_out)} value(s) left out, under the "
        f"{MIN_PARTY_IMAGES}-training-image floor of a party: {shown}{more}; their "
        f"{images} training image(s) train no party"
    )
