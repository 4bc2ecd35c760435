"""Does a ``Bash(...)`` condition hold for a Bash command? (pure)

Claude Code's hooks reference (code.claude.com/docs/en/hooks, "Common fields"
and the Bash matching table; snapshot 2026-08-22, Claude Code 2.1.240) and its
permissions page (code.claude.com/docs/en/permissions, "Wildcard patterns",
"Compound commands", "Wrappers"; same snapshot) say how a Bash rule meets a
command:

* ``*`` matches any sequence of characters, spaces included, at any position;
  a trailing `` *`` (or the equivalent ``:*`` suffix) is a word boundary:
  ``ls *`` matches ``ls`` and ``ls -la``, not ``lsof``; ``ls*`` matches all three.
* The command is split into subcommands at ``&&``, ``||``, ``;``, ``|``,
  ``|&``, ``&`` and newlines; commands inside ``$()`` and backticks count too.
  The hook runs when *any* subcommand matches.
* Leading ``VAR=value`` assignments are stripped; so are the wrappers
  ``timeout``, ``time``, ``nice``, ``nohup``, ``stdbuf``, ``command``,
  ``builtin``, ``noglob`` and a bare ``xargs``.
* A pattern that says more than the command name (``git push *``, not
  ``rm *``) runs the hook anyway when the command has ``$()``, backticks or a
  ``$VAR``; and the hook always runs when the command cannot be parsed.

Measured with Claude Code 2.1.330 (its real CLI, a loopback model, a
PreToolUse hook with ``if``; tests/integration/test_conditions_real_agents.py):
the words are read as the shell reads them (``git  push`` and ``git "push"``
and ``g\\it push`` meet ``git push *``), redirections and pipes are no
obstacle, but in ``if`` none of the wrappers is stripped (``timeout 5 git
push``, ``sudo``, ``env X=1``, ``bash -c '...'`` do not run a ``git push *``
hook), and a command it cannot parse (``echo 'unterminated``) does not run it.

hookcage answers *at least* every time Claude Code would, never less (a
guard that is skipped fails open): besides the raw text of each subcommand it
also tries the subcommand's words unquoted and joined by single spaces, with
redirections, and with wrappers stripped (Claude Code's permission-rule list,
and ``env``, ``exec``, ``sudo``, ``doas``, ``xargs`` with options;
``sh -c``/``bash -c`` strings and ``eval`` are read as the commands they
run). Any word it cannot read as a literal counts like ``$VAR``; a command
word it cannot read, or a command it cannot parse, makes every pattern match.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from executor.core import linre

MAX_COMMAND_CHARS = 10_000
"""Longer commands are not analysed (Claude Code prompts for them too): every pattern matches."""
MAX_NODES = 20_000
MAX_DEPTH = 4
"""How deep ``sh -c '...'`` and ``eval`` strings are read again."""

_LANGUAGE = Language(tree_sitter_bash.language())
_local = threading.local()  # a Parser is not safe to share between threads

_DYNAMIC = frozenset({"command_substitution", "process_substitution", "simple_expansion", "expansion",
                      "arithmetic_expansion"})
_COMMAND_LIKE = frozenset({"declaration_command", "unset_command", "test_command"})
_NAME_ONLY = re.compile(r"[^\s*]+(?: \*)?")

# wrapper -> (options that take a value, positional words before the command)
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "noglob": (frozenset(), 0),
    "xargs": (frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter",
                         "--max-args", "--max-procs", "--max-chars", "--replace"}), 0),
    # not stripped by Claude Code: hookcage reads them too (a superset)
    "exec": (frozenset({"-a"}), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
}
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})


@dataclass(frozen=True)
class BashPattern:
    """A compiled ``Bash(...)`` specifier.

    Attributes:
        source: the specifier as written.
        pattern: matches one whole (sub)command.
        name_only: the pattern names only a command (``rm``, ``rm *``): such a
            pattern does not match a command merely because it has ``$()``.
    """

    source: str
    pattern: linre.LinearPattern
    name_only: bool

    def matches(self, command: object) -> bool:
        """Whether the hook runs for this ``tool_input.command`` (see the module docstring)."""
        if not isinstance(command, str):
            return True  # no command to judge: run the hook
        if self.pattern.fullmatch(command.strip(" \t\n")):
            return True
        reading = _read(command)
        if reading.unsure or reading.dynamic_name:
            return True
        if any(self.pattern.fullmatch(text) for text in dict.fromkeys(reading.candidates)):
            return True
        return reading.dynamic and not self.name_only


def compile_bash(spec: str) -> BashPattern:
    """Compile a ``Bash(...)`` specifier (``*`` wildcards, a trailing `` *`` or ``:*`` word boundary).

    Raises:
        ValueError: the pattern cannot be compiled (the message says why).
    """
    text = spec[:-2] + " *" if spec.endswith(":*") else spec
    if text.endswith(" *"):
        regex = wildcard_regex(text[:-2]) + r"(?:\x{20}.*)?"
    else:
        regex = wildcard_regex(text)
    try:
        pattern = linre.compile(r"(?s)\A(?:" + regex + r")\z")
    except linre.PatternError as exc:  # pragma: no cover - only literals and .* are written
        raise ValueError(f"cannot compile the pattern: {exc}") from None
    return BashPattern(spec, pattern, bool(_NAME_ONLY.fullmatch(text)))


def wildcard_regex(text: str, star: str = ".*") -> str:
    """``text`` as an RE2 regular expression where ``*`` is ``star`` and every other character is literal."""
    return star.join("".join(c if c.isalnum() else f"\\x{{{ord(c):x}}}" for c in piece) for piece in text.split("*"))


# --- reading a command ---------------------------------------------------------------------------


@dataclass
class _Reading:
    candidates: list[str] = field(default_factory=list)
    dynamic: bool = False
    dynamic_name: bool = False
    unsure: bool = False


def _parse(src: bytes) -> Tree:
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser.parse(src)


@lru_cache(maxsize=256)
def _read(command: str) -> _Reading:
    reading = _Reading()
    _read_into(command, reading, 0)
    return reading


def _read_into(command: str, reading: _Reading, depth: int) -> None:
    if len(command) > MAX_COMMAND_CHARS or depth > MAX_DEPTH or "\0" in command:
        reading.unsure = True
        return
    try:
        src = command.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: not a command bash could be given
        reading.unsure = True
        return
    tree = _parse(src)
    if tree.root_node.has_error:
        reading.unsure = True
        return
    for count, node in enumerate(_walk(tree.root_node), 1):
        if count > MAX_NODES:
            reading.unsure = True
            return
        if node.type in _DYNAMIC:
            reading.dynamic = True
        elif node.type == "command":
            _read_command(node, src, reading, depth)
        elif node.type in _COMMAND_LIKE:
            reading.candidates.append(_text(src, node.start_byte, node.end_byte))


def _walk(root: Node) -> Iterator[Node]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def _read_command(node: Node, src: bytes, reading: _Reading, depth: int) -> None:
    name = node.child_by_field_name("name")
    if name is None:
        return  # only assignments
    words = [name, *node.children_by_field_name("argument")]
    literal = [_literal(w, src) for w in words]
    if literal[0] is None:
        reading.dynamic_name = True
    if any(value is None for value in literal):
        reading.dynamic = True
    start = name.start_byte
    last = words[-1].end_byte
    reading.candidates.append(_text(src, start, last))
    end = node.parent.end_byte if node.parent is not None and node.parent.type == "redirected_statement" else node.end_byte
    if end != last:
        reading.candidates.append(_text(src, start, end))
    values = [value if value is not None else _text(src, w.start_byte, w.end_byte) for value, w in zip(literal, words, strict=True)]
    for variant in _unwrapped(values, reading, depth):
        reading.candidates.append(" ".join(variant))


def _unwrapped(words: list[str], reading: _Reading, depth: int) -> Iterator[list[str]]:
    """The words as they are, then the command each wrapper runs (recursively)."""
    seen = 0
    while words and seen <= MAX_DEPTH * 4:
        seen += 1
        yield words
        head = words[0].rsplit("/", 1)[-1]
        if head in _SHELLS or head == "eval":
            script = _script(head, words)
            if script is not None:
                _read_into(script, reading, depth + 1)
            return
        if head not in _WRAPPERS or (head == "command" and len(words) > 1 and words[1] in ("-v", "-V")):
            return
        takes_value, positional = _WRAPPERS[head]
        i = 1
        while i < len(words) and (words[i].startswith("-") or (head == "env" and "=" in words[i])):
            if words[i] == "--":
                i += 1
                break
            i += 2 if words[i] in takes_value else 1
        i += positional
        words = words[i:]


def _script(head: str, words: list[str]) -> str | None:
    if head == "eval":
        return " ".join(words[1:])
    for i, word in enumerate(words[1:], 1):
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:]:
            return words[i + 1] if i + 1 < len(words) else None
    return None


def _text(src: bytes, start: int, end: int) -> str:
    return src[start:end].decode("utf-8", "surrogatepass")


def _literal(node: Node, src: bytes) -> str | None:
    """The word's value when it is a literal (quotes and escapes removed), else None."""
    kind = node.type
    text = _text(src, node.start_byte, node.end_byte)
    if kind in ("word", "command_name"):
        if kind == "command_name":
            return _literal(node.children[0], src) if len(node.children) == 1 else None
        return _unescape(text)
    if kind == "number":
        return text
    if kind == "raw_string":
        return text[1:-1]
    if kind == "string":
        parts = [c for c in node.children if c.type != '"']
        if any(c.type != "string_content" for c in parts):
            return None
        return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1),
                      "".join(_text(src, c.start_byte, c.end_byte) for c in parts))
    if kind == "concatenation":
        values = [_literal(c, src) for c in node.children]
        return None if any(v is None for v in values) else "".join(v for v in values if v is not None)
    return None


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "" if m.group(1) == "\n" else m.group(1), text, flags=re.DOTALL)
