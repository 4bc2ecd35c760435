"""Parsing a command once with tree-sitter-bash and walking the tree into simple commands (pure).

The bounds and the parser, the walk that checks every statement, redirect and
heredoc against the entries, the scan for what bash and tree-sitter could read
differently, and the deny check.
"""

from __future__ import annotations

import re
import shlex
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from executor.gates.allowlist import programs
from executor.gates.allowlist.entries import Rules, allowing_entry, entry_matches
from executor.gates.allowlist.running import SHELL_BUILTINS, dash_glob, need_of
from executor.gates.allowlist.words import (
    GLOB_CHARS,
    NEVER,
    WORDISH,
    Env,
    NotLiteral,
    Word,
    evaluate,
    excerpt,
    not_allowed,
)

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


def parse_bash(src: bytes) -> Tree:
    """The bash parse tree of ``src`` (one tree-sitter parser per thread)."""
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser.parse(src)


# --- structure ---------------------------------------------------------------------------------

_OPERATORS = frozenset({";", "&", "&&", "||", "|", "|&", "\n"})
_TO_NULL = frozenset({">", ">>", "&>", "&>>", ">|"})


@dataclass
class _Simple:
    text: str
    words: tuple[Word, ...]


@dataclass
class Walk:
    """One pass over the statements: what is wrong, and which simple commands are off-list."""

    env: Env
    rules: Rules
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
            self.fail(not_allowed(node, self.env))

    def simple(self, node: Node) -> None:
        words: list[Word] = []
        ok = True
        for child in node.children:
            try:
                if child.type == "command_name":
                    inner = child.named_children
                    if len(inner) != 1:
                        raise NotLiteral(f"the command name `{self.env.show(child)}` cannot be evaluated")
                    words.append(evaluate(inner[0], self.env, name=True))
                elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                    self.redirect(child)
                elif child.is_named and child.type in WORDISH:
                    words.append(evaluate(child, self.env))
                else:
                    raise NotLiteral(not_allowed(child, self.env) if child.is_named
                                      else f"`{self.env.show(node)}` cannot be evaluated to literal words")
            except NotLiteral as exc:
                self.fail(exc.reason)
                ok = False
        if not ok or not words:
            return
        base = words[0].value.rsplit("/", 1)[-1]
        kind = programs.kind(base)
        if kind != "plain":
            for word in words[1:]:
                if dash_glob(word):
                    self.complex = True
                    hint = "" if word.value.startswith("-") else f", or write `./{excerpt(word.display)}`"
                    self.fail(f"the glob `{excerpt(word.display)}` given to `{excerpt(base)}` can expand to an option "
                              f"(a file named `-...`), which can make it run other programs; quote it{hint}")
                    return
        need = need_of(words)
        entry = allowing_entry(self.rules, words, need)
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
                    evaluate(child, self.env)
                except NotLiteral as exc:
                    self.fail(f"the herestring `{text}` is not allowed: {exc.reason}")
        elif kind == "heredoc_redirect":
            self.heredoc(node, text)
        elif not node.is_named:
            self.fail(f"`{text}` is not allowed")
        else:
            self.fail(not_allowed(node, self.env))

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
                    target = evaluate(targets[0], self.env)
                except NotLiteral:
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



# --- scanning the tree ---------------------------------------------------------------------------

_GAP = re.compile(rb"(?:[ \t\n]|\\\n)*")


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


def scan_tree(root: Node, src: bytes) -> _Scan:
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
        elif kind in NEVER and (substitution is None or node.start_byte < substitution.start_byte):
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


def _command_words(node: Node, env: Env) -> tuple[list[str], bool] | None:
    """A simple command's literal words for deny entries, and whether unknown words may follow.

    ``None`` when the command name itself is not literal.
    """
    name = node.child_by_field_name("name")
    if name is None or len(name.named_children) != 1:
        return None
    try:
        first = evaluate(name.named_children[0], env, name=True)  # a glob name is not literal
    except NotLiteral:
        return None
    values = [first.value]
    open_ended = False
    for child in node.children_by_field_name("argument"):
        try:
            word = evaluate(child, env)
        except NotLiteral:
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


def denied_by(rules: Rules, scan: _Scan, env: Env) -> str | None:
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
        runs_others = base in SHELL_BUILTINS or programs.kind(base) in ("wrapper", "interpreter", "runner")
        starts = range(len(values)) if runs_others else range(1)
        for start in starts:
            for entry in rules.deny:
                if entry_matches(entry, values[start:], open_ended):
                    return f"`{env.show(node)}` matches the deny entry {shlex.quote(entry.source)}"
    return None


def reads_as_written(root: Node, scan: _Scan, env: Env) -> bool:
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
            if word.type == "word" and GLOB_CHARS.search(env.text(word)):
                return False
            if word.type == "concatenation":
                stack.extend(word.children)
        if len(name.named_children) != 1:
            continue
        try:
            base = evaluate(name.named_children[0], env, name=True).value.rsplit("/", 1)[-1]
        except NotLiteral:
            continue
        if programs.kind(base) == "plain":
            continue
        for child in node.children_by_field_name("argument"):
            try:
                if dash_glob(evaluate(child, env)):
                    return False
            except NotLiteral:
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
