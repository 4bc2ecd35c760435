"""The bash allow-list gate: may this hook command be launched at all? (pure)

How this works:

1. An *entry* is a command in shell words (split like :func:`shlex.split`).
   ``$CLAUDE_PROJECT_DIR`` / ``${CLAUDE_PROJECT_DIR}`` (and the sibling
   variables in :data:`PROJECT_DIR_VARS`) become the project root. A final
   ``*`` word matches any further arguments, zero or more; ``*`` inside a word
   matches any characters of that word except ``/``, like a shell glob (so
   ``$CLAUDE_PROJECT_DIR/.hookcage/*.sh`` cannot reach out with ``../``). No
   other character is special: ``?`` and ``[`` are literal. ``ls`` alone allows
   only ``ls`` with no arguments; write ``ls *`` to allow ``ls -la``. An entry
   that is only ``*`` allows any simple command except the wrappers below.
2. An allow entry that equals the whole command (both stripped, project-dir
   variables replaced by the root) allows it however complex it is: that is
   how a user allows a command they have read. Deny entries still apply to
   every simple command in it that can be evaluated.
3. Otherwise the command is parsed once with tree-sitter-bash and must be
   made only of simple commands joined by ``;``, ``&``, newlines, ``&&``,
   ``||``, ``|`` and ``|&``, with comments, output redirects to ``/dev/null``,
   file-descriptor duplication (``2>&1``) and heredocs or herestrings without
   expansions. Every word must evaluate to a literal; any other expansion,
   substitution, compound command, assignment or input redirect is denied.
4. Every simple command must match an allow entry and none may match a deny
   entry (deny entries win, and are also tried on the command a wrapper runs).
   Wrappers (``env``, ``timeout``, ``sudo``, shells, ``python -c`` ...), shell
   builtins that change the shell (``export``, ``alias``, ``source`` ...) and
   commands given options that run other programs (``find -exec``, ``git -c``)
   are matched only by an entry without ``*`` that equals their words.

Everything is fail-closed: whatever the checker cannot evaluate exactly is
denied, with one line saying which part failed and, when an entry could allow
the command, the ``hookcage allow`` line that would (it is checked to work).
Where bash and tree-sitter could read the text differently, the command is
denied: control and invisible characters, a line continuation inside a word
(``r`` backslash-newline ``m``), a token that swallowed a word (``ls -l<<EOF``), a
partly quoted ``~``. An unquoted ``~`` stays literal in commands and
entries alike. An unquoted project-dir variable is denied when the project
path has blanks or glob characters, since bash would split it.
"""

from __future__ import annotations

import re
import shlex
import threading
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from executor import filecache
from executor.core.envnames import PROJECT_DIR_VARS
from executor.core.text import sanitize
from executor.gates import programs

"""Variables that stand for the project root in commands and entries (same as :mod:`executor.config`)."""


