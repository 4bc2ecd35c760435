"""JSON with comments, as Gemini CLI reads its settings files (pure, no I/O).

Gemini CLI reads ``settings.json`` as ``JSON.parse(stripJsonComments(text))``
(the npm package ``strip-json-comments``, default options): ``//`` line
comments and ``/* */`` block comments outside strings are blanked, and the
rest is strict JSON. No trailing commas, no single quotes, no ``#``
comments. :func:`strip_comments` does the same (an unterminated ``/*``
blanks the rest of the file, as there), keeping every newline and the
length of each line, so a JSON error still names the line and column of the
file as written.

Why not a library: ``json5`` and ``hjson`` accept far more than Gemini does
(trailing commas, single quotes, unquoted keys), ``commentjson`` also takes
``#`` comments and is unmaintained, and none keeps positions. One regular
expression over strings and comments is linear in the file and mirrors the
agent's rules exactly; the tests pin ``//`` and ``/*`` inside strings,
escaped quotes and unterminated comments.
"""

from __future__ import annotations

import re

_TOKENS = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"'  # a string (escapes included): kept as it is
    r"|//[^\n]*"  # a line comment, up to (not including) its newline
    r"|/\*.*?(?:\*/|\Z)",  # a block comment; unterminated: to the end
    re.DOTALL,
)
_VISIBLE = re.compile(r"[^\s]")


def _blank(match: re.Match[str]) -> str:
    text = match.group()
    return text if text.startswith('"') else _VISIBLE.sub(" ", text)


def strip_comments(text: str) -> str:
    """``text`` with its ``//`` and ``/* */`` comments outside strings turned into spaces."""
    if "/" not in text:
        return text
    return _TOKENS.sub(_blank, text)
