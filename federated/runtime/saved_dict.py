"""Reading a dict fedsweep saved with ``torch.save``: tensors, numbers, strings and
containers of them, read with ``weights_only=True`` (Python's restricted unpickler), so a
crafted file that would run code on load is refused instead; the one helper behind a
checkpoint's run state and a party's saved state."""

from __future__ import annotations

from typing import IO, Any

import torch

from federated.cli.error_reason import error_reason


def load_saved_dict(
    source: str | IO[bytes], name: str, what: str, error: type[Exception] = ValueError
) -> dict[str, Any]:
    """The dict in ``source`` (a path or a binary file); ``error`` with one line naming
    ``name`` ("<name>: not a fedsweep <what>, refused (<reason>)") for anything else."""
    try:
        state = torch.load(source, weights_only=True)
    except Exception as err:  # torch raises UnpicklingError, RuntimeError, EOFError...
        reason = error_reason(err)
        raise error(f"{name}: not a fedsweep {what}, refused ({reason})") from None
    if not isinstance(state, dict):
        raise error(f"{name}: not a fedsweep {what}, refused (not a dict)")
    return state