@dataclass(frozen=True)
class AllowList:
    """The effective allow-list: entries from user and managed config only."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


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
    verdict = _judge(command, _compile(allowlist, project_root))
    if verdict.allowed:
        return AllowCheck(allowed=True, notes=verdict.notes)
    suggestion = _suggest(verdict.candidates, command, allowlist, project_root)
    return AllowCheck(False, _one_line(verdict.reason, 240), suggestion)


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
    env = _Env(src, project_root, strict=False)
    words: list[str] = []
    stack = [_parse(src).root_node]
    count = 0
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_NODES:
            return []
        children = node.children
        if node.is_missing:
            continue
        if node.type in _WORDISH:
            try:
                words.append(_evaluate(node, env).value)
                continue
            except _NotLiteral:
                if node.type in ("concatenation", "string"):
                    # the literal parts of `$HOME/x` are not words; what is
                    # nested in the others (`$(cat y)`, `${x:-default}`) may be
                    children = [c for c in children if c.type not in _WORDISH and c.type != "string_content"]
        elif node.type in ("comment", "heredoc_start", "heredoc_end", "variable_name"):
            continue
        stack.extend(reversed(children))
    return words


# --- bounds ----------------------------------------------------------------------------------

MAX_COMMAND_BYTES = 16 * 1024
"""The longest command (UTF-8 bytes) the gate checks; a longer one is denied before it is parsed."""
MAX_NODES = 20_000
"""The most syntax nodes a command may parse into; past it the command is denied."""
MAX_NESTING = 64
"""The deepest nesting of substitutions, strings, groups and compound commands; past it the command is denied."""
_NESTING = frozenset({
    "command_substitution", "process_substitution", "arithmetic_expansion", "subshell", "compound_statement",
    "function_definition", "if_statement", "for_statement", "c_style_for_statement", "while_statement",
    "case_statement", "test_command", "expansion", "string", "array", "negated_command",
})  # fmt: skip

# --- parsing ---------------------------------------------------------------------------------

_LANGUAGE = Language(tree_sitter_bash.language())
_local = threading.local()  # a Parser is not safe to share between threads


def _parse(src: bytes) -> Tree:
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser.parse(src)


# --- entries -----------------------------------------------------------------------------------

_BLANKS = " \t\n"  # what bash skips between words; str.strip() would also eat \r, \v, U+0085 ...
_VAR_NAMES = "|".join(PROJECT_DIR_VARS)
_PROJECT_VAR = re.compile(rf"\$(?:\{{(?:{_VAR_NAMES})\}}|(?:{_VAR_NAMES})(?![A-Za-z0-9_]))")
_EXPANDING = "*?["  # what the shell expands in an unquoted word (and a leading `~`)


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
class _Rules:
    root: str
    exact_texts: frozenset[str]
    by_name: Mapping[str, tuple[_Entry, ...]]
    glob_named: tuple[_Entry, ...]  # first word has a "*", or the entry is only "*"
    deny: tuple[_Entry, ...]


def _expand_text(text: str, root: str) -> str:
    return _PROJECT_VAR.sub(lambda _: root, text.strip(_BLANKS))


def _split_entry(entry: str) -> list[list[tuple[str, bool]]] | None:
    """An entry's words as (character, quoted) pairs, split and unquoted as a POSIX shell
    would (``'...'``, ``"..."``, backslash); ``None`` when a quote is not closed."""
    words: list[list[tuple[str, bool]]] = []
    word: list[tuple[str, bool]] | None = None
    i, n = 0, len(entry)
    while i < n:
        char = entry[i]
        if char in _BLANKS:
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
            if not quoted and (char in _EXPANDING or (char == "~" and index == 0)):
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


def _compile_entry(entry: str, root: str, *, deny: bool = False) -> _Entry | None:
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
    return _Entry(entry.strip(_BLANKS), tuple(words), rest)


@lru_cache(maxsize=64)
def _compile(allowlist: AllowList, root: str) -> _Rules:
    by_name: dict[str, list[_Entry]] = {}
    glob_named: list[_Entry] = []
    exact_texts: set[str] = set()
    for text in allowlist.allow:
        entry = _compile_entry(text, root)
        if entry is None:
            continue
        exact_texts.add(_expand_text(text, root))
        if entry.words and not entry.words[0].wild:
            by_name.setdefault(entry.words[0].value, []).append(entry)
        else:
            glob_named.append(entry)
    deny = tuple(e for e in (_compile_entry(t, root, deny=True) for t in allowlist.deny) if e is not None)
    return _Rules(
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


def _names(pattern: _EntryWord, word: _Word) -> bool:
    """Does the entry spell out this word exactly: same characters, the same ones left for the shell to expand?"""
    return pattern.value == word.value and pattern.active == word.active


def _matches(entry: _Entry, values: Sequence[str], open_ended: bool = False) -> bool:
    """Does ``entry`` match these literal words? ``open_ended``: more, unknown words may follow."""
    n = len(entry.words)
    if open_ended:
        if len(values) > n and not entry.rest:
            return False
        return all(_word_matches(p, v) for p, v in zip(entry.words, values, strict=False))
    if len(values) < n or (len(values) > n and not entry.rest):
        return False
    return all(_word_matches(p, v) for p, v in zip(entry.words, values, strict=False))


def _allows(entry: _Entry, words: Sequence[_Word], need: _Need | None) -> bool:
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


def _allowing(rules: _Rules, words: Sequence[_Word], need: _Need | None) -> _Entry | None:
    """The first entry that allows this simple command, or ``None``."""
    for entry in (*rules.by_name.get(words[0].value, ()), *rules.glob_named):
        if _allows(entry, words, need):
            return entry
    return None


# --- commands that run other commands ------------------------------------------------------------

# Builtins that change the shell for the commands after them: aliases, options,
# functions, and variables (`read PATH` repoints every later command).
_SHELL_BUILTINS = frozenset({
    "export", "declare", "local", "readonly", "typeset", "alias", "unalias", "shopt", "set",
    "source", ".", "trap", "unset", "enable", "hash", "let", "read", "mapfile", "readarray",
    "getopts", "fc",
})  # fmt: skip
# Options that make an otherwise plain command run another program (or, for
# the builtins, assign a variable). Long options match their GNU abbreviations.
_RUNNING_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "printf": ("-v",),
    "wait": ("-p",),
    "find": ("-exec", "-execdir", "-ok", "-okdir"),
    "rg": ("--pre",),
    "fd": ("-x", "-X", "--exec", "--exec-batch"),
    "fdfind": ("-x", "-X", "--exec", "--exec-batch"),
    "tar": ("--to-command", "--checkpoint-action", "--use-compress-program", "-I", "--info-script",
            "--new-volume-script", "-F", "--rsh-command", "--rmt-command"),
    "rmt-tar": ("--to-command", "--checkpoint-action", "--use-compress-program", "-I", "--info-script",
                "--new-volume-script", "-F", "--rsh-command", "--rmt-command"),
    "rsync": ("-e", "--rsh", "--rsync-path"),
    "scp": ("-S", "-o", "-F", "-J"),
    "sftp": ("-S", "-o", "-F", "-J", "-D"),
    "sort": ("--compress-program",),
    "split": ("--filter",),
    "install": ("--strip-program",),
    "diff3": ("--diff-program",),
    "sdiff": ("--diff-program",),
    "zic": ("-y",),
    "zip": ("-TT", "--unzip-command"),
    "prove": ("--exec", "-e"),
    "tape": ("-r", "--require"),
    "less": ("--lesskey-file", "--lesskey-src"),
    "dpkg": ("--pre-invoke", "--post-invoke", "--status-logger"),
    "apt": ("-o", "--option", "-c", "--config-file"),
    "apt-get": ("-o", "--option", "-c", "--config-file"),
    "apt-cache": ("-o", "--option", "-c", "--config-file"),
    "apt-cdrom": ("-o", "--option", "-c", "--config-file"),
    "apt-config": ("-o", "--option", "-c", "--config-file"),
    "apt-mark": ("-o", "--option", "-c", "--config-file"),
    "make": ("--eval", "-E"),
    "gmake": ("--eval", "-E"),
    "pytest": ("-p",),
}  # fmt: skip


@dataclass(frozen=True)
class _Need:
    """Why a simple command may only be allowed by an entry that spells it out, and how much of it."""

    why: str
    prefix: int | None = None  # the entry must spell out this many leading words; None: every word


def _option_hits(word: str, option: str) -> bool:
    if option.startswith("--"):
        name = word.partition("=")[0]
        return len(name) > 2 and name.startswith("--") and option.startswith(name)  # GNU abbreviations
    if len(option) == 2:  # -c, -cfoo, and bundled: -ix
        return word.startswith("-") and not word.startswith("--") and option[1] in word[1:]
    return word == option or word.startswith(option + "=")


def _options_hit(base: str, words: Sequence[_Word], options: Sequence[str]) -> _Need | None:
    for word in words:
        for option in options:
            if _option_hits(word.value, option):
                return _Need(f"the option `{_show(word.value)}` of `{base}` can run other programs")
    return None


def _need(words: Sequence[_Word]) -> _Need | None:
    """Why these words may only be allowed by an entry that spells them out, or ``None``."""
    base = words[0].value.rsplit("/", 1)[-1]
    kind = programs.kind(base)
    if base in _SHELL_BUILTINS:
        return _Need(f"`{base}` changes the shell itself")
    if kind == "wrapper":
        return _Need(f"`{base}` runs the command in its arguments")
    if kind == "interpreter":
        return _interpreter_need(base, words)
    special = _SPECIAL.get(base)
    if special is not None:
        need = special(base, words)
        if need is not None:
            return need
    return _options_hit(base, words[1:], _RUNNING_OPTIONS.get(base, ()))


def _interpreter_need(base: str, words: Sequence[_Word]) -> _Need | None:
    """``python3 x.py`` runs a file (trust hashes it); ``python3 -m mod`` the module the entry names; anything else, code."""
    if len(words) < 2:
        return _Need(f"`{base}` without a script file runs code from its input")
    first = words[1]
    if base.startswith(("python", "pypy")) and first.value == "-m":
        if len(words) < 3 or words[2].value.startswith("-") or words[2].active:
            return _Need(f"`{base} -m` without a module name runs code that cannot be checked")
        return _Need(f"`{base} -m {_show(words[2].value)}` runs that module: the entry must name it", prefix=3)
    if first.value.startswith("-"):
        return _Need(f"`{base} {_show(first.value)}` runs code that cannot be checked")
    if first.active:
        return _Need(f"`{base}` runs the script `{_show(first.value)}` names: the entry must spell it out", prefix=2)
    return None


def _first_operand(words: Sequence[_Word], start: int = 1) -> int:
    """Index of the first word at or after ``start`` that is not an option (``len(words)`` if none)."""
    i = start
    while i < len(words) and words[i].value.startswith("-") and words[i].value != "-":
        if words[i].value == "--":
            return i + 1
        i += 1
    return i


_GIT_GLOBAL_OK = frozenset({
    "--no-pager", "-P", "--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs",
    "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks", "--no-advice", "--version", "--help",
    "-h", "-v",
})  # fmt: skip
_GIT_COMMANDS = frozenset({
    "add", "am", "annotate", "apply", "archive", "blame", "branch", "bundle", "cat-file", "check-attr",
    "check-ignore", "check-mailmap", "check-ref-format", "checkout", "checkout-index", "cherry", "cherry-pick",
    "clean", "clone", "column", "commit", "commit-graph", "commit-tree", "count-objects", "describe", "diff",
    "diff-files", "diff-index", "diff-tree", "fast-export", "fetch", "for-each-ref", "format-patch", "fsck",
    "gc", "get-tar-commit-id", "grep", "hash-object", "init", "interpret-trailers", "log", "ls-files",
    "ls-remote", "ls-tree", "mailinfo", "mailsplit", "merge", "merge-base", "merge-file", "merge-tree",
    "mktag", "mktree", "multi-pack-index", "mv", "name-rev", "notes", "pack-refs", "prune", "pull", "push",
    "range-diff", "read-tree", "rebase", "reflog", "remote", "repack", "replace", "rerere", "reset", "restore",
    "rev-list", "rev-parse", "revert", "rm", "shortlog", "show", "show-branch", "show-ref", "sparse-checkout",
    "stash", "status", "stripspace", "switch", "symbolic-ref", "tag", "update-index", "update-ref",
    "verify-commit", "verify-pack", "verify-tag", "version", "whatchanged", "worktree", "write-tree",
})  # fmt: skip
# git commands and their options that run a program given to them
_GIT_RUNNING: Mapping[str, tuple[str, ...]] = {
    "clone": ("-c", "--config", "--template", "-u", "--upload-pack"),
    "init": ("--template",),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack", "-s", "--strategy"),
    "ls-remote": ("-u", "--upload-pack"),
    "push": ("--receive-pack", "--exec"),
    "archive": ("--exec", "--remote"),
    "remote": ("--upload-pack",),
    "rebase": ("-x", "--exec", "-i", "--interactive", "-s", "--strategy"),
    "merge": ("-s", "--strategy"),
    "cherry-pick": ("-s", "--strategy"),
    "revert": ("-s", "--strategy"),
    "grep": ("-O", "--open-files-in-pager"),
}


def _git_need(base: str, words: Sequence[_Word]) -> _Need | None:
    i = 1
    while i < len(words) and words[i].value.startswith("-"):
        if words[i].value not in _GIT_GLOBAL_OK:
            return _Need(f"the option `{_show(words[i].value)}` of `git` can run other programs or read other config")
        i += 1
    if i >= len(words):
        return None
    sub = words[i]
    if sub.active or sub.value not in _GIT_COMMANDS:
        return _Need(f"`git {_show(sub.value)}` is not a plain git command: it can be an alias or a git-* program, "
                     "or it runs other programs")
    return _options_hit(f"git {sub.value}", words[i + 1 :], _GIT_RUNNING.get(sub.value, ()))


def _sed_need(base: str, words: Sequence[_Word]) -> _Need | None:
    """A sed script runs commands only with the letter ``e`` (the ``e`` command, the ``s///e`` flag)."""
    scripts: list[_Word] = []
    operand_seen = False
    i = 1
    while i < len(words):
        word, value = words[i], words[i].value
        i += 1
        if value == "--":
            break
        if value.startswith("--"):
            name, eq, arg = value.partition("=")
            if name in ("--expression",):
                if eq:
                    scripts.append(_Word(arg, (), frozenset(word.active)))
                elif i < len(words):
                    scripts.append(words[i])
                    i += 1
            elif name == "--line-length" and not eq:
                i += 1
            elif name not in _SED_LONG_OK:
                return _Need(f"the option `{_show(value)}` of `sed` can run or read other scripts")
            continue
        if value.startswith("-") and value != "-":
            for j, letter in enumerate(value[1:], 1):
                if letter in "nrEsuz":
                    continue
                if letter == "i":
                    break  # -i[SUFFIX]
                if letter in "el":
                    tail = value[j + 1 :]
                    if tail:
                        given = _Word(tail, (), frozenset())
                    elif i < len(words):
                        given = words[i]
                        i += 1
                    else:
                        break
                    if letter == "e":
                        scripts.append(given)
                    break
                return _Need(f"the option `{_show(value)}` of `sed` can run or read other scripts")
            continue
        if not operand_seen and not scripts:
            scripts.append(word)  # the script, unless a later -e makes it a file (checked either way)
        operand_seen = True
    for script in scripts:
        if script.active or "e" in script.value:
            return _Need(f"the sed script `{_show(script.value)}` may run commands (`e`)")
    return None


_SED_LONG_OK = frozenset({
    "--quiet", "--silent", "--regexp-extended", "--separate", "--unbuffered", "--null-data", "--posix",
    "--sandbox", "--debug", "--in-place", "--follow-symlinks", "--line-length", "--help", "--version",
})  # fmt: skip


def _awk_need(base: str, words: Sequence[_Word]) -> _Need | None:
    """An awk program runs commands only through ``system``, ``|`` or gawk's ``@`` (``@load``, indirect calls)."""
    i = 1
    while i < len(words):
        value = words[i].value
        if value == "--":
            i += 1
            break
        if not value.startswith("-") or value == "-":
            break
        if value in ("-F", "-v"):
            i += 2
        elif value.startswith(("-F", "-v")) and len(value) > 2:
            i += 1
        else:
            return _Need(f"the option `{_show(value)}` of `{base}` can run or load other programs")
    if i >= len(words):
        return _Need(f"`{base}` without a program reads it from a file")
    program = words[i]
    if program.active or any(s in program.value for s in ("system", "|", "@", "\\\n", "\\\r")):
        return _Need(f"the {base} program `{_show(program.value)}` may run commands (system(), pipes, @)")
    return None


def _tar_need(base: str, words: Sequence[_Word]) -> _Need | None:
    if len(words) > 1 and not words[1].value.startswith("-") and any(c in words[1].value for c in "IF"):
        return _Need(f"the option `{_show(words[1].value)}` of `tar` can run other programs")
    for word in words[1:]:
        if ":" in word.value:
            return _Need(f"`{_show(word.value)}` names a remote archive, which `tar` reaches by running rsh")
    return None


def _package_runner_need(base: str, words: Sequence[_Word], start: int = 1) -> _Need | None:
    """``npx PKG ...``: the package (a program) must be named by the entry, and what it is given is checked too."""
    if start >= len(words) or words[start].value.startswith("-") or words[start].active:
        return _Need(f"`{base}` runs a package's program: the entry must spell out which")
    inner = _need(words[start:])
    if inner is not None:
        return _Need(inner.why, None if inner.prefix is None else start + inner.prefix)
    return _Need(f"`{base} {_show(words[start].value)}` runs that program: the entry must name it", prefix=start + 1)


_NPM_OK = frozenset({
    "-s", "--silent", "-q", "--quiet", "--if-present", "--workspaces", "--ws", "--json", "--color",
    "--no-color", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel",
})  # fmt: skip


def _npm_need(base: str, words: Sequence[_Word]) -> _Need | None:
    i = 1
    if i < len(words) and words[i].value.startswith("-"):
        return _Need(f"the option `{_show(words[i].value)}` before npm's command can change what it runs")
    if i >= len(words):
        return None
    sub = words[i].value
    end = next((j for j in range(i + 1, len(words)) if words[j].value == "--"), len(words))
    for word in words[i + 1 : end]:
        name = word.value.partition("=")[0]
        if name.startswith("-") and name not in _NPM_OK:
            return _Need(f"the option `{_show(word.value)}` of `npm` can change what it runs")
    if words[i].active or sub in ("exec", "x", "explore", "edit", "config", "c", "set", "help", "dlx", "init", "create"):
        return _Need(f"`{base} {_show(sub)}` runs a program given to it")
    if sub in ("run", "run-script", "rum", "urn"):
        if i + 1 >= len(words) or words[i + 1].value.startswith("-") or words[i + 1].active:
            return _Need(f"`{base} {sub}` runs a package.json script: the entry must name it")
        return _Need(f"`{base} {sub} {_show(words[i + 1].value)}` runs that script: the entry must name it", prefix=i + 2)
    return None


def _uv_need(base: str, words: Sequence[_Word]) -> _Need | None:
    if len(words) > 1 and words[1].value.startswith("-"):
        return _Need(f"the option `{_show(words[1].value)}` before uv's command can change what it runs")
    for word in words[1:]:
        if _option_hits(word.value, "--python") or _option_hits(word.value, "-p"):
            return _Need(f"the option `{_show(word.value)}` of `uv` names the interpreter it runs")
    sub = words[1].value if len(words) > 1 else ""
    if sub == "run":
        return _package_runner_need("uv run", words, 2)
    if sub == "tool" and len(words) > 2 and words[2].value == "run":
        return _package_runner_need("uv tool run", words, 3)
    return None


def _generic_exec_words(base: str, words: Sequence[_Word]) -> _Need | None:
    """``ip netns exec``, ``tc exec``, ``ip -batch``: words that run commands."""
    for word in words[1:]:
        if word.value in ("exec", "-b", "-batch", "-force") or word.active:
            return _Need(f"`{base} ... {_show(word.value)}` can run other programs")
    return None


def _openssl_need(base: str, words: Sequence[_Word]) -> _Need | None:
    for word in words[1:]:
        if any(s in word.value for s in ("engine", "provider", "-config", "-conf")):
            return _Need(f"the option `{_show(word.value)}` of `openssl` loads code")
    return None


def _make_need(base: str, words: Sequence[_Word]) -> _Need | None:
    for word in words[1:]:
        if "=" in word.value and not word.value.startswith("-"):
            return _Need(f"the variable `{_show(word.value)}` given to `{base}` can change the commands it runs")
    return None


def _less_need(base: str, words: Sequence[_Word]) -> _Need | None:
    for word in words[1:]:
        if word.value.startswith("+") or word.value.startswith("-+"):
            return _Need(f"`{_show(word.value)}` gives `{base}` commands, which can run programs")
    return None


_SPECIAL: Mapping[str, Callable[[str, Sequence[_Word]], _Need | None]] = {
    "git": _git_need,
    "sed": _sed_need,
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _awk_need),
    **dict.fromkeys(("tar", "rmt-tar"), _tar_need),
    **dict.fromkeys(("npx", "uvx", "bunx", "pipx"), lambda base, words: _package_runner_need(base, words)),
    **dict.fromkeys(("npm", "pnpm", "yarn"), _npm_need),
    "uv": _uv_need,
    **dict.fromkeys(("ip", "tc"), _generic_exec_words),
    "openssl": _openssl_need,
    **dict.fromkeys(("make", "gmake"), _make_need),
    **dict.fromkeys(("less", "more", "pager", "zless", "zmore"), _less_need),
}


