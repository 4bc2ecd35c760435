"""Regular expressions that run in linear time, whatever the input (RE2).

Python's ``re`` backtracks: a pattern such as ``(?:\\w|\\w|\\w)*!`` or
``[a-z][a-z0-9]*://`` searched over a long string takes exponential or
quadratic time. A pattern a repository brings (a hook's ``matcher``), and
every pattern hookcage applies to text a repository or an agent controls
(commands, payload fields), goes through this module instead: RE2 (the
``google-re2`` binding) guarantees time linear in the input for a given
pattern, and bounds a pattern's compiled size by its memory budget.

RE2 does not do what needs backtracking (backreferences, lookahead and
lookbehind): such a pattern is refused at compile time (:class:`PatternError`).
Its ``\\w``, ``\\d``, ``\\b`` are ASCII (as in JavaScript, the language Claude
Code's own matchers are written in); case-insensitive matching folds Unicode.

Text is matched as UTF-8 bytes, lone surrogates included (``surrogatepass``),
so any ``str`` (JSON allows ``"\\ud800"``) can be searched without an error.
"""

from __future__ import annotations

from typing import Any

import re2  # type: ignore[import-untyped, unused-ignore]

MAX_PATTERN_MEMORY = 8 * 1024 * 1024
"""Bytes RE2 may use for one compiled pattern; a larger one is refused."""


class PatternError(ValueError):
    """The pattern cannot be compiled by RE2 (syntax, backtracking-only features, size)."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print to stderr, which an agent may show as a block reason
    options.max_mem = MAX_PATTERN_MEMORY
    return options


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class LinearPattern:
    """A compiled RE2 pattern with the few ``re``-like calls hookcage needs."""

    __slots__ = ("_regexp", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        try:
            self._regexp = re2.compile(_encode(pattern), _options())
        except re2.error as exc:
            raise PatternError(_reason(exc)) from None
        except UnicodeEncodeError:  # pragma: no cover - surrogatepass encodes any str
            raise PatternError("not encodable as UTF-8") from None

    def search(self, text: str) -> bool:
        """Whether the pattern is found anywhere in ``text`` (unanchored)."""
        return self._regexp.search(_encode(text)) is not None

    def fullmatch(self, text: str) -> bool:
        """Whether the pattern matches the whole of ``text``."""
        return self._regexp.fullmatch(_encode(text)) is not None

    def sub(self, replacement: str, text: str) -> str:
        """Replace every match (``\\1`` in ``replacement`` is group 1), as ``re.sub`` does."""
        out = self._regexp.sub(_encode(replacement), _encode(text))
        return bytes(out).decode("utf-8", "surrogatepass")

    def __repr__(self) -> str:
        return f"LinearPattern({self.pattern!r})"


def _reason(exc: BaseException) -> str:
    detail = exc.args[0] if exc.args else exc
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    text = str(detail)
    if "invalid perl operator: (?=" in text or "(?!" in text or "(?<=" in text or "(?<!" in text:
        text += " (lookahead and lookbehind need backtracking: not supported)"
    elif "invalid escape sequence: \\" in text and text[-1:].isdigit():
        text += " (backreferences need backtracking: not supported)"
    elif "pattern too large" in text:
        text += f" (more than {MAX_PATTERN_MEMORY // (1024 * 1024)} MiB compiled)"
    return text


def compile(pattern: str) -> LinearPattern:
    """Compile ``pattern`` for linear-time matching.

    Raises:
        PatternError: RE2 cannot compile it; the message says why.
    """
    return LinearPattern(pattern)
