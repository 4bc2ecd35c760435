"""Text hygiene for what hooks print (pure): sanitise, cap, redact.

A hook's output reaches the agent (and often a terminal). Escape sequences
could repaint the user's screen or hide text; invalid UTF-8 could break the
agent's JSON; a 5 GB answer could flood the context. Everything handed on is
decoded with replacement, stripped of control sequences and capped.
"""

from __future__ import annotations

import re

MESSAGE_CAP = 10_000
"""Characters of any one string handed to the agent."""

TRUNCATION_MARK = "… [truncated by hookcage]"

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other ESC sequences, and
# the 8-bit C1 forms; then every remaining C0/C1 control except tab and newline.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, terminated by BEL or ST (or cut off)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # two-byte and nF escapes, or a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"  # 8-bit OSC
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def decode(data: bytes) -> str:
    """Decode a hook's bytes as UTF-8, replacing what is not."""
    return data.decode("utf-8", errors="replace")


def sanitize(text: str, cap: int = MESSAGE_CAP) -> str:
    """Strip escape sequences and control characters, normalise newlines, cap length."""
    text = text.replace("\r\n", "\n")
    text = _ESCAPES.sub("", text)
    text = _CONTROLS.sub("", text)
    return cap_text(text, cap)


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


_SECRET_WORD = r"(?:[A-Za-z0-9_]*(?:token|secret|passw(?:or)?d|passwd|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credential|auth)[A-Za-z0-9_]*)"
_REDACTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    # NAME=value and --name=value / --name value for secret-looking names
    (re.compile(rf"(?i)(\b{_SECRET_WORD}\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s;&|]+)"), r"\1***"),
    (re.compile(rf"(?i)(--?{_SECRET_WORD}(?:=|\s+))(\"[^\"]*\"|'[^']*'|[^\s;&|]+)"), r"\1***"),
    # HTTP auth headers
    (re.compile(r"(?i)(authorization:\s*(?:bearer|basic|token)?\s*)[^\s'\"]+"), r"\1***"),
    # user:password@ (and :password@, empty user) in URLs
    (re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@"), r"\1***@"),
    # well-known token shapes
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"), "***"),
    (re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{16,}\b"), "***"),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), "***"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"), "***"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b"), "***"),
)


def redact(text: str) -> str:
    """Replace secrets (tokens, keys, passwords) in a command line with ``***``."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text
