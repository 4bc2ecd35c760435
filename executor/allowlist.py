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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from executor.text import sanitize

PROJECT_DIR_VARS = ("CLAUDE_PROJECT_DIR", "HOOKCAGE_PROJECT_DIR", "CODEBUDDY_PROJECT_DIR")
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
    (``hookcage allow '...'``), or ``None`` when no entry could.
    """

    allowed: bool
    reason: str = ""
    suggestion: str | None = None


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
    verdict = _judge(command, _compile(allowlist, project_root))
    if verdict.allowed:
        return AllowCheck(allowed=True)
    suggestion = _suggest(verdict.candidates, command, allowlist, project_root)
    return AllowCheck(False, _one_line(verdict.reason, 240), suggestion)


def literal_words(command: str, project_root: str) -> list[str]:
    """Every word of ``command`` that evaluates to a literal, in order (best effort, never raises).

    Words inside compound commands, substitutions and redirects count too;
    project-dir variables are expanded. Used to find the files a command
    references.
    """
    try:
        src = command.encode("utf-8")
    except UnicodeEncodeError:
        return []
    env = _Env(src, project_root, strict=False)
    words: list[str] = []
    stack = [_parse(src).root_node]
    while stack:
        node = stack.pop()
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

WordPattern = str | re.Pattern[str]


@dataclass(frozen=True)
class _Entry:
    source: str
    words: tuple[WordPattern, ...]  # without the final "*"
    rest: bool  # a final "*" word: any further arguments


@dataclass(frozen=True)
class _Rules:
    root: str
    exact_texts: frozenset[str]
    by_name: Mapping[str, tuple[_Entry, ...]]
    glob_named: tuple[_Entry, ...]  # first word has a "*", or the entry is only "*"
    exact_words: frozenset[tuple[str, ...]]  # entries without any "*"
    deny: tuple[_Entry, ...]


def _expand_text(text: str, root: str) -> str:
    return _PROJECT_VAR.sub(lambda _: root, text.strip(_BLANKS))


def _entry_words(entry: str) -> list[str]:
    try:
        return shlex.split(entry)
    except ValueError:  # unbalanced quotes: still usable word by word
        return entry.split()


def _word_pattern(word: str, root: str) -> WordPattern:
    literal = _PROJECT_VAR.sub(lambda _: root, word)
    if "*" not in word:
        return literal
    parts: list[str] = []
    last = 0
    for match in _PROJECT_VAR.finditer(word):
        parts.append(_glob(word[last : match.start()]))
        parts.append(re.escape(root))
        last = match.end()
    parts.append(_glob(word[last:]))
    return re.compile("".join(parts), re.DOTALL)


def _glob(text: str) -> str:
    return "[^/]*".join(re.escape(piece) for piece in text.split("*"))


def _compile_entry(entry: str, root: str) -> _Entry | None:
    words = _entry_words(entry)
    if not words:
        return None
    rest = words[-1] == "*"
    if rest:
        words = words[:-1]
    return _Entry(entry.strip(_BLANKS), tuple(_word_pattern(w, root) for w in words), rest)


@lru_cache(maxsize=64)
def _compile(allowlist: AllowList, root: str) -> _Rules:
    by_name: dict[str, list[_Entry]] = {}
    glob_named: list[_Entry] = []
    exact_words: set[tuple[str, ...]] = set()
    exact_texts: set[str] = set()
    for text in allowlist.allow:
        entry = _compile_entry(text, root)
        if entry is None:
            continue
        exact_texts.add(_expand_text(text, root))
        if "*" not in text:
            exact_words.add(tuple(str(w) for w in entry.words))
        if entry.words and isinstance(entry.words[0], str):
            by_name.setdefault(entry.words[0], []).append(entry)
        else:
            glob_named.append(entry)
    deny = tuple(e for e in (_compile_entry(t, root) for t in allowlist.deny) if e is not None)
    return _Rules(
        root=root,
        exact_texts=frozenset(exact_texts),
        by_name={name: tuple(entries) for name, entries in by_name.items()},
        glob_named=tuple(glob_named),
        exact_words=frozenset(exact_words),
        deny=deny,
    )


def _word_matches(pattern: WordPattern, value: str) -> bool:
    if isinstance(pattern, str):
        return pattern == value
    return pattern.fullmatch(value) is not None


def _matches(entry: _Entry, values: Sequence[str], open_ended: bool = False) -> bool:
    """Does ``entry`` match these words? ``open_ended``: more, unknown words may follow."""
    n = len(entry.words)
    if open_ended:
        if len(values) > n and not entry.rest:
            return False
        return all(_word_matches(p, v) for p, v in zip(entry.words, values, strict=False))
    if len(values) < n or (len(values) > n and not entry.rest):
        return False
    return all(_word_matches(p, v) for p, v in zip(entry.words, values, strict=False))


def _allowed_by(rules: _Rules, values: Sequence[str]) -> bool:
    candidates = (*rules.by_name.get(values[0], ()), *rules.glob_named)
    return any(_matches(entry, values) for entry in candidates)


# --- commands that run other commands ------------------------------------------------------------

_WRAPPERS = frozenset({
    "env", "timeout", "xargs", "sudo", "doas", "su", "runuser", "pkexec", "nohup", "nice", "ionice",
    "time", "exec", "eval", "command", "builtin", "coproc", "stdbuf", "setsid", "chroot", "flock",
    "watch", "parallel", "busybox", "unshare", "nsenter", "taskset", "chrt", "script", "strace",
    "ltrace", "unbuffer", "fakeroot", "firejail",
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "csh", "tcsh", "fish",
})  # fmt: skip
# Builtins that change the shell for the commands after them: aliases, options,
# functions, and variables (`read PATH` repoints every later command).
_SHELL_BUILTINS = frozenset({
    "export", "declare", "local", "readonly", "typeset", "alias", "unalias", "shopt", "set",
    "source", ".", "trap", "unset", "enable", "hash", "let", "read", "mapfile", "readarray",
    "getopts", "fc",
})  # fmt: skip
# Interpreters run a script file when their first argument is one; otherwise
# (`python -c`, `node -e`, `perl` reading stdin) they run code we cannot see.
_INTERPRETER = re.compile(r"(?:python|pypy)[0-9.]*|perl[0-9.]*|ruby[0-9.]*|node|nodejs|php[0-9.]*|lua[0-9.]*|Rscript|tclsh[0-9.]*")
# Options that make an otherwise plain command run another program (or, for
# the builtins, assign a variable).
_RUNNING_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "printf": ("-v",),
    "wait": ("-p",),
    "find": ("-exec", "-execdir", "-ok", "-okdir"),
    "git": ("-c", "--config-env", "--exec-path", "--exec", "--upload-pack", "--receive-pack",
            "--open-files-in-pager", "-O", "--extcmd", "-x", "--git-dir", "--work-tree"),
    "rg": ("--pre",),
    "fd": ("-x", "-X", "--exec", "--exec-batch"),
    "fdfind": ("-x", "-X", "--exec", "--exec-batch"),
    "tar": ("--to-command", "--checkpoint-action", "--use-compress-program", "-I",
            "--info-script", "--new-volume-script", "-F"),
    "rsync": ("-e", "--rsh", "--rsync-path"),
}  # fmt: skip


def _option_hits(word: str, option: str) -> bool:
    if option.startswith("--"):
        name = word.partition("=")[0]
        return len(name) > 2 and name.startswith("--") and option.startswith(name)  # GNU abbreviations
    if len(option) == 2:  # -c, -cfoo, and bundled: -ix
        return word.startswith("-") and not word.startswith("--") and option[1] in word[1:]
    return word == option


def _runs_a_file(interpreter: str, values: Sequence[str]) -> bool:
    """``python3 x.py``, ``python3 -m pytest``: a file or module, not ``-c``, ``-e`` or stdin."""
    if len(values) < 2:
        return False
    if interpreter.startswith(("python", "pypy")) and values[1] == "-m":
        return len(values) > 2 and not values[2].startswith("-")
    return not values[1].startswith("-")


def _needs_exact(values: Sequence[str]) -> str | None:
    """Why these words may only be allowed by an exact entry, or ``None``."""
    base = values[0].rsplit("/", 1)[-1]
    if base in _WRAPPERS:
        return f"`{base}` runs another command"
    if base in _SHELL_BUILTINS:
        return f"`{base}` changes the shell itself"
    if _INTERPRETER.fullmatch(base) and not _runs_a_file(base, values):
        return f"`{base}` without a script file runs code that cannot be checked"
    for option in _RUNNING_OPTIONS.get(base, ()):
        for word in values[1:]:
            if _option_hits(word, option):
                return f"the option `{word}` of `{base}` can run other commands or set variables"
    return None


# --- evaluating words ----------------------------------------------------------------------------

_WORDISH = frozenset({"word", "number", "raw_string", "string", "concatenation", "simple_expansion", "expansion"})
_GLOB_CHARS = re.compile(r"[*?\[]")
_BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
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
    value: str  # what the program receives
    display: str  # how an entry would write it ($CLAUDE_PROJECT_DIR kept)
    glob: bool  # has unquoted glob characters: the shell may turn it into other words


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
    unquoted = "".join(p.value if not (p.quoted or p.var) else "\0" for p in pieces)
    glob = bool(_GLOB_CHARS.search(unquoted))
    if name and glob:
        raise _NotLiteral(f"the glob in the command name `{_show(env.text(node))}` is not allowed")
    if _BRACES.search(unquoted):
        raise _NotLiteral(f"brace expansion `{_show(env.text(node))}` is not allowed")
    if pieces and pieces[0].value.startswith("~"):
        # bash expands `~` only when nothing up to the first unquoted `/` is quoted
        first = pieces[0]
        if first.quoted or ("/" not in first.value and len(pieces) > 1):
            raise _NotLiteral(f"the `~` in `{_show(env.text(node))}` is partly quoted; write `~/...` unquoted")
    display: list[str] = []
    for i, piece in enumerate(pieces):
        if piece.var is None:
            display.append(piece.value)
            continue
        following = pieces[i + 1].value[:1] if i + 1 < len(pieces) else ""
        braced = following.isalnum() or following == "_"
        display.append(f"${{{piece.var}}}" if braced else f"${piece.var}")
    return _Word("".join(p.value for p in pieces), "".join(display), glob)


def _collect(node: Node, env: _Env, pieces: list[_Piece]) -> None:
    kind = node.type
    text = env.text(node)
    if kind in ("word", "number"):
        if "\\" in text:
            raise _NotLiteral(f"the backslash in `{_show(text)}` is not allowed (quote the word instead)")
        if _UNSAFE_WORD.search(text):  # tree-sitter should have split this word
            raise _NotLiteral(f"`{_show(text)}` cannot be evaluated to a literal word")
        pieces.append(_Piece(text, quoted=False))
    elif kind == "raw_string":
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
                raise _NotLiteral(f"`{_show(text)}` cannot be evaluated to a literal word")
            _collect(child, env, pieces)
    elif kind in ("simple_expansion", "expansion"):
        var = _project_var(node, env)
        if text[:1] != "$":
            raise _NotLiteral(f"`{_show(text)}` cannot be evaluated to a literal word")
        if env.strict and env.root_unsafe:
            raise _NotLiteral(f"unquoted `{_show(text)}` splits the project path; quote it")
        pieces.append(_Piece(env.root, quoted=False, var=var))
    else:
        raise _NotLiteral(_not_allowed(node, env))


def _collect_string(node: Node, env: _Env, pieces: list[_Piece]) -> None:
    """A double-quoted string, read from the source between its quotes.

    tree-sitter files whitespace inside a string under the next token (the
    closing quote, a ``$``), so the text between expansions is taken as is.
    """
    text = env.text(node)
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise _NotLiteral(f"the string `{_show(text)}` cannot be evaluated")
    position = node.start_byte + 1
    for child in node.named_children:
        if child.type == "string_content":
            continue
        if child.type not in ("simple_expansion", "expansion") or child.start_byte < position:
            raise _NotLiteral(_not_allowed(child, env))
        inner = env.text(child)
        lead = len(inner) - len(inner.lstrip(_BLANKS))
        pieces.append(_Piece(_unescape(env.src[position : child.start_byte + lead], text, followed=True), quoted=True))
        pieces.append(_Piece(env.root, quoted=True, var=_project_var(child, env)))
        position = child.end_byte
    pieces.append(_Piece(_unescape(env.src[position : node.end_byte - 1], text, followed=False), quoted=True))


def _unescape(raw: bytes, string: str, *, followed: bool) -> str:
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
                raise _NotLiteral(f"the string `{_show(string)}` cannot be evaluated")
            out.append("" if following == "\n" else following if following in '$`"\\' else char + following)
            i += 2
            continue
        if char in '`"' or (char == "$" and (_EXPANSION_START.match(following) or (not following and followed))):
            raise _NotLiteral(f"the string `{_show(string)}` cannot be evaluated")
        out.append(char)
        i += 1
    return "".join(out)


def _require_contiguous(node: Node, children: Sequence[Node], env: _Env) -> None:
    position = node.start_byte
    for child in children:
        if child.start_byte != position:
            raise _NotLiteral(f"`{_show(env.text(node))}` cannot be evaluated to a literal word")
        position = child.end_byte
    if position != node.end_byte:
        raise _NotLiteral(f"`{_show(env.text(node))}` cannot be evaluated to a literal word")


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
    return f"{label} `{_show(env.text(node))}` {verb}"


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
                    self.fail(f"`{_show(self.env.text(child))}` is not allowed")
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
                        raise _NotLiteral(f"the command name `{_show(self.env.text(child))}` cannot be evaluated")
                    words.append(_evaluate(inner[0], self.env, name=True))
                elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                    self.redirect(child)
                elif child.is_named and child.type in _WORDISH:
                    words.append(_evaluate(child, self.env))
                else:
                    raise _NotLiteral(_not_allowed(child, self.env) if child.is_named
                                      else f"`{_show(self.env.text(node))}` cannot be evaluated to literal words")
            except _NotLiteral as exc:
                self.fail(exc.reason)
                ok = False
        if not ok or not words:
            return
        values = [w.value for w in words]
        why = _needs_exact(values)
        if why is not None:
            self.complex = True
            if tuple(values) not in self.rules.exact_words:
                self.fail(f"`{_show(self.env.text(node))}` needs an exact entry: {why}")
        elif not _allowed_by(self.rules, values):
            self.off_list.append(_Simple(self.env.text(node), tuple(words)))
            self.fail(f"`{_show(self.env.text(node))}` is not on the allow-list", structural=False)

    def redirect(self, node: Node) -> None:
        kind = node.type
        text = _show(self.env.text(node))
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
                self.fail(f"the heredoc `{text}` is followed by `{_show(self.env.text(child))}`; put arguments before it")


# --- the gate ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Verdict:
    allowed: bool
    reason: str = ""
    candidates: tuple[str, ...] = ()  # entries that might allow the command, best first


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

    @property
    def reliable(self) -> bool:
        return self.gaps_ok and self.misread is None


def _scan(root: Node, src: bytes) -> _Scan:
    """One pass over the whole tree: simple commands, the first substitution, and the text between tokens."""
    commands: list[Node] = []
    substitution: Node | None = None
    misread: str | None = None
    spans: list[tuple[int, int]] = []
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, in_body = stack.pop()
        kind = node.type
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
        stack.extend((child, in_body) for child in reversed(children))
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
        starts = range(len(values)) if _needs_exact(values) else range(1)
        for start in starts:
            for entry in rules.deny:
                if _matches(entry, values[start:], open_ended):
                    return f"`{_show(env.text(node))}` matches the deny entry {shlex.quote(entry.source)}"
    return None


def _reads_as_written(root: Node, scan: _Scan, env: _Env) -> bool:
    """May a whole-command entry equal to this text allow it? Not when what runs is not
    what the text shows: a glob as a command name, or an unquoted project dir that splits."""
    for node in scan.commands:
        name = node.child_by_field_name("name")
        if name is None:
            continue
        for word in _walk(name):
            if word.type == "word" and _GLOB_CHARS.search(env.text(word)):
                return False
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
    env = _Env(src, rules.root, strict=True)
    tree = _parse(src)
    root = tree.root_node
    scan = _scan(root, src)
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
        return _Verdict(True)
    candidates: tuple[str, ...] = whole
    distinct = {tuple(w.value for w in simple.words) for simple in walk.off_list}
    if not walk.complex and len(distinct) == 1:
        candidates = (_entry_text(walk.off_list[0].words), text)
    return _Verdict(False, walk.problems[0], candidates)


_PLAIN_ENTRY_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./~${}-]+")


def _entry_text(words: Sequence[_Word]) -> str:
    """An entry for these words, keeping ``$CLAUDE_PROJECT_DIR`` readable (entries are split by shlex, not bash)."""
    return " ".join(w.display if _PLAIN_ENTRY_WORD.fullmatch(w.display) else shlex.quote(w.display) for w in words)


def _suggest(candidates: Sequence[str], command: str, allowlist: AllowList, root: str) -> str | None:
    """The first candidate entry that really allows ``command``, as a ``hookcage allow`` line."""
    for entry in candidates:
        widened = AllowList(allow=(*allowlist.allow, entry), deny=allowlist.deny)
        if _judge(command, _compile(widened, root)).allowed:
            return f"hookcage allow {shlex.quote(entry)}"
    return None


def _show(text: str) -> str:
    """A short excerpt of command text for a reason."""
    return _one_line(text, 60)


def _one_line(text: str, cap: int) -> str:
    """``text`` on one line (newlines shown as ``\\n``), without control characters, at most ``cap`` long."""
    line = sanitize(text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " "), cap=10 * cap)
    return line if len(line) <= cap else line[: cap - 1] + "…"
