"""Allow and deny entries: read as shell words, compiled against the project root, matched to commands (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from executor.core.envnames import PROJECT_DIR_VARS
from executor.gates.allowlist.words import BLANKS, EXPANDING, Word

"""Variables that stand for the project root in commands and entries (same as :mod:`executor.config`)."""


@dataclass(frozen=True)
class AllowList:
    """The effective allow-list: entries from user and managed config only."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


@dataclass(frozen=True)
class Need:
    """Why a simple command may only be allowed by an entry that spells it out, and how much of it."""

    why: str
    prefix: int | None = None  # the entry must spell out this many leading words; None: every word


# --- entries -----------------------------------------------------------------------------------

_VAR_NAMES = "|".join(PROJECT_DIR_VARS)
_PROJECT_VAR = re.compile(rf"\$(?:\{{(?:{_VAR_NAMES})\}}|(?:{_VAR_NAMES})(?![A-Za-z0-9_]))")


@dataclass(frozen=True)
class _EntryWord:
    """One word of an entry: its value (project-dir variables replaced by the root) and
    where it has unquoted ``*``, ``?``, ``[`` or a leading ``~`` (``active``)."""

    value: str
    active: frozenset[int]
    pieces: tuple[str, ...]  # the value cut at its unquoted `*`s: one piece when it has none

    @property
    def wild(self) -> bool:
        return len(self.pieces) > 1


@dataclass(frozen=True)
class _Entry:
    source: str
    words: tuple[_EntryWord, ...]  # without the final "*"
    rest: bool  # a final unquoted "*" word: any further arguments

    @property
    def exact(self) -> bool:
        """No wildcard at all: it allows one command, word for word."""
        return not self.rest and not any(w.wild for w in self.words)


@dataclass(frozen=True)
class Rules:
    """An allow-list compiled for one project root: entries by command name, the wildcard-named ones, the deny entries."""

    root: str
    exact_texts: frozenset[str]
    by_name: Mapping[str, tuple[_Entry, ...]]
    glob_named: tuple[_Entry, ...]  # first word has a "*", or the entry is only "*"
    deny: tuple[_Entry, ...]


def expand_text(text: str, root: str) -> str:
    """An entry's text with the project-dir variables replaced by ``root``, blanks stripped."""
    return _PROJECT_VAR.sub(lambda _: root, text.strip(BLANKS))


def _split_entry(entry: str) -> list[list[tuple[str, bool]]] | None:
    """An entry's words as (character, quoted) pairs, split and unquoted as a POSIX shell
    would (``'...'``, ``"..."``, backslash); ``None`` when a quote is not closed."""
    words: list[list[tuple[str, bool]]] = []
    word: list[tuple[str, bool]] | None = None
    i, n = 0, len(entry)
    while i < n:
        char = entry[i]
        if char in BLANKS:
            if word is not None:
                words.append(word)
                word = None
            i += 1
            continue
        word = [] if word is None else word
        if char == "'":
            end = entry.find("'", i + 1)
            if end < 0:
                return None
            word.extend((c, True) for c in entry[i + 1 : end])
            i = end + 1
        elif char == '"':
            i += 1
            while i < n and entry[i] != '"':
                if entry[i] == "\\" and i + 1 < n and entry[i + 1] in '\\"$`\n':
                    i += 1
                word.append((entry[i], True))
                i += 1
            if i >= n:
                return None
            i += 1
        elif char == "\\":
            if i + 1 < n:
                word.append((entry[i + 1], True))
            i += 2
        else:
            word.append((char, False))
            i += 1
    if word is not None:
        words.append(word)
    return words


def _entry_word(chars: list[tuple[str, bool]], root: str) -> _EntryWord:
    text = "".join(c for c, _ in chars)
    value: list[str] = []
    active: set[int] = set()
    pieces: list[str] = []
    current: list[str] = []
    position = 0
    for match in (*_PROJECT_VAR.finditer(text), None):
        stop = match.start() if match is not None else len(text)
        for index in range(position, stop):
            char, quoted = chars[index]
            if not quoted and (char in EXPANDING or (char == "~" and index == 0)):
                active.add(len(value))
            if not quoted and char == "*":
                pieces.append("".join(current))
                current = []
            else:
                current.append(char)
            value.append(char)
        if match is not None:
            value.extend(root)
            current.append(root)
            position = match.end()
    pieces.append("".join(current))
    return _EntryWord("".join(value), frozenset(active), tuple(pieces))


