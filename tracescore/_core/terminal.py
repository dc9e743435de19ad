"""Text from users' data made safe to print on a terminal.

Span names, item ids, error messages and scorer reasons come from data tracescore did not write.
Printed as they are, an escape sequence in them is run by the terminal: colours, a cleared
screen, a changed window title, or (OSC 52) text written to the clipboard. ``visible`` writes
every control character (C0 but the newline when kept, DEL, C1) and the bidirectional overrides
that reorder what a reader sees as a visible escape (``\\x1b``, ``\\u202e``), and leaves every
other character as it is.
"""

from __future__ import annotations

import re

__all__ = ["visible"]

_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_AND_NEWLINE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, newlines: bool = False) -> str:
    """``text`` with its control characters written as visible escapes.

    Args:
        text: any text.
        newlines: keep ``\\n`` as it is (a multi-line report); default False (one line).

    Returns:
        The text; unchanged (the same object) when it holds no control character.
    """
    pattern = _CONTROL if newlines else _CONTROL_AND_NEWLINE
    return pattern.sub(_escape, text) if pattern.search(text) else text
