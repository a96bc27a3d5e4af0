"""The names of the ``precision`` setting and its warning, torch-free: the config's
checks and the command lines read them before torch is imported (a bad input is refused
in a fraction of a second); :mod:`federated.runtime.precision` does the arithmetic."""

from __future__ import annotations

FP32 = "fp32"
BF16_MIXED = "bf16-mixed"
#: the values of RunConfig.precision
PRECISIONS = (FP32, BF16_MIXED)


class EmulatedPrecisionWarning(UserWarning):
    """bfloat16 runs here, but emulated: slower than float32."""