def compile_entry(entry: str, root: str, *, deny: bool = False) -> _Entry | None:
    """One allow (or ``deny``) entry compiled, or ``None`` when it allows nothing."""
    split = _split_entry(entry)
    if split is None:
        if not deny:
            return None  # an allow entry that cannot be read allows nothing
        split = [[(c, False) for c in w] for w in entry.split()]  # a deny entry still denies, word by word
    words = [_entry_word(chars, root) for chars in split]
    if not words:
        return None
    rest = words[-1].value == "*" and words[-1].wild
    if rest:
        words = words[:-1]
    return _Entry(entry.strip(BLANKS), tuple(words), rest)


@lru_cache(maxsize=64)
def compile_rules(allowlist: AllowList, root: str) -> Rules:
    """The allow-list compiled for ``root`` (cached: the same lists and root compile once)."""
    by_name: dict[str, list[_Entry]] = {}
    glob_named: list[_Entry] = []
    exact_texts: set[str] = set()
    for text in allowlist.allow:
        entry = compile_entry(text, root)
        if entry is None:
            continue
        exact_texts.add(expand_text(text, root))
        if entry.words and not entry.words[0].wild:
            by_name.setdefault(entry.words[0].value, []).append(entry)
        else:
            glob_named.append(entry)
    deny = tuple(e for e in (compile_entry(t, root, deny=True) for t in allowlist.deny) if e is not None)
    return Rules(
        root=root,
        exact_texts=frozenset(exact_texts),
        by_name={name: tuple(entries) for name, entries in by_name.items()},
        glob_named=tuple(glob_named),
        deny=deny,
    )


def _word_matches(pattern: _EntryWord, value: str) -> bool:
    """Does an entry word match a literal argument? Its unquoted ``*`` matches any characters but ``/``.

    Linear in the value, whatever the pattern: a ``*`` never matches ``/``,
    so the pattern's and the value's ``/``-separated parts pair up one to one,
    and within a part the leftmost match of each piece is the right one.
    """
    if not pattern.wild:
        return pattern.value == value
    parts = value.split("/")
    segments: list[list[str]] = [[""]]
    for i, piece in enumerate(pattern.pieces):
        if i:
            segments[-1].append("")
        pieces = piece.split("/")
        segments[-1][-1] += pieces[0]
        segments.extend([p] for p in pieces[1:])
    if len(parts) != len(segments):
        return False
    return all(_star_match(segment, part) for segment, part in zip(segments, parts, strict=True))


def _star_match(pieces: Sequence[str], text: str) -> bool:
    if len(pieces) == 1:
        return text == pieces[0]
    first, last = pieces[0], pieces[-1]
    if len(text) < len(first) + len(last) or not text.startswith(first) or not text.endswith(last):
        return False
    position, end = len(first), len(text) - len(last)
    for piece in pieces[1:-1]:
        found = text.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def _names(pattern: _EntryWord, word: Word) -> bool:
    """Does the entry spell out this word exactly: same characters, the same ones left for the shell to expand?"""
    return pattern.value == word.value and pattern.active == word.active


def entry_matches(entry: _Entry, values: Sequence[str], open_ended: bool = False) -> bool:
    """Does ``entry`` match these literal words? ``open_ended``: more, unknown words may follow."""
    n = len(entry.words)
    if open_ended:
        if len(values) > n and not entry.rest:
            return False
        return all(_word_matches(p, v) for p, v in zip(entry.words, values, strict=False))
    if len(values) < n or (len(values) > n and not entry.rest):
        return False
    return all(_word_matches(p, v) for p, v in zip(entry.words, values, strict=False))


def _allows(entry: _Entry, words: Sequence[Word], need: Need | None) -> bool:
    """Does ``entry`` allow this simple command?

    A word the shell would expand (a glob, a leading ``~``) is allowed only by
    an entry word that spells it out the same way, or by the final ``*``: it
    can become any file name. A command that runs other programs (``need``)
    is allowed only by an entry that spells out every word, or the first
    ``need.prefix`` words.
    """
    n = len(entry.words)
    if len(words) < n or (len(words) > n and not entry.rest):
        return False
    for pattern, word in zip(entry.words, words, strict=False):
        if not (_names(pattern, word) if word.active else _word_matches(pattern, word.value)):
            return False
    if need is None:
        return True
    if need.prefix is None:
        return entry.exact and all(_names(p, w) for p, w in zip(entry.words, words, strict=True))
    return n >= need.prefix and all(_names(p, w) for p, w in zip(entry.words[: need.prefix], words, strict=False))


def allowing_entry(rules: Rules, words: Sequence[Word], need: Need | None) -> _Entry | None:
    """The first entry that allows this simple command, or ``None``."""
    for entry in (*rules.by_name.get(words[0].value, ()), *rules.glob_named):
        if _allows(entry, words, need):
            return entry
    return None
