"""Text hygiene for everything hookcage shows a person or hands an agent (pure).

One rule, one function: :func:`sanitize` (and :func:`one_line`, the same rule
for a field that must stay on one line). Text from a hook, a hook file, a
repository or a command line may carry terminal escapes (CSI, OSC including
OSC 52 clipboard writes, DCS, ...) that repaint or clear the user's screen,
bidi overrides that reorder what is read, zero-width and tag characters that
hide words, and bytes that are not UTF-8. None of them is interpreted and
none is dropped: each such character is shown as a visible escape, ``\\x1b``,
``\\u202e``, ``\\U000e0041``, and each byte that is not UTF-8 as ``\\xff``.
What remains is printable text, newlines and tabs (and no newline at all
from :func:`one_line`); the result is capped.

What is escaped (:func:`needs_escape`):

- every character Python does not call printable: the categories Cc (C0
  and C1 controls, DEL), Cf (format: bidi embeddings, overrides and
  isolates U+202A-202E and U+2066-2069, marks U+200E/F and U+061C,
  zero-width U+200B-200D, U+2060-2064, U+FEFF, tags U+E0000-E007F, ...),
  Cs (lone surrogates), Co (private use), Cn (unassigned, so a format
  character of a newer Unicode is escaped too), Zl, Zp and every space
  but the ASCII one (U+00A0, U+2000-200A, ...: not a word break in a
  shell);
- the rest of Unicode's Default_Ignorable_Code_Point set, which renders
  as nothing: variation selectors (U+FE00-FE0F, U+E0100-E01EF), the
  combining grapheme joiner, Hangul fillers, Mongolian and Khmer ones;
- ``\\r`` always, and ``\\n`` in :func:`one_line` (a carriage return would
  overwrite the line; a newline in a field would fake the next line).

Characters below U+0080 are written ``\\xNN`` (``\\n``, ``\\r`` by name),
others ``\\uNNNN`` or ``\\UNNNNNNNN``, and a byte that is not UTF-8
``\\xNN`` (always 80-ff: it cannot be mistaken for a character). Backslashes
already in the text are left alone (a shell script's ``\\n`` reads as
written); where the difference matters, callers say how many characters
were escaped (:func:`count_escapes`), as ``hookcage trust`` does. The
output is its own fixed point: sanitising it again changes nothing.
"""

from __future__ import annotations

import re
from functools import lru_cache

from executor.core import linre

MESSAGE_CAP = 10_000
"""Characters of any one string handed to the agent."""

TRUNCATION_MARK = "… [truncated by hookcage]"

# Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt) that
# str.isprintable() lets through (combining marks and letters that render as nothing).
_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
_BYTE_ESCAPES = range(0xDC80, 0xDD00)
"""``surrogateescape``'s stand-ins for the bytes 80-ff that were not UTF-8."""
_NAMED = {"\n": "\\n", "\r": "\\r"}

# Everything but printable ASCII is looked at one character at a time.
_LOOK_MULTI = re.compile(r"[^\t\n -~]")
_LOOK_ONE = re.compile(r"[^\t -~]")
_PARTIAL_ESCAPE = re.compile(r"\\(?:x[0-9a-f]?|u[0-9a-f]{0,3}|U[0-9a-f]{0,7})?$")


def needs_escape(char: str) -> bool:
    """Whether ``sanitize`` shows this one character as an escape (``\\n`` and ``\\t`` aside)."""
    code = ord(char)
    if char == "\r" or not char.isprintable():
        return True
    return any(low <= code <= high for low, high in _IGNORABLE)


@lru_cache(maxsize=4096)
def _escape_char(char: str) -> str:
    code = ord(char)
    if code in _BYTE_ESCAPES:
        return f"\\x{code - 0xDC00:02x}"
    if char in _NAMED:
        return _NAMED[char]
    if not needs_escape(char):
        return char
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _escape_match(match: re.Match[str]) -> str:
    return _escape_char(match.group())


def decode(data: bytes) -> str:
    """Decode a hook's bytes as UTF-8, replacing what is not (for JSON: the agent gets valid text)."""
    return data.decode("utf-8", errors="replace")


def decode_exact(data: bytes) -> str:
    """Decode bytes as UTF-8, keeping each byte that is not as a stand-in :func:`sanitize` shows as ``\\xNN``."""
    return data.decode("utf-8", errors="surrogateescape")


