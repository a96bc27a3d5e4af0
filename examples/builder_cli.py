"""What the task builders in examples/ share on their command line: flag values checked
against their range, the flags several builders take, the check of OUT, and a main that
reports a bad input as one ``error:`` line (exit status 2) with nothing written."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path


class BuildError(ValueError):
    """A bad input to the builder; the message is one line."""


def bounded(kind: type, low: float, high: float) -> Callable[[str], float]:
    """An argparse ``type``: the flag's text read as ``kind`` (int or float) and refused,
    naming the allowed range, outside ``low`` to ``high`` inclusive."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if kind is int else 'a number'}"
            ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} (allowed: {low:g} to {high:g})")
        return value

    return parse


def add_image_counts(
    parser: argparse.ArgumentParser, train: int, test: int, least_test: int
) -> None:
    """``--train-images`` and ``--test-images``, defaulting to ``train`` and ``test``;
    the test set holds at least ``least_test`` images."""
    parser.add_argument(
        "--train-images", type=bounded(int, 1, 100_000), default=train,
        help=f"training images (default {train})",
    )  # fmt: skip
    parser.add_argument(
        "--test-images", type=bounded(int, least_test, 100_000), default=test,
        help=f"test images (default {test})",
    )  # fmt: skip


def add_seed_and_data_root(parser: argparse.ArgumentParser) -> None:
    """``--seed`` of the one generator everything is drawn from, and ``--data-root``."""
    parser.add_argument("--seed", type=bounded(int, 0, 2**31 - 1), default=0, help="default 0")
    parser.add_argument(
        "--data-root", default=None,
        help="where fedsweep looks for Fashion-MNIST besides Debian's dataset-fashion-mnist",
    )  # fmt: skip


def run_build(
    args: argparse.Namespace, build: Callable[[argparse.Namespace], int], written: str
) -> int:
    """Build ``args.out`` with ``build`` (it returns how many images it wrote) and say so
    (``written`` names what besides the count); a bad input is one ``error:`` line on
    stderr and exit status 2, with nothing written."""
    try:
        count = build(args)
    except (BuildError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {count} {written} to {Path(args.out).expanduser().absolute()}")
    return 0


def new_folder(out: str) -> Path:
    """OUT as an absolute path, refused unless it does not exist yet and its folder is
    writable (the builders write beside it and rename at the end)."""
    path = Path(out).expanduser().absolute()
    if path.exists() or path.is_symlink():
        raise BuildError(f"OUT {path}: already exists (allowed: a path that does not exist yet)")
    if not path.parent.is_dir():
        raise BuildError(f"OUT {path}: its folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK):
        raise BuildError(f"OUT {path}: its folder {path.parent} is not writable")
    return path
