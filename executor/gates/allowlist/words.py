"""Turning bash words into plain strings: what one word of the parse tree evaluates to, or why it cannot (pure).

Also the wording every reason shares: what a node is called (:func:`not_allowed`) and
short excerpts of command text (:func:`excerpt`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from executor.core.envnames import PROJECT_DIR_VARS
from executor.core.text import sanitize

BLANKS = " \t\n"  # what bash skips between words; str.strip() would also eat \r, \v, U+0085 ...
EXPANDING = "*?["  # what the shell expands in an unquoted word (and a leading `~`)


# --- evaluating words ----------------------------------------------------------------------------

WORDISH = frozenset({"word", "number", "raw_string", "string", "concatenation", "simple_expansion", "expansion"})
GLOB_CHARS = re.compile(r"[*?\[]")
_EXPANSION_START = re.compile(r"[\w{(\[@*#?$!-]")
_UNSAFE_WORD = re.compile(r"""[\s'"`;&|<>()]|\$(?:[\w{(\[@*#?$!'"-])""")
_UNSAFE_ROOT = re.compile(r"[\s*?\[]")


class NotLiteral(Exception):
    """A word that does not evaluate to a literal; ``reason`` says which part."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Word:
    """A word of a command evaluated to its literal value, with how the command wrote it."""

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
class Env:
    """What evaluating one command's words needs: its source, the project root, the mode, the memo."""

    src: bytes
    root: str
    strict: bool  # check_command (strict) or literal_words (best effort)
    root_unsafe: bool = field(init=False)
    # each word is evaluated once, though the deny check and the walk both ask
    memo: dict[tuple[int, bool], Word | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root_unsafe = bool(_UNSAFE_ROOT.search(self.root))

    def text(self, node: Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def show(self, node: Node) -> str:
        """A short excerpt of a node's text for a reason (never the whole of a long node)."""
        end = min(node.end_byte, node.start_byte + 4 * _EXCERPT)
        return excerpt(self.src[node.start_byte : end].decode("utf-8", "replace"))


def evaluate(node: Node, env: Env, *, name: bool = False) -> Word:
    """The literal value of one word node (``name``: it is a command name)."""
    key = (node.id, name)
    known = env.memo.get(key)
    if known is None:
        try:
            known = _evaluate_once(node, env, name)
        except NotLiteral as exc:
            known = exc.reason
        env.memo[key] = known
    if isinstance(known, str):
        raise NotLiteral(known)
    return known


def _evaluate_once(node: Node, env: Env, name: bool) -> Word:
    pieces: list[_Piece] = []
    _collect(node, env, pieces)
    unquoted = "".join(p.value if not (p.quoted or p.var) else "\0" * len(p.value) for p in pieces)
    active = {i for i, char in enumerate(unquoted) if char in EXPANDING}
    if name and active:
        raise NotLiteral(f"the glob in the command name `{env.show(node)}` is not allowed")
    if _has_braces(unquoted):
        raise NotLiteral(f"brace expansion `{env.show(node)}` is not allowed")
    if pieces and pieces[0].value.startswith("~"):
        # bash expands `~` only when nothing up to the first unquoted `/` is quoted
        first = pieces[0]
        if first.quoted or ("/" not in first.value and len(pieces) > 1):
            raise NotLiteral(f"the `~` in `{env.show(node)}` is partly quoted; write `~/...` unquoted")
        if first.var is None and not name:
            active.add(0)
    return Word("".join(p.value for p in pieces), tuple(pieces), frozenset(active))


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
        if char in EXPANDING or (char == "~" and i == 0 and leading):
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


def _collect(node: Node, env: Env, pieces: list[_Piece]) -> None:
    kind = node.type
    if kind in ("word", "number"):
        text = env.text(node)
        if "\\" in text:
            raise NotLiteral(f"the backslash in `{excerpt(text)}` is not allowed (quote the word instead)")
        if _UNSAFE_WORD.search(text):  # tree-sitter should have split this word
            raise NotLiteral(f"`{excerpt(text)}` cannot be evaluated to a literal word")
        pieces.append(_Piece(text, quoted=False))
    elif kind == "raw_string":
        text = env.text(node)
        if len(text) < 2 or text[0] != "'" or text[-1] != "'":
            raise NotLiteral(f"the string `{excerpt(text)}` cannot be evaluated")
        pieces.append(_Piece(text[1:-1], quoted=True))
    elif kind == "string":
        _collect_string(node, env, pieces)
    elif kind == "concatenation":
        children = node.children
        _require_contiguous(node, children, env)
        for child in children:
            if not child.is_named:
                raise NotLiteral(f"`{env.show(node)}` cannot be evaluated to a literal word")
            _collect(child, env, pieces)
    elif kind in ("simple_expansion", "expansion"):
        var = _project_var(node, env)
        if env.src[node.start_byte : node.start_byte + 1] != b"$":
            raise NotLiteral(f"`{env.show(node)}` cannot be evaluated to a literal word")
        if env.strict and env.root_unsafe:
            raise NotLiteral(f"unquoted `{env.show(node)}` splits the project path; quote it")
        pieces.append(_Piece(env.root, quoted=False, var=var))
    else:
        raise NotLiteral(not_allowed(node, env))


def _collect_string(node: Node, env: Env, pieces: list[_Piece]) -> None:
    """A double-quoted string, read from the source between its quotes.

    tree-sitter files whitespace inside a string under the next token (the
    closing quote, a ``$``), so the text between expansions is taken as is.
    """
    src = env.src
    shown = env.show(node)
    if node.end_byte - node.start_byte < 2 or src[node.start_byte] != 34 or src[node.end_byte - 1] != 34:
        raise NotLiteral(f"the string `{shown}` cannot be evaluated")
    position = node.start_byte + 1
    for child in node.named_children:
        if child.type == "string_content":
            continue
        if child.type not in ("simple_expansion", "expansion") or child.start_byte < position:
            raise NotLiteral(not_allowed(child, env))
        var = _project_var(child, env)
        inner = env.text(child)
        lead = len(inner) - len(inner.lstrip(BLANKS))
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
                raise NotLiteral(f"the string `{shown}` cannot be evaluated")
            out.append("" if following == "\n" else following if following in '$`"\\' else char + following)
            i += 2
            continue
        if char in '`"' or (char == "$" and (_EXPANSION_START.match(following) or (not following and followed))):
            raise NotLiteral(f"the string `{shown}` cannot be evaluated")
        out.append(char)
        i += 1
    return "".join(out)


def _require_contiguous(node: Node, children: Sequence[Node], env: Env) -> None:
    position = node.start_byte
    for child in children:
        if child.start_byte != position:
            raise NotLiteral(f"`{env.show(node)}` cannot be evaluated to a literal word")
        position = child.end_byte
    if position != node.end_byte:
        raise NotLiteral(f"`{env.show(node)}` cannot be evaluated to a literal word")


def _project_var(node: Node, env: Env) -> str:
    """The project-dir variable a ``$X`` / ``${X}`` node names; anything else is not literal."""
    children = node.children
    shape = [c.type for c in children]
    if shape in (["$", "variable_name"], ["${", "variable_name", "}"]) and all(
        env.text(c) == c.type for c in children[1:] if not c.is_named
    ):
        var = env.text(node.children[1])
        if var in PROJECT_DIR_VARS:
            return var
    raise NotLiteral(not_allowed(node, env))



# --- what a reason calls a node ----------------------------------------------------------------

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
NEVER = frozenset({"command_substitution", "process_substitution"})


def not_allowed(node: Node, env: Env) -> str:
    """The reason a node that is not a literal word denies the command."""
    label = _LABELS.get(node.type, f"the {node.type.replace('_', ' ')}")
    verb = "is never allowed" if node.type in NEVER else "is not allowed"
    if node.type in ("simple_expansion", "expansion"):
        verb += " (only $CLAUDE_PROJECT_DIR is expanded)"
    return f"{label} `{env.show(node)}` {verb}"


# --- excerpts ----------------------------------------------------------------------------------

_EXCERPT = 60


def excerpt(text: str) -> str:
    """A short excerpt of command text for a reason."""
    return one_line(text[: 4 * _EXCERPT], _EXCERPT)


def one_line(text: str, cap: int) -> str:
    """``text`` on one line (newlines shown as ``\\n``), without control characters, at most ``cap`` long."""
    line = sanitize(text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " "), cap=10 * cap)
    return line if len(line) <= cap else line[: cap - 1] + "…"