def _dash_glob(word: _Word) -> bool:
    """Can this expanding word become a word that starts with ``-`` (an option) once the shell expands it?"""
    if not word.active:
        return False
    return word.value.startswith("-") or (0 in word.active and not word.value.startswith("~"))


def entry_warning(entry: str) -> str | None:
    """What a new allow entry lets run beyond what it shows, for ``hookcage allow`` (one line), or ``None``."""
    parsed = _compile_entry(entry, "$CLAUDE_PROJECT_DIR")
    if parsed is None:
        return None
    if not parsed.words:
        return ("`*` allows every program hookcage does not know to run others, with any arguments, and every "
                "program it does not know at all (project scripts, tools of a custom image)")
    if parsed.exact or parsed.words[0].wild:
        return None
    base = parsed.words[0].value.rsplit("/", 1)[-1]
    kind = programs.kind(base)
    if base in _SHELL_BUILTINS or kind == "wrapper":
        return (f"this entry allows nothing: `{base}` runs the command in its arguments (or changes the shell), "
                "which only an entry spelling out every word allows")
    if kind == "interpreter":
        return (f"`{base}` runs whatever script file it is given; `-c`, `-e`, `-m` and other options "
                "need an entry that spells them out")
    if kind == "runner":
        return (f"{programs.RUNNERS[base]}: the forms that run a program given on the command line need an exact "
                "entry, but what it reads from files still runs (only the sandbox bounds it)")
    return None


