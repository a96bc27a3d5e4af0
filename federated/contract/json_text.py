"""Reading JSON the project did not write itself (annotation files, a sweep's manifest).

``json.loads`` raises three kinds of error on text it cannot take: ``JSONDecodeError``
(malformed), ``RecursionError`` (nested too deeply) and a plain ``ValueError`` for an
integer longer than Python's int-str limit (4,300 digits by default: ``Exceeds the limit
(4300 digits) for integer string conversion``, whose advice to raise the limit is for
programmers, not for whoever wrote the file).  :func:`parse_json` turns each into one
:class:`JsonTextError` line saying where and what is allowed.  Torch-free.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any


class JsonTextError(ValueError):
    """Text that is not JSON this project reads; the message is one line (no file name:
    the caller names the file)."""


def int_digit_limit() -> int:
    """Python's int-str conversion limit (``sys.get_int_max_str_digits``; 0: none)."""
    return sys.get_int_max_str_digits()


def long_integer_line(text: str) -> int | None:
    """The line of ``text``'s first run of digits beyond :func:`int_digit_limit`, or
    None (no limit, or no such run)."""
    limit = int_digit_limit()
    # a whole integer token: not a float's fraction or exponent
    pattern = r"(?<![\w.])\d{" + str(limit + 1) + r",}(?![\d.eE])"
    match = re.search(pattern, text) if limit else None
    return None if match is None else text.count("\n", 0, match.start()) + 1


def long_integer_text(text: str) -> str:
    """What a refusal of ``text`` for an over-long integer says: where, and what is
    allowed."""
    line = long_integer_line(text)
    where = f"line {line}: " if line else ""
    return (
        f"{where}an integer of more than {int_digit_limit():,} digits (allowed: JSON numbers "
        f"of at most {int_digit_limit():,} digits)"
    )


def parse_json(text: str) -> Any:
    """``json.loads(text)``; a :class:`JsonTextError` (one line, no traceback) where the
    text is malformed, nested too deeply or holds an integer beyond the int-str limit."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise JsonTextError(f"line {err.lineno}, column {err.colno}: {err.msg}") from None
    except RecursionError:
        raise JsonTextError("nested too deeply") from None
    except ValueError:  # only the int-str limit raises a plain ValueError here
        raise JsonTextError(long_integer_text(text)) from None
