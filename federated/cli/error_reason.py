"""An exception's reason as one whole line for a one-line message: never cut mid-word.

Libraries' messages run from a word (``Ran out of input``) to paragraphs (torch's
``Weights only load failed. This file can still be loaded, ...``).  A message keeps the
first line whole; where that line runs on past one sentence, its first sentence, which
ends at a full stop — so what a user reads is a reason, never a fragment.
"""

from __future__ import annotations

import re

# a full stop that ends a sentence: followed by a space and a capital letter
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def error_reason(error: BaseException, default: str | None = None) -> str:
    """The first line of ``error``'s message (its first sentence where the line holds
    several); ``default`` (else the exception's class name) for an empty message."""
    lines = str(error).strip().splitlines()
    if not lines or not lines[0].strip():
        return default if default is not None else type(error).__name__
    return _SENTENCE_END.split(lines[0].strip(), maxsplit=1)[0]
