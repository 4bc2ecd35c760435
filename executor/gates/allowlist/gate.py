"""The gate's entry points: :func:`check_command` and :func:`literal_words`, their answers kept (pure)."""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from executor import filecache
from executor.gates.allowlist.entries import AllowList, Rules, compile_rules, expand_text
from executor.gates.allowlist.walk import (
    MAX_COMMAND_BYTES,
    MAX_NODES,
    Walk,
    denied_by,
    parse_bash,
    reads_as_written,
    scan_tree,
)
from executor.gates.allowlist.words import (
    BLANKS,
    WORDISH,
    Env,
    NotLiteral,
    Word,
    evaluate,
    excerpt,
    not_allowed,
    one_line,
)


@dataclass(frozen=True)
class AllowCheck:
    """The gate's answer for one command.

    ``reason`` is empty when allowed, else one line naming the part that
    failed. ``suggestion`` is the shell line that would allow the command
    (``hookcage allow '...'``), or ``None`` when no entry could. ``notes``
    says, for an allowed command, what a ``*`` entry that allowed it lets a
    program run (``git *``: aliases, hooks ...), for the review.
    """

    allowed: bool
    reason: str = ""
    suggestion: str | None = None
    notes: tuple[str, ...] = ()


def check_command(command: str, allowlist: AllowList, project_root: str) -> AllowCheck:
    """Decide whether ``command`` may run under ``allowlist``.

    Args:
        command: the hook's shell command, exactly as configured (and as bash will get it).
        allowlist: allow and deny entries (user and managed config).
        project_root: what the project-dir variables expand to.

    Returns:
        ``AllowCheck(allowed=True)``, or the reason and, when an entry could
        allow it, the suggestion. Never raises for any command text.
    """
    key = (command, allowlist, project_root)
    try:
        hash(key)
    except TypeError:  # an AllowList built from lists: not kept
        return _check_now(command, allowlist, project_root)
    return _CHECKS.get(key, lambda: _check_now(command, allowlist, project_root))


_CHECKS = filecache.memo(512)
"""Answers of :func:`check_command`, a pure function of its arguments: kept for the next call."""
_WORDS = filecache.memo(512)


def _check_now(command: str, allowlist: AllowList, project_root: str) -> AllowCheck:
    verdict = _judge(command, compile_rules(allowlist, project_root))
    if verdict.allowed:
        return AllowCheck(allowed=True, notes=verdict.notes)
    suggestion = _suggest(verdict.candidates, command, allowlist, project_root)
    return AllowCheck(False, one_line(verdict.reason, 240), suggestion)


def literal_words(command: str, project_root: str) -> list[str]:
    """Every word of ``command`` that evaluates to a literal, in order (best effort, never raises).

    Words inside compound commands, substitutions and redirects count too;
    project-dir variables are expanded. Used to find the files a command
    references. Past :data:`MAX_COMMAND_BYTES` or :data:`MAX_NODES` it
    returns no words: :func:`check_command` denies such a command anyway.
    """
    return list(_WORDS.get((command, project_root), lambda: tuple(_literal_words_now(command, project_root))))


def _literal_words_now(command: str, project_root: str) -> list[str]:
    try:
        src = command.encode("utf-8")
    except UnicodeEncodeError:
        return []
    if len(src) > MAX_COMMAND_BYTES:
        return []
    env = Env(src, project_root, strict=False)
    words: list[str] = []
    stack = [parse_bash(src).root_node]
    count = 0
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_NODES:
            return []
        children = node.children
        if node.is_missing:
            continue
        if node.type in WORDISH:
            try:
                words.append(evaluate(node, env).value)
                continue
            except NotLiteral:
                if node.type in ("concatenation", "string"):
                    # the literal parts of `$HOME/x` are not words; what is
                    # nested in the others (`$(cat y)`, `${x:-default}`) may be
                    children = [c for c in children if c.type not in WORDISH and c.type != "string_content"]
        elif node.type in ("comment", "heredoc_start", "heredoc_end", "variable_name"):
            continue
        stack.extend(reversed(children))
    return words


# --- the gate ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Verdict:
    allowed: bool
    reason: str = ""
    candidates: tuple[str, ...] = ()  # entries that might allow the command, best first
    notes: tuple[str, ...] = ()  # what the `*` entries that allowed it let a program run


_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _odd_character(text: str) -> str | None:
    """A character that bash and tree-sitter may read differently (or that hides text)."""
    if text.isascii():
        match = _ASCII_CONTROL.search(text)
        return match.group() if match else None
    for char in text:
        if char in "\t\n":
            continue
        if unicodedata.category(char)[0] == "C" or (char.isspace() and char != " "):
            return char
    return None


def _judge(command: str, rules: Rules) -> _Verdict:
    # bash gets the command as it is: check every character, strip only what bash skips
    odd = _odd_character(command)
    text = command.strip(BLANKS)
    if not text:
        return _Verdict(False, "the command is empty")
    if odd is not None:
        return _Verdict(False, f"the command contains the character U+{ord(odd):04X}, which is not allowed")
    src = text.encode("utf-8")
    if len(src) > MAX_COMMAND_BYTES:
        return _Verdict(False, f"the command is longer than {MAX_COMMAND_BYTES} bytes, the most the allow-list checks")
    env = Env(src, rules.root, strict=True)
    tree = parse_bash(src)
    root = tree.root_node
    scan = scan_tree(root, src)
    if scan.too_big is not None:
        return _Verdict(False, scan.too_big)
    whole = (text,)

    if expand_text(text, rules.root) in rules.exact_texts and reads_as_written(root, scan, env):
        if rules.deny and (root.has_error or not scan.reliable):
            return _Verdict(False, "the command cannot be parsed reliably, so the deny entries cannot be checked")
        denied = denied_by(rules, scan, env)
        return _Verdict(False, denied) if denied else _Verdict(True)
    if root.has_error:
        return _Verdict(False, "the command cannot be parsed")
    if scan.misread is not None:
        return _Verdict(False, f"the command cannot be parsed reliably near `{excerpt(scan.misread)}`")
    if not scan.gaps_ok:
        return _Verdict(False, "a backslash between words (line continuation or `\\ `) is not allowed", whole)
    denied = denied_by(rules, scan, env)
    if denied:
        return _Verdict(False, denied)
    if scan.substitution is not None:
        return _Verdict(False, not_allowed(scan.substitution, env), whole)

    walk = Walk(env, rules)
    walk.run(root)
    if not walk.problems:
        return _Verdict(True, notes=tuple(dict.fromkeys(walk.notes)))
    candidates: tuple[str, ...] = whole
    distinct = {tuple(w.value for w in simple.words) for simple in walk.off_list}
    if not walk.complex and len(distinct) == 1:
        candidates = (_entry_text(walk.off_list[0].words), text)
    return _Verdict(False, walk.problems[0], candidates)


def _entry_text(words: Sequence[Word]) -> str:
    """The entry that allows exactly these words: literal characters quoted, what the shell expands left
    unquoted, ``$CLAUDE_PROJECT_DIR`` kept readable. :func:`_split_entry` reads it back word for word."""
    return " ".join(w.display for w in words)


def _suggest(candidates: Sequence[str], command: str, allowlist: AllowList, root: str) -> str | None:
    """The first candidate entry that really allows ``command``, as a ``hookcage allow`` line."""
    for entry in candidates:
        widened = AllowList(allow=(*allowlist.allow, entry), deny=allowlist.deny)
        if _judge(command, compile_rules(widened, root)).allowed:
            return f"hookcage allow {shlex.quote(entry)}"
    return None