def _render(text: str | bytes, cap: int | None, look: re.Pattern[str]) -> str:
    if isinstance(text, bytes):
        # Escaping only lengthens: what lies past the cap is never shown (a character is 4 bytes at most).
        text = decode_exact(text if cap is None else text[: 4 * cap + 8])
    elif cap is not None:
        text = text[: 2 * cap + 2]
    if look is _LOOK_MULTI:
        text = text.replace("\r\n", "\n")
    out = look.sub(_escape_match, text)
    if cap is None or len(out) <= cap:
        return out
    keep = _PARTIAL_ESCAPE.sub("", out[: max(cap - len(TRUNCATION_MARK), 0)])
    return keep + TRUNCATION_MARK[: cap - len(keep)]


def sanitize(text: str | bytes, cap: int | None = MESSAGE_CAP) -> str:
    """Show ``text`` safely: control, format and invisible characters as visible escapes, capped.

    Newlines and tabs stay (CR LF becomes LF); see the module's docstring for
    what is escaped and how. Bytes are decoded as UTF-8, each byte that is
    not shown as ``\\xNN``.

    Args:
        text: what to show (``str``, or raw ``bytes`` from a hook or a file).
        cap: most characters returned (the cut is marked); ``None``: no cap.
    """
    return _render(text, cap, _LOOK_MULTI)


def one_line(text: str | bytes, cap: int | None = None) -> str:
    """:func:`sanitize` for a field that must stay on one line: newlines are escaped too (``\\n``)."""
    return _render(text, cap, _LOOK_ONE)


def count_escapes(text: str | bytes) -> int:
    """How many characters of ``text`` (or bytes that are not UTF-8) are shown as escapes, newlines aside."""
    if isinstance(text, bytes):
        text = decode_exact(text)
    return sum(1 for m in _LOOK_MULTI.finditer(text) if _escape_char(m.group()) != m.group())


def cap_text(text: str, cap: int = MESSAGE_CAP) -> str:
    """Cut ``text`` to at most ``cap`` characters, marking the cut."""
    if len(text) <= cap:
        return text
    keep = max(cap - len(TRUNCATION_MARK), 0)
    return text[:keep] + TRUNCATION_MARK[: cap - keep]


def first_line(text: str) -> str:
    """The first non-blank line of ``text`` (stripped), or ``""``."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


# Redaction runs over commands and messages a repository controls (60 KB and
# more), so its patterns are RE2's (executor.core.linre): linear in the text. With
# Python's backtracking engine `[a-z][a-z0-9+.-]*://` alone was quadratic
# (a 60 KB command took 35-53 s). `_WS` is exactly the whitespace Python's
# `\s` means on text (RE2's own `\s` is ASCII only), so nothing that was
# redacted is missed; RE2's `\b` is ASCII, which redacts a little more
# (a token glued to a non-ASCII letter), never less.
_WS_CHARS = r"\t-\r\x1c-\x20\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
_WS = f"[{_WS_CHARS}]"
_SECRET_WORD = r"(?:[A-Za-z0-9_]*(?:token|secret|passw(?:or)?d|passwd|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credential|auth)[A-Za-z0-9_]*)"
_REDACTIONS: tuple[tuple[linre.LinearPattern, str], ...] = tuple(
    (linre.compile(pattern), replacement) for pattern, replacement in (
        # NAME=value and --name=value / --name value for secret-looking names
        (rf"(?i)(\b{_SECRET_WORD}{_WS}*={_WS}*)(\"[^\"]*\"|'[^']*'|[^{_WS_CHARS};&|]+)", r"\1***"),
        (rf"(?i)(--?{_SECRET_WORD}(?:=|{_WS}+))(\"[^\"]*\"|'[^']*'|[^{_WS_CHARS};&|]+)", r"\1***"),
        # HTTP auth headers
        (rf"(?i)(authorization:{_WS}*(?:bearer|basic|token)?{_WS}*)[^{_WS_CHARS}'\"]+", r"\1***"),
        # user:password@ (and :password@, empty user) in URLs
        (rf"(?i)([a-z][a-z0-9+.-]*://[^/{_WS_CHARS}:@]*:)[^/{_WS_CHARS}@]+@", r"\1***@"),
        # well-known token shapes
        (r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b", "***"),
        (r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{16,}\b", "***"),
        (r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", "***"),
        (r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b", "***"),
        (r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b", "***"),
    )
)


def redact(text: str) -> str:
    """Replace secrets (tokens, keys, passwords) in a command line with ``***``.

    Linear in ``len(text)`` (RE2): a 4 MB command is redacted in well under a second.
    """
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text