# --- evaluating words ----------------------------------------------------------------------------

_WORDISH = frozenset({"word", "number", "raw_string", "string", "concatenation", "simple_expansion", "expansion"})
_GLOB_CHARS = re.compile(r"[*?\[]")
_EXPANSION_START = re.compile(r"[\w{(\[@*#?$!-]")
_UNSAFE_WORD = re.compile(r"""[\s'"`;&|<>()]|\$(?:[\w{(\[@*#?$!'"-])""")
_UNSAFE_ROOT = re.compile(r"[\s*?\[]")


class _NotLiteral(Exception):
    """A word that does not evaluate to a literal; ``reason`` says which part."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _Word:
    value: str  # what the program receives, unless the shell expands it
    pieces: tuple[_Piece, ...]  # how the command wrote it
    active: frozenset[int] = frozenset()  # where it has unquoted `*`, `?`, `[` or a leading `~`

    @property
    def display(self) -> str:
        """How an entry spells it out: $CLAUDE_PROJECT_DIR kept, literal text quoted, what the shell expands bare."""
        out: list[str] = []
        pieces = self.pieces
        for i, piece in enumerate(pieces):
            if piece.var is not None:
                following = pieces[i + 1].value[:1] if i + 1 < len(pieces) else ""
                braced = following.isalnum() or following == "_"
                out.append(f"${{{piece.var}}}" if braced else f"${piece.var}")
            elif piece.quoted:
                out.append(_quote(piece.value))
            else:
                out.extend(_quote_unquoted(piece.value, leading=i == 0 and 0 in self.active))
        return "".join(out) or "''"

    @property
    def glob(self) -> bool:
        """The shell may turn it into other words (file names, a home directory)."""
        return bool(self.active)


@dataclass(frozen=True)
class _Piece:
    value: str
    quoted: bool
    var: str | None = None  # the project-dir variable this piece expands


@dataclass
class _Env:
    src: bytes
    root: str
    strict: bool  # check_command (strict) or literal_words (best effort)
    root_unsafe: bool = field(init=False)
    # each word is evaluated once, though the deny check and the walk both ask
    memo: dict[tuple[int, bool], _Word | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root_unsafe = bool(_UNSAFE_ROOT.search(self.root))

    def text(self, node: Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def show(self, node: Node) -> str:
        """A short excerpt of a node's text for a reason (never the whole of a long node)."""
        end = min(node.end_byte, node.start_byte + 4 * _EXCERPT)
        return _show(self.src[node.start_byte : end].decode("utf-8", "replace"))


def _evaluate(node: Node, env: _Env, *, name: bool = False) -> _Word:
    """The literal value of one word node (``name``: it is a command name)."""
    key = (node.id, name)
    known = env.memo.get(key)
    if known is None:
        try:
            known = _evaluate_once(node, env, name)
        except _NotLiteral as exc:
            known = exc.reason
        env.memo[key] = known
    if isinstance(known, str):
        raise _NotLiteral(known)
    return known


def _evaluate_once(node: Node, env: _Env, name: bool) -> _Word:
    pieces: list[_Piece] = []
    _collect(node, env, pieces)
    unquoted = "".join(p.value if not (p.quoted or p.var) else "\0" * len(p.value) for p in pieces)
    active = {i for i, char in enumerate(unquoted) if char in _EXPANDING}
    if name and active:
        raise _NotLiteral(f"the glob in the command name `{env.show(node)}` is not allowed")
    if _has_braces(unquoted):
        raise _NotLiteral(f"brace expansion `{env.show(node)}` is not allowed")
    if pieces and pieces[0].value.startswith("~"):
        # bash expands `~` only when nothing up to the first unquoted `/` is quoted
        first = pieces[0]
        if first.quoted or ("/" not in first.value and len(pieces) > 1):
            raise _NotLiteral(f"the `~` in `{env.show(node)}` is partly quoted; write `~/...` unquoted")
        if first.var is None and not name:
            active.add(0)
    return _Word("".join(p.value for p in pieces), tuple(pieces), frozenset(active))


_PLAIN_ENTRY_TEXT = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def _quote(text: str) -> str:
    """``text`` as one literal piece of an entry word (read back by :func:`_split_entry`)."""
    if not text:
        return ""
    if _PLAIN_ENTRY_TEXT.fullmatch(text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def _quote_unquoted(text: str, *, leading: bool) -> list[str]:
    """An unquoted piece of a command word for an entry: what the shell expands stays unquoted, the rest literal."""
    out: list[str] = []
    run: list[str] = []
    for i, char in enumerate(text):
        if char in _EXPANDING or (char == "~" and i == 0 and leading):
            out.append(_quote("".join(run)))
            run = []
            out.append(char)
        else:
            run.append(char)
    out.append(_quote("".join(run)))
    return out


def _has_braces(text: str) -> bool:
    """Does unquoted ``text`` have a brace expansion (``{a,b}``, ``{1..3}``)? One pass, any length."""
    inside = seen = False
    previous = ""
    for char in text:
        if char == "{":
            inside, seen = True, False
        elif char == "}":
            if inside and seen:
                return True
            inside = False
        elif inside and (char == "," or (char == "." and previous == ".")):
            seen = True
        previous = char
    return False


def _collect(node: Node, env: _Env, pieces: list[_Piece]) -> None:
    kind = node.type
    if kind in ("word", "number"):
        text = env.text(node)
        if "\\" in text:
            raise _NotLiteral(f"the backslash in `{_show(text)}` is not allowed (quote the word instead)")
        if _UNSAFE_WORD.search(text):  # tree-sitter should have split this word
            raise _NotLiteral(f"`{_show(text)}` cannot be evaluated to a literal word")
        pieces.append(_Piece(text, quoted=False))
    elif kind == "raw_string":
        text = env.text(node)
        if len(text) < 2 or text[0] != "'" or text[-1] != "'":
            raise _NotLiteral(f"the string `{_show(text)}` cannot be evaluated")
        pieces.append(_Piece(text[1:-1], quoted=True))
    elif kind == "string":
        _collect_string(node, env, pieces)
    elif kind == "concatenation":
        children = node.children
        _require_contiguous(node, children, env)
        for child in children:
            if not child.is_named:
                raise _NotLiteral(f"`{env.show(node)}` cannot be evaluated to a literal word")
            _collect(child, env, pieces)
    elif kind in ("simple_expansion", "expansion"):
        var = _project_var(node, env)
        if env.src[node.start_byte : node.start_byte + 1] != b"$":
            raise _NotLiteral(f"`{env.show(node)}` cannot be evaluated to a literal word")
        if env.strict and env.root_unsafe:
            raise _NotLiteral(f"unquoted `{env.show(node)}` splits the project path; quote it")
        pieces.append(_Piece(env.root, quoted=False, var=var))
    else:
        raise _NotLiteral(_not_allowed(node, env))


def _collect_string(node: Node, env: _Env, pieces: list[_Piece]) -> None:
    """A double-quoted string, read from the source between its quotes.

    tree-sitter files whitespace inside a string under the next token (the
    closing quote, a ``$``), so the text between expansions is taken as is.
    """
    src = env.src
    shown = env.show(node)
    if node.end_byte - node.start_byte < 2 or src[node.start_byte] != 34 or src[node.end_byte - 1] != 34:
        raise _NotLiteral(f"the string `{shown}` cannot be evaluated")
    position = node.start_byte + 1
    for child in node.named_children:
        if child.type == "string_content":
            continue
        if child.type not in ("simple_expansion", "expansion") or child.start_byte < position:
            raise _NotLiteral(_not_allowed(child, env))
        var = _project_var(child, env)
        inner = env.text(child)
        lead = len(inner) - len(inner.lstrip(_BLANKS))
        pieces.append(_Piece(_unescape(src[position : child.start_byte + lead], shown, followed=True), quoted=True))
        pieces.append(_Piece(env.root, quoted=True, var=var))
        position = child.end_byte
    pieces.append(_Piece(_unescape(src[position : node.end_byte - 1], shown, followed=False), quoted=True))


def _unescape(raw: bytes, shown: str, *, followed: bool) -> str:
    """Double-quoted text as bash reads it: a backslash escapes ``$``, backtick, ``"``, itself and newline.

    Anything tree-sitter should have made a node of (an unescaped ``$x``,
    backtick or quote) is refused rather than read as literal text.
    """
    content = raw.decode("utf-8", "replace")
    if not any(c in content for c in '\\$`"'):
        return content
    out: list[str] = []
    i = 0
    while i < len(content):
        char = content[i]
        following = content[i + 1] if i + 1 < len(content) else ""
        if char == "\\":
            if not following:  # would escape what comes after this part
                raise _NotLiteral(f"the string `{shown}` cannot be evaluated")
            out.append("" if following == "\n" else following if following in '$`"\\' else char + following)
            i += 2
            continue
        if char in '`"' or (char == "$" and (_EXPANSION_START.match(following) or (not following and followed))):
            raise _NotLiteral(f"the string `{shown}` cannot be evaluated")
        out.append(char)
        i += 1
    return "".join(out)


def _require_contiguous(node: Node, children: Sequence[Node], env: _Env) -> None:
    position = node.start_byte
    for child in children:
        if child.start_byte != position:
            raise _NotLiteral(f"`{env.show(node)}` cannot be evaluated to a literal word")
        position = child.end_byte
    if position != node.end_byte:
        raise _NotLiteral(f"`{env.show(node)}` cannot be evaluated to a literal word")


def _project_var(node: Node, env: _Env) -> str:
    """The project-dir variable a ``$X`` / ``${X}`` node names; anything else is not literal."""
    children = node.children
    shape = [c.type for c in children]
    if shape in (["$", "variable_name"], ["${", "variable_name", "}"]) and all(
        env.text(c) == c.type for c in children[1:] if not c.is_named
    ):
        var = env.text(node.children[1])
        if var in PROJECT_DIR_VARS:
            return var
    raise _NotLiteral(_not_allowed(node, env))


# --- structure ---------------------------------------------------------------------------------

_LABELS: Mapping[str, str] = {
    "command_substitution": "command substitution",
    "process_substitution": "process substitution",
    "arithmetic_expansion": "arithmetic expansion",
    "subshell": "a subshell",
    "compound_statement": "a group",
    "function_definition": "a function definition",
    "if_statement": "an if statement",
    "for_statement": "a for loop",
    "c_style_for_statement": "a for loop",
    "while_statement": "a while/until loop",
    "case_statement": "a case statement",
    "test_command": "a test expression",
    "negated_command": "negation",
    "variable_assignment": "the variable assignment",
    "variable_assignments": "the variable assignments",
    "declaration_command": "the declaration",
    "unset_command": "`unset`",
    "ansi_c_string": "ANSI-C quoting",
    "translated_string": "a translated string",
    "brace_expression": "brace expansion",
    "simple_expansion": "the variable",
    "expansion": "the expansion",
    "heredoc_redirect": "the heredoc",
    "herestring_redirect": "the herestring",
    "file_redirect": "the redirect",
    "extglob_pattern": "the extended glob",
    "array": "the array",
}
_NEVER = frozenset({"command_substitution", "process_substitution"})
_OPERATORS = frozenset({";", "&", "&&", "||", "|", "|&", "\n"})
_TO_NULL = frozenset({">", ">>", "&>", "&>>", ">|"})


def _not_allowed(node: Node, env: _Env) -> str:
    label = _LABELS.get(node.type, f"the {node.type.replace('_', ' ')}")
    verb = "is never allowed" if node.type in _NEVER else "is not allowed"
    if node.type in ("simple_expansion", "expansion"):
        verb += " (only $CLAUDE_PROJECT_DIR is expanded)"
    return f"{label} `{env.show(node)}` {verb}"


@dataclass
class _Simple:
    text: str
    words: tuple[_Word, ...]


@dataclass
class _Walk:
    """One pass over the statements: what is wrong, and which simple commands are off-list."""

    env: _Env
    rules: _Rules
    problems: list[str] = field(default_factory=list)
    complex: bool = False  # a suggestion must then be the whole command
    off_list: list[_Simple] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what `*` entries let a runner do
    todo: list[Node] = field(default_factory=list)  # a stack, not recursion: `a && a && ...` nests deep

    def fail(self, reason: str, *, structural: bool = True) -> None:
        self.problems.append(reason)
        self.complex = self.complex or structural

    def run(self, root: Node) -> None:
        self.todo.append(root)
        while self.todo:
            self.statement(self.todo.pop())

    def statement(self, node: Node) -> None:
        kind = node.type
        if kind == "comment":
            return
        if kind in ("program", "list", "pipeline"):
            for child in node.children:
                if not child.is_named and child.type not in _OPERATORS:
                    self.fail(f"`{self.env.show(child)}` is not allowed")
            self.todo.extend(reversed(node.named_children))
        elif kind == "redirected_statement":
            body = node.child_by_field_name("body")
            for child in node.children:
                if body is None or child.id != body.id:
                    self.redirect(child)
            if body is not None:
                self.todo.append(body)
        elif kind == "command":
            self.simple(node)
        else:
            self.fail(_not_allowed(node, self.env))

    def simple(self, node: Node) -> None:
        words: list[_Word] = []
        ok = True
        for child in node.children:
            try:
                if child.type == "command_name":
                    inner = child.named_children
                    if len(inner) != 1:
                        raise _NotLiteral(f"the command name `{self.env.show(child)}` cannot be evaluated")
                    words.append(_evaluate(inner[0], self.env, name=True))
                elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                    self.redirect(child)
                elif child.is_named and child.type in _WORDISH:
                    words.append(_evaluate(child, self.env))
                else:
                    raise _NotLiteral(_not_allowed(child, self.env) if child.is_named
                                      else f"`{self.env.show(node)}` cannot be evaluated to literal words")
            except _NotLiteral as exc:
                self.fail(exc.reason)
                ok = False
        if not ok or not words:
            return
        base = words[0].value.rsplit("/", 1)[-1]
        kind = programs.kind(base)
        if kind != "plain":
            for word in words[1:]:
                if _dash_glob(word):
                    self.complex = True
                    hint = "" if word.value.startswith("-") else f", or write `./{_show(word.display)}`"
                    self.fail(f"the glob `{_show(word.display)}` given to `{_show(base)}` can expand to an option "
                              f"(a file named `-...`), which can make it run other programs; quote it{hint}")
                    return
        need = _need(words)
        entry = _allowing(self.rules, words, need)
        if entry is None:
            if need is not None:
                self.complex = True
                if need.prefix is None:
                    self.fail(f"`{self.env.show(node)}` needs an exact entry: {need.why}")
                    return
                self.fail(f"`{self.env.show(node)}` needs an entry that spells out its first {need.prefix} words: "
                          f"{need.why}", structural=False)
            else:
                self.fail(f"`{self.env.show(node)}` is not on the allow-list", structural=False)
            self.off_list.append(_Simple(self.env.text(node), tuple(words)))
        elif not entry.exact and kind in ("runner", "interpreter"):
            note = programs.RUNNERS.get(base) or f"{base} runs the script file it is given"
            self.notes.append(f"{note} (allowed by the entry {entry.source!r})")

    def redirect(self, node: Node) -> None:
        kind = node.type
        text = self.env.show(node)
        if kind == "file_redirect":
            self.file_redirect(node, text)
        elif kind == "herestring_redirect":
            for child in node.named_children:
                try:
                    _evaluate(child, self.env)
                except _NotLiteral as exc:
                    self.fail(f"the herestring `{text}` is not allowed: {exc.reason}")
        elif kind == "heredoc_redirect":
            self.heredoc(node, text)
        elif not node.is_named:
            self.fail(f"`{text}` is not allowed")
        else:
            self.fail(_not_allowed(node, self.env))

    def file_redirect(self, node: Node, text: str) -> None:
        operators = [c.type for c in node.children if not c.is_named]
        targets = node.children_by_field_name("destination")
        others = [c for c in node.named_children if c.type != "file_descriptor" and c not in targets]
        if len(operators) != 1 or others:
            self.fail(f"the redirect `{text}` is not allowed")
            return
        operator = operators[0]
        if len(targets) > 1:
            self.fail(f"the redirect `{text}` is followed by more words; put redirects last")
            return
        if operator == ">&-" and not targets:
            return
        if operator == ">&" and len(targets) == 1 and targets[0].type == "number" and self.env.text(targets[0]).isdigit():
            return  # fd duplication: 2>&1, >&2
        if operator in _TO_NULL or operator == ">&":
            if len(targets) == 1:
                try:
                    target = _evaluate(targets[0], self.env)
                except _NotLiteral:
                    target = None
                if target is not None and target.value == "/dev/null" and not target.glob:
                    return
            self.fail(f"the redirect `{text}` writes a file; only /dev/null is allowed")
            return
        self.fail(f"the input redirect `{text}` is not allowed")

    def heredoc(self, node: Node, text: str) -> None:
        quoted = False
        for child in node.children:
            kind = child.type
            if kind == "heredoc_start":
                quoted = any(q in self.env.text(child) for q in "'\"\\")
            elif kind == "heredoc_body":
                body = self.env.text(child)
                if not quoted and ("$" in body or "`" in body):
                    self.fail(f"the heredoc `{text}` has expansions; quote its delimiter (<<'EOF')")
            elif kind in ("heredoc_end", "<<", "<<-") or kind in _OPERATORS:
                continue
            elif kind in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                self.redirect(child)
            elif kind in ("command", "pipeline", "list", "redirected_statement"):
                self.todo.append(child)  # the rest of the heredoc's line: `cat <<EOF | jq .`
            else:
                self.fail(f"the heredoc `{text}` is followed by `{self.env.show(child)}`; put arguments before it")


# --- the gate ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Verdict:
    allowed: bool
    reason: str = ""
    candidates: tuple[str, ...] = ()  # entries that might allow the command, best first
    notes: tuple[str, ...] = ()  # what the `*` entries that allowed it let a program run


_GAP = re.compile(rb"(?:[ \t\n]|\\\n)*")
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


@dataclass
class _Scan:
    commands: list[Node]
    substitution: Node | None
    gaps_ok: bool
    misread: str | None  # a token whose text is more than the token: `-l<<` read as `<<`
    too_big: str | None = None  # past MAX_NODES or MAX_NESTING: the scan stopped there

    @property
    def reliable(self) -> bool:
        return self.gaps_ok and self.misread is None


def _scan(root: Node, src: bytes) -> _Scan:
    """One pass over the whole tree: simple commands, the first substitution, and the text between tokens."""
    commands: list[Node] = []
    substitution: Node | None = None
    misread: str | None = None
    spans: list[tuple[int, int]] = []
    stack: list[tuple[Node, bool, int]] = [(root, False, 0)]
    count = 0
    while stack:
        node, in_body, depth = stack.pop()
        kind = node.type
        count += 1
        if count > MAX_NODES:
            return _Scan(commands, substitution, False, misread, f"the command has more than {MAX_NODES} "
                         "syntax nodes, the most the allow-list checks")
        if kind in _NESTING:
            depth += 1
            if depth > MAX_NESTING:
                return _Scan(commands, substitution, False, misread, f"the command nests more than {MAX_NESTING} "
                             "levels deep (substitutions, strings, groups), the most the allow-list checks")
        if kind == "command":
            commands.append(node)
        elif kind in _NEVER and (substitution is None or node.start_byte < substitution.start_byte):
            substitution = node
        elif kind == "heredoc_redirect" and misread is None and not _heredoc_ok(node, src):
            misread = src[node.start_byte : node.end_byte].decode("utf-8", "replace")
        children = node.children
        if not in_body and (kind == "heredoc_body" or not children):
            spans.append((node.start_byte, node.end_byte))
            if not node.is_named and misread is None and not _token_ok(node, src):
                misread = src[node.start_byte : node.end_byte].decode("utf-8", "replace")
        in_body = in_body or kind == "heredoc_body"
        stack.extend((child, in_body, depth) for child in reversed(children))
    return _Scan(commands, substitution, _gaps_ok(spans, src), misread)


def _heredoc_ok(node: Node, src: bytes) -> bool:
    """Does the heredoc end where bash ends it: at a line that is exactly its delimiter?

    tree-sitter takes any line as the end of a ``<<$E`` heredoc, so bash would
    run as commands the lines tree-sitter filed as its body and end.
    """
    children = node.children
    operator = children[0].type if children else ""
    starts = [c for c in children if c.type == "heredoc_start"]
    ends = [c for c in children if c.type == "heredoc_end"]
    if operator not in ("<<", "<<-") or len(starts) != 1 or len(ends) != 1:
        return False
    start = src[starts[0].start_byte : starts[0].end_byte]
    if b"$" in start or b"`" in start:
        return False
    delimiter = start.replace(b"'", b"").replace(b'"', b"").replace(b"\\", b"")
    end = src[ends[0].start_byte : ends[0].end_byte].rstrip(b"\n")
    if operator == "<<-":
        end = end.lstrip(b"\t")
    return bool(delimiter) and end == delimiter


def _token_ok(node: Node, src: bytes) -> bool:
    """Is an operator token's text its operator, give or take whitespace before it?

    tree-sitter-bash sometimes starts a token early, swallowing a word: in
    ``aa -l<<E`` the heredoc operator's text is ``-l<<``, and ``-l`` is lost.
    """
    text = src[node.start_byte : node.end_byte]
    token = node.type.encode()
    return text == token or (text.endswith(token) and not text[: -len(token)].strip(b" \t\n"))


def _gaps_ok(spans: list[tuple[int, int]], src: bytes) -> bool:
    """Is everything between tokens plain whitespace? tree-sitter skips ``\\<newline>`` and
    ``\\<space>`` where bash joins words or keeps the space, so any other gap is refused."""
    position = 0
    for start, end in sorted(spans):
        if start > position and not _gap_ok(src[position:start]):
            return False
        position = max(position, end)
    return position >= len(src) or _gap_ok(src[position:])


def _gap_ok(gap: bytes) -> bool:
    if _GAP.fullmatch(gap) is None:
        return False
    if b"\\\n" not in gap:
        return True
    # a continuation must leave a blank behind (`l\<newline>s` is one word to bash), and
    # next to a newline it makes tree-sitter run two lines together (`aa<newline>\<newline>-`)
    rest = gap.replace(b"\\\n", b"")
    return rest != b"" and b"\n" not in rest


def _command_words(node: Node, env: _Env) -> tuple[list[str], bool] | None:
    """A simple command's literal words for deny entries, and whether unknown words may follow.

    ``None`` when the command name itself is not literal.
    """
    name = node.child_by_field_name("name")
    if name is None or len(name.named_children) != 1:
        return None
    try:
        first = _evaluate(name.named_children[0], env, name=True)  # a glob name is not literal
    except _NotLiteral:
        return None
    values = [first.value]
    open_ended = False
    for child in node.children_by_field_name("argument"):
        try:
            word = _evaluate(child, env)
        except _NotLiteral:
            open_ended = True
            break
        if word.glob:  # a glob may become any number of words, any of them
            open_ended = True
            break
        values.append(word.value)
    # words that tree-sitter files under a redirect (`rm > /dev/null -rf /`)
    redirects = [c for c in node.children if c.type.endswith("_redirect")]
    parent = node.parent
    if parent is not None and parent.type == "redirected_statement":
        redirects += [c for c in parent.children if c.type.endswith("_redirect")]
    for redirect in redirects:
        if len(redirect.children_by_field_name("destination")) > 1 or redirect.children_by_field_name("argument"):
            open_ended = True
    return values, open_ended


def _denied_by(rules: _Rules, scan: _Scan, env: _Env) -> str | None:
    """The first simple command that a deny entry matches, as a reason."""
    if not rules.deny:
        return None
    for node in scan.commands:
        evaluated = _command_words(node, env)
        if evaluated is None:
            continue
        values, open_ended = evaluated
        # a wrapper's command is tried too: `sudo rm -rf /` against `rm *`
        base = values[0].rsplit("/", 1)[-1]
        runs_others = base in _SHELL_BUILTINS or programs.kind(base) in ("wrapper", "interpreter", "runner")
        starts = range(len(values)) if runs_others else range(1)
        for start in starts:
            for entry in rules.deny:
                if _matches(entry, values[start:], open_ended):
                    return f"`{env.show(node)}` matches the deny entry {shlex.quote(entry.source)}"
    return None


def _reads_as_written(root: Node, scan: _Scan, env: _Env) -> bool:
    """May a whole-command entry equal to this text allow it? Not when what runs is not
    what the text shows: a glob as a command name, a glob that can become an option of a
    program that runs others, or an unquoted project dir that splits."""
    for node in scan.commands:
        name = node.child_by_field_name("name")
        if name is None:
            continue
        stack = list(name.children)  # the name's own words, not what is nested in them
        while stack:
            word = stack.pop()
            if word.type == "word" and _GLOB_CHARS.search(env.text(word)):
                return False
            if word.type == "concatenation":
                stack.extend(word.children)
        if len(name.named_children) != 1:
            continue
        try:
            base = _evaluate(name.named_children[0], env, name=True).value.rsplit("/", 1)[-1]
        except _NotLiteral:
            continue
        if programs.kind(base) == "plain":
            continue
        for child in node.children_by_field_name("argument"):
            try:
                if _dash_glob(_evaluate(child, env)):
                    return False
            except _NotLiteral:
                continue
    if env.root_unsafe:
        for node in _walk(root):
            if node.type in ("simple_expansion", "expansion"):
                return False
    return True


def _walk(node: Node) -> Iterator[Node]:
    """Every node under ``node``, not descending into strings."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current.type not in ("string", "raw_string"):
            stack.extend(current.children)


def _judge(command: str, rules: _Rules) -> _Verdict:
    # bash gets the command as it is: check every character, strip only what bash skips
    odd = _odd_character(command)
    text = command.strip(_BLANKS)
    if not text:
        return _Verdict(False, "the command is empty")
    if odd is not None:
        return _Verdict(False, f"the command contains the character U+{ord(odd):04X}, which is not allowed")
    src = text.encode("utf-8")
    if len(src) > MAX_COMMAND_BYTES:
        return _Verdict(False, f"the command is longer than {MAX_COMMAND_BYTES} bytes, the most the allow-list checks")
    env = _Env(src, rules.root, strict=True)
    tree = _parse(src)
    root = tree.root_node
    scan = _scan(root, src)
    if scan.too_big is not None:
        return _Verdict(False, scan.too_big)
    whole = (text,)

    if _expand_text(text, rules.root) in rules.exact_texts and _reads_as_written(root, scan, env):
        if rules.deny and (root.has_error or not scan.reliable):
            return _Verdict(False, "the command cannot be parsed reliably, so the deny entries cannot be checked")
        denied = _denied_by(rules, scan, env)
        return _Verdict(False, denied) if denied else _Verdict(True)
    if root.has_error:
        return _Verdict(False, "the command cannot be parsed")
    if scan.misread is not None:
        return _Verdict(False, f"the command cannot be parsed reliably near `{_show(scan.misread)}`")
    if not scan.gaps_ok:
        return _Verdict(False, "a backslash between words (line continuation or `\\ `) is not allowed", whole)
    denied = _denied_by(rules, scan, env)
    if denied:
        return _Verdict(False, denied)
    if scan.substitution is not None:
        return _Verdict(False, _not_allowed(scan.substitution, env), whole)

    walk = _Walk(env, rules)
    walk.run(root)
    if not walk.problems:
        return _Verdict(True, notes=tuple(dict.fromkeys(walk.notes)))
    candidates: tuple[str, ...] = whole
    distinct = {tuple(w.value for w in simple.words) for simple in walk.off_list}
    if not walk.complex and len(distinct) == 1:
        candidates = (_entry_text(walk.off_list[0].words), text)
    return _Verdict(False, walk.problems[0], candidates)


def _entry_text(words: Sequence[_Word]) -> str:
    """The entry that allows exactly these words: literal characters quoted, what the shell expands left
    unquoted, ``$CLAUDE_PROJECT_DIR`` kept readable. :func:`_split_entry` reads it back word for word."""
    return " ".join(w.display for w in words)


def _suggest(candidates: Sequence[str], command: str, allowlist: AllowList, root: str) -> str | None:
    """The first candidate entry that really allows ``command``, as a ``hookcage allow`` line."""
    for entry in candidates:
        widened = AllowList(allow=(*allowlist.allow, entry), deny=allowlist.deny)
        if _judge(command, _compile(widened, root)).allowed:
            return f"hookcage allow {shlex.quote(entry)}"
    return None


_EXCERPT = 60


def _show(text: str) -> str:
    """A short excerpt of command text for a reason."""
    return _one_line(text[: 4 * _EXCERPT], _EXCERPT)


def _one_line(text: str, cap: int) -> str:
    """``text`` on one line (newlines shown as ``\\n``), without control characters, at most ``cap`` long."""
    line = sanitize(text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " "), cap=10 * cap)
    return line if len(line) <= cap else line[: cap - 1] + "…"
