"""A handler's ``if`` condition: one permission rule, parsed once, evaluated per call (pure).

Claude Code's hooks reference (code.claude.com/docs/en/hooks, "Common fields",
snapshot 2026-08-22 of the page as mirrored by ericbuess/claude-code-docs
ec68a5b; confirmed in Claude Code 2.1.330, which evaluates ``if`` only when it
is a non-empty string and logs "cannot be evaluated for non-tool event"
otherwise): ``if`` holds exactly one permission rule (no ``&&``, ``||`` or
lists) and is evaluated only on the tool events PreToolUse, PostToolUse,
PostToolUseFailure, PermissionRequest and PermissionDenied; on any other
event a handler with ``if`` never runs. The rule syntax is the permissions
page's (code.claude.com/docs/en/permissions, same snapshot):

* ``Tool``: every call of the tool (``Bash``, ``Read``, ``mcp__github__create_issue``);
  ``*`` in the name is a glob over the whole name (``mcp__github__*``).
* ``Bash(pattern)``: :mod:`executor.core.condition_bash`.
* ``Read(path)``, ``Edit(path)``, ``Write(path)`` (and the other file
  tools): gitignore patterns, anchored by their start: ``//abs`` at the
  filesystem root, ``~/p`` at the home folder, ``/p`` at the project root
  (project and local files only), ``p`` or ``./p`` at the payload's ``cwd``.
  A pattern without a ``/`` inside matches at any depth (``Read(./.env)``
  runs for ``sub/.env`` too, measured); ``*`` stays within a path segment,
  ``**`` crosses them; a pattern that matches a folder matches everything in
  it. In ``if`` a path rule meets the tool it names (Claude Code 2.1.330:
  ``Write(*.md)`` runs for Write, ``Edit(*.md)`` does not); hookcage also lets
  ``Read`` meet Grep, Glob and LS (a folder search runs when the folders
  overlap) and ``Edit`` every file-editing tool, as permission rules do.
* ``WebFetch(domain:host)``: the URL's host, case-insensitive, trailing dot
  dropped; ``*.example.com`` is any subdomain (not the apex), ``*`` every
  host, any other ``*`` stays within one label.
* ``Agent(type)`` (``Task`` is its old name): the ``subagent_type``.
* ``Tool(param:value)``: a top-level scalar input parameter equal to the
  value (``*`` wildcards); an absent parameter never matches. Not for a
  tool's primary field (``Bash(command:...)``, ``WebFetch(url:...)``), which
  Claude Code ignores.

What hookcage decides (Claude Code says nothing, or evaluating is beyond it):
a rule it cannot evaluate exactly or as a superset (a specifier of a tool
whose syntax it does not know: ``PowerShell(...)``, ``Skill(...)``; a list of
rules, which Claude Code accepts and never matches; ``Bash(command:...)``,
which it ignores; control characters; more than :data:`MAX_RULE` characters or
:data:`MAX_WILDCARDS` wildcards) makes the handler
invalid: it is named with its file and JSON path and refused at review,
never run "always". A rule it can read is evaluated so that the handler runs
at least whenever Claude Code would run it: when the payload lacks what the
rule looks at (no ``tool_input.command``, no ``cwd``, an unknown home),
the handler runs. Symlinks are followed only when the caller hands in a
``realpath`` (:class:`ConditionContext`); then either path may match.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from executor.core import linre
from executor.core.condition_bash import BashPattern, compile_bash, wildcard_regex

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "PermissionDenied")
"""The events on which Claude Code evaluates ``if``; on others a handler with ``if`` never runs."""
MAX_RULE = 4096
"""The longest ``if`` rule hookcage reads (characters)."""
MAX_WILDCARDS = 64
"""The most ``*`` a rule may hold: matching time grows with them (RE2 keeps it linear in the command)."""

_RULE = re.compile(r"\s*([^\s()]+)\s*(?:\((.*)\))?\s*", re.DOTALL)
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.*:@-]+")
_LIST = re.compile(r"\)\s*(?:\|\|?|&&|,|;)\s*[A-Za-z_*][\w*.-]*\s*(?:\(|\Z)")
_PARAM = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:(.*)", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")

_READ_TOOLS = frozenset({"Read", "Grep", "Glob", "LS"})
_EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
_PATH_FIELD = {"Read": "file_path", "Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
               "NotebookEdit": "notebook_path", "Grep": "path", "Glob": "path", "LS": "path"}
_PATH_OPTIONAL = frozenset({"Grep", "Glob", "LS"})
# Parameters the param form may name (Claude Code knows each tool's schema; these are Bash's and Agent's).
_PARAMS = {
    "Bash": frozenset({"timeout", "description", "run_in_background", "dangerouslyDisableSandbox"}),
    "Agent": frozenset({"description", "prompt", "subagent_type", "model", "isolation", "run_in_background",
                        "name", "mode", "team_name"}),
}
_PRIMARY = {"Bash": "command", "PowerShell": "command", "Read": "file_path", "Edit": "file_path",
            "Write": "file_path", "Grep": "path", "Glob": "path", "NotebookEdit": "notebook_path",
            "WebFetch": "url"}
_OWN_SYNTAX = frozenset({"Bash", "PowerShell", "WebFetch", "Agent", "Task", "Skill", *_PATH_FIELD})


class ConditionError(ValueError):
    """The ``if`` rule cannot be evaluated; the message says why (one line)."""


@dataclass(frozen=True)
class ConditionContext:
    """What evaluating a rule may need besides the payload (handed in by the caller).

    Attributes:
        root: the project root, where ``/path`` rules are anchored.
        home: the user's home folder, where ``~/path`` rules are anchored.
        realpath: resolves symlinks (an edge's function); None: paths are taken as they are.
    """

    root: str | None = None
    home: str | None = None
    realpath: Callable[[str], str] | None = None


Check = Callable[[Mapping[str, Any], Mapping[str, Any], ConditionContext], bool]
"""(tool_input, payload, context) -> does the specifier hold."""


@dataclass(frozen=True)
class Condition:
    """A parsed ``if`` rule.

    Attributes:
        source: the rule as written (shown by ``hookcage list`` and the review; part of the trust hash).
        tools: the canonical tool names it applies to (empty when ``tool_glob`` is set).
        tool_glob: the tool-name glob, when the name has a ``*``.
        check: the specifier's test; None for a bare tool name.
    """

    source: str
    tools: frozenset[str]
    tool_glob: linre.LinearPattern | None = None
    check: Check | None = None

    def holds(self, payload: Mapping[str, Any], context: ConditionContext,
              aliases: Callable[[str], tuple[str, ...]] = lambda name: (name,)) -> bool:
        """Whether the handler runs for this (canonical) payload of a tool event.

        Args:
            payload: the event's payload (``tool_name``, ``tool_input``, ``cwd``).
            context: the project root, home and symlink resolution.
            aliases: every agent's names for a tool (a Claude Code rule meets a Gemini call).
        """
        name = payload.get("tool_name")
        if not isinstance(name, str):
            return True  # nothing to judge: run
        names = aliases(name)
        if self.tool_glob is not None:
            if not any(self.tool_glob.fullmatch(n) for n in names):
                return False
        elif not any(n in self.tools for n in names):
            return False
        if self.check is None:
            return True
        tool_input = payload.get("tool_input")
        if not isinstance(tool_input, Mapping):
            return True
        canonical = next((n for n in names if n in _PATH_FIELD), names[0])
        return self.check(tool_input, {**payload, "tool_name": canonical}, context)


def parse_condition(raw: Any, *, root_anchor: bool = True) -> Condition:
    """Parse an ``if`` value as Claude Code reads it (see the module docstring).

    Args:
        raw: the value as decoded from JSON (a non-empty string; the caller
            handles absence and ``""``).
        root_anchor: ``/path`` rules may anchor at the project root (project and
            local files); elsewhere they are refused.

    Raises:
        ConditionError: the rule cannot be evaluated; the message says why.
    """
    _check_text(raw)
    return _parse_claude(raw, root_anchor)


def _check_text(raw: Any) -> None:
    if not isinstance(raw, str):
        raise ConditionError('must be a string: one permission rule such as "Bash(git push *)"')
    if len(raw) > MAX_RULE:
        raise ConditionError(f"longer than {MAX_RULE} characters: not read")
    if raw.count("*") > MAX_WILDCARDS:
        raise ConditionError(f"more than {MAX_WILDCARDS} wildcards: not read")
    if _CONTROL.search(raw):
        raise ConditionError("holds a control character or line break: not read")


def _parse_claude(raw: str, root_anchor: bool) -> Condition:
    match = _RULE.fullmatch(raw)
    if match is None:
        raise ConditionError(f'{raw!r} is not a permission rule: write Tool or Tool(specifier), e.g. "Bash(git push *)"')
    tool, spec = match.group(1), match.group(2)
    if _LIST.search(raw[match.start(2) - 1:] if spec is not None else raw):
        raise ConditionError("holds more than one rule: 'if' holds exactly one permission rule (no &&, || or "
                             "lists); write one handler per rule")
    if not _TOOL_NAME.fullmatch(tool):
        raise ConditionError(f"{tool!r} is not a tool name")
    if spec is not None and spec.strip() in ("", "*") and tool not in ("WebFetch",):
        spec = None  # Tool() and Tool(*) are the bare tool
    if "*" in tool:
        if spec is not None:
            raise ConditionError(f"a tool-name glob ({tool}) takes no specifier")
        return Condition(raw, frozenset(), tool_glob=linre.compile(r"(?s)\A(?:" + wildcard_regex(tool) + r")\z"))
    tool = "Agent" if tool == "Task" else tool
    if spec is None:
        family = _READ_TOOLS if tool == "Read" else _EDIT_TOOLS if tool == "Edit" else frozenset({tool})
        return Condition(raw, frozenset(family | {tool}))
    return _with_specifier(raw, tool, spec, root_anchor)


def _with_specifier(raw: str, tool: str, spec: str, root_anchor: bool) -> Condition:
    param = _PARAM.fullmatch(spec)
    if param is not None and param.group(1) == _PRIMARY.get(tool):
        raise ConditionError(f"{tool}({param.group(1)}:...) is ignored by Claude Code (a compound command "
                             f"could bypass it): write {tool}(pattern) instead")
    if param is not None and (param.group(1) in _PARAMS.get(tool, ()) or tool not in _OWN_SYNTAX):
        return Condition(raw, frozenset({tool}), check=_param_check(param.group(1), param.group(2).strip()))
    if tool == "Bash":
        return Condition(raw, frozenset({tool}), check=_bash_check(compile_bash(spec)))
    if tool in _PATH_FIELD:
        # Measured with Claude Code 2.1.330: in `if` a path rule meets calls of the tool it names
        # (Write(*.md) runs for Write, Edit(*.md) does not), though permission rules consult only
        # Read and Edit. hookcage also lets Read(...) meet Grep, Glob and LS and Edit(...) every
        # file-editing tool, as permission rules do: a superset.
        family = _READ_TOOLS if tool == "Read" else _EDIT_TOOLS if tool == "Edit" else frozenset({tool})
        return Condition(raw, family, check=_path_check(spec.strip(), root_anchor))
    if tool == "WebFetch":
        if not spec.strip().startswith("domain:"):
            raise ConditionError("a WebFetch rule takes domain:HOST, e.g. WebFetch(domain:example.com)")
        return Condition(raw, frozenset({tool}), check=_domain_check(spec.strip()[len("domain:"):].strip()))
    if tool == "Agent":
        return Condition(raw, frozenset({tool}), check=_field_check("subagent_type", spec.strip()))
    raise ConditionError(f"hookcage cannot evaluate {tool}({spec}): it does not know how Claude Code reads a "
                         f"{tool} specifier (bare {tool}, Bash(...), Read(...), Edit(...), WebFetch(domain:...), "
                         "Agent(...) and Tool(param:value) it can)")


# --- checks ---------------------------------------------------------------------------------------


def _bash_check(pattern: BashPattern) -> Check:
    def check(tool_input: Mapping[str, Any], payload: Mapping[str, Any], context: ConditionContext) -> bool:
        return pattern.matches(tool_input.get("command"))

    return check


def _scalar(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float) or value is None:
        return json.dumps(value)
    return None


def _param_check(name: str, value: str) -> Check:
    pattern = linre.compile(r"(?s)\A(?:" + wildcard_regex(value) + r")\z")

    def check(tool_input: Mapping[str, Any], payload: Mapping[str, Any], context: ConditionContext) -> bool:
        if name not in tool_input:
            return False  # an omitted parameter never matches
        text = _scalar(tool_input[name])
        return text is not None and pattern.fullmatch(text)

    return check


def _field_check(name: str, value: str) -> Check:
    pattern = linre.compile(r"(?s)\A(?:" + wildcard_regex(value) + r")\z")

    def check(tool_input: Mapping[str, Any], payload: Mapping[str, Any], context: ConditionContext) -> bool:
        text = tool_input.get(name)
        return not isinstance(text, str) or pattern.fullmatch(text)

    return check


def _domain_check(domain: str) -> Check:
    domain = domain.lower().rstrip(".")
    if not domain:
        raise ConditionError("WebFetch(domain:) names no host")
    if domain == "*":
        pattern = None
    elif domain.startswith("*.") and "*" not in domain[2:]:
        pattern = linre.compile(r"(?s)\A.+" + wildcard_regex(domain[1:]) + r"\z")
    else:
        pattern = linre.compile(r"(?s)\A" + wildcard_regex(domain, star="[^.]*") + r"\z")

    def check(tool_input: Mapping[str, Any], payload: Mapping[str, Any], context: ConditionContext) -> bool:
        url = tool_input.get("url")
        if not isinstance(url, str):
            return True
        try:
            host = urlsplit(url.strip()).hostname
        except ValueError:
            return True
        if not host:
            return True
        return pattern is None or pattern.fullmatch(host.rstrip(".").lower())

    return check


@dataclass(frozen=True)
class _PathRule:
    anchor: str  # "/", "~", "root" or "cwd"
    pattern: linre.LinearPattern
    dir_only: bool
    base: str = ""
    """The literal folders the pattern starts with (anchored patterns), relative to the anchor."""


def _path_check(spec: str, root_anchor: bool) -> Check:
    rule = compile_path(spec, root_anchor)

    def check(tool_input: Mapping[str, Any], payload: Mapping[str, Any], context: ConditionContext) -> bool:
        return path_matches(rule, tool_input, payload, context)

    return check


def compile_path(spec: str, root_anchor: bool = True, *, nocase: bool = False) -> _PathRule:
    """Compile a Read/Edit path pattern (gitignore syntax with Claude Code's anchors; ``nocase``:
    letters match either case, as CodeBuddy Code's globs do)."""
    anchored = False
    if spec.startswith("//"):
        anchor, rel, anchored = "/", spec[2:], True
    elif spec.startswith("~/"):
        anchor, rel = "~", spec[2:]
    elif spec.startswith("/"):
        if not root_anchor:
            raise ConditionError(f"{spec} is anchored at the settings file's own folder, which hookcage does not "
                                 "use for this file: write //absolute/path or ~/path")
        anchor, rel, anchored = "root", spec[1:], True
    elif spec.startswith("~"):
        raise ConditionError(f"{spec}: only ~/ names the home folder")
    else:
        anchor, rel = "cwd", spec[2:] if spec.startswith("./") else spec
    if rel.startswith("!"):
        raise ConditionError("a negated pattern (!...) means nothing in one rule")
    dir_only = rel.endswith("/")
    rel = rel.rstrip("/")
    anchored = anchored or "/" in rel
    body = _gitignore_regex(rel) if rel else ".*"
    prefix = "" if anchored else "(?:.*/)?"
    try:
        pattern = linre.compile(("(?is)" if nocase else "(?s)") + r"\A" + prefix + "(?:" + body + r")\z")
    except linre.PatternError as exc:
        raise ConditionError(f"cannot compile the path pattern {spec!r}: {exc}") from None
    base = ""
    if anchored:
        literal = re.split(r"[*?\[\\]", rel, maxsplit=1)[0]
        base = literal.rsplit("/", 1)[0] if "/" in literal else ""
    return _PathRule(anchor, pattern, dir_only, base)


def _gitignore_regex(rel: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(rel):
        c = rel[i]
        if rel.startswith("**/", i) and (i == 0 or rel[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif rel.startswith("**", i) and (i == 0 or rel[i - 1] == "/") and i + 2 == len(rel):
            out.append(".*")
            i += 2
        elif c == "*":
            while i < len(rel) and rel[i] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := _class_end(rel, i)) > 0:
            body = rel[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            chars = "".join(f"\\x{{{ord(ch):x}}}" if ch != "-" or j in (0, len(body) - 1) else "-"
                            for j, ch in enumerate(body))
            out.append(("[^/" if negate else "[") + chars + "]")
            i = end + 1
        elif c == "\\" and i + 1 < len(rel):
            out.append(wildcard_regex(rel[i + 1]))
            i += 2
        else:
            out.append(wildcard_regex(c))
            i += 1
    return "".join(out)


def _class_end(text: str, start: int) -> int:
    end = text.find("]", start + 2)
    return end if end > start + 1 and "/" not in text[start:end] else -1


def _absolute(path: str, base: str, home: str | None) -> str:
    if path.startswith("~/") and home:
        path = posixpath.join(home, path[2:])
    joined = posixpath.normpath(posixpath.join(base, path))
    return "/" + joined.lstrip("/")


def path_matches(rule: _PathRule, tool_input: Mapping[str, Any], payload: Mapping[str, Any],
                 context: ConditionContext) -> bool:
    """Whether the call's path falls under the rule (unknown anchor or path: True)."""
    tool = str(payload.get("tool_name"))
    raw = tool_input.get(_PATH_FIELD.get(tool, "file_path"))
    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        return True
    if raw is None and tool in _PATH_OPTIONAL:
        raw = cwd
    if not isinstance(raw, str) or not raw or "\0" in raw:
        return True
    anchor = {"/": "/", "~": context.home, "root": context.root, "cwd": cwd}[rule.anchor]
    if not anchor or not anchor.startswith("/"):
        return True
    anchor = _absolute(anchor, "/", None)
    target = _absolute(raw, cwd, context.home)
    paths = [target]
    if context.realpath is not None:
        try:
            paths.append(context.realpath(target))
        except (OSError, ValueError):
            return True
    if tool in _PATH_OPTIONAL:
        # A folder search reads what is under the folder: it runs when the rule's folder and
        # the searched one overlap (a superset of every file the rule could match there).
        base = _absolute(rule.base, anchor, None)
        return any(_overlap(base, p) for p in paths)
    return any(_under(rule, anchor, p) for p in paths)


def _overlap(a: str, b: str) -> bool:
    return a == b or a == "/" or b == "/" or a.startswith(b + "/") or b.startswith(a + "/")


def _under(rule: _PathRule, anchor: str, path: str) -> bool:
    if anchor != "/" and path != anchor and not path.startswith(anchor + "/"):
        return False
    rel = path[len(anchor):].lstrip("/")
    if not rel:
        return False
    parts = rel.split("/")
    # A pattern that matches a folder matches everything in it (gitignore).
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + (0 if rule.dir_only else 1))]
    return any(rule.pattern.fullmatch(c) for c in candidates)


# --- CodeBuddy Code's reading -----------------------------------------------------------------------

_CODEBUDDY_RULE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\(([^)]*)\))?")
_GLOB_EXTRAS = re.compile(r"[?\[\]{}]|\A!|[+@!*?]\(")  # picomatch: ? [] {} braces, a leading !, extglobs
_CODEBUDDY_FILE_TOOLS = frozenset({"Read", "Write", "Edit", "MultiEdit"})
_SEPARATORS = re.compile(r"&&|\|\||\||;|&")


def parse_codebuddy_condition(raw: Any, *, root_anchor: bool = True) -> Condition | None:
    """Parse an ``if`` value as CodeBuddy Code 2.163 reads it; None: it runs the hook on every call.

    Read from its CLI (``HookManager.filterHooksByIfRule`` and the rule object
    beside it; measured with the CLI in tests/integration/test_conditions_real_agents.py):
    the trimmed rule must be ``Name`` or ``Name(spec)`` with no ``)`` in the
    spec, else the hook runs on every call (a list such as ``Bash(a)|Bash(b)``
    too); a call without a tool name (any event but the tool events) runs it;
    the tool name is compared exactly; Bash and PowerShell specs are matched,
    case-insensitively, against the whole command and each subcommand split at
    ``&&``, ``||``, ``|``, ``;`` (``x:*``: the first word is ``x`` or the command
    starts with ``x ``; with ``*``: a glob where ``*`` spans anything; else the
    exact command), with no assignment stripped (``FOO=1 git push`` is not
    ``git push *``); Read, Write, Edit and MultiEdit specs are case-insensitive
    globs over the path; any other tool's spec over its first string input.

    hookcage runs the hook at least then: it also runs it wherever Claude Code's
    reading (:func:`parse_condition`) would, lets every agent's name for the tool
    count, and runs a hook whose rule names another tool with a spec for every
    call of that tool. A glob character other than ``*`` in a Bash or file spec
    (``?``, ``[``, ``{``, ``!``...) is refused: hookcage does not evaluate
    CodeBuddy's glob syntax.

    Raises:
        ConditionError: the rule cannot be evaluated; the message says why.
    """
    _check_text(raw)
    match = _CODEBUDDY_RULE.fullmatch(raw.strip())
    if match is None:
        return None
    tool, spec = match.group(1), (match.group(2) or "").strip()
    if not spec:
        return Condition(raw, frozenset({tool}))
    if (tool in ("Bash", "PowerShell") or tool in _CODEBUDDY_FILE_TOOLS) and _GLOB_EXTRAS.search(spec):
        raise ConditionError(f"{spec!r} holds a glob character other than *: hookcage does not evaluate "
                                 "CodeBuddy Code's glob syntax")
    if tool == "Bash":
        claude = _bash_check(compile_bash(spec))
        own = _codebuddy_command_check(spec)
        return Condition(raw, frozenset({tool}), check=lambda i, p, c: own(i, p, c) or claude(i, p, c))
    if tool in _CODEBUDDY_FILE_TOOLS:
        rule = compile_path(spec, root_anchor, nocase=True)
        return Condition(raw, frozenset({tool}), check=lambda i, p, c: path_matches(rule, i, p, c))
    if tool == "PowerShell":
        raise ConditionError(f"hookcage cannot evaluate PowerShell({spec}): it does not parse PowerShell")
    return Condition(raw, frozenset({tool}))  # another tool's spec: every call of the tool (a superset)


def _codebuddy_command_check(spec: str) -> Check:
    if spec.endswith(":*"):
        prefix = spec[:-2].strip()
        regex = wildcard_regex(prefix) + r"(?:\s.*)?"
    else:
        regex = wildcard_regex(spec)  # `*` spans anything (picomatch's bash mode); no `*`: the exact command
    pattern = linre.compile(r"(?is)\A\s*(?:" + regex + r")\s*\z")

    def check(tool_input: Mapping[str, Any], payload: Mapping[str, Any], context: ConditionContext) -> bool:
        command = tool_input.get("command")
        if not isinstance(command, str):
            return True
        if len(command) > 100_000:
            return True
        return pattern.fullmatch(command) or any(pattern.fullmatch(part) for part in _SEPARATORS.split(command))

    return check


# --- reading a handler's `if` -----------------------------------------------------------------------


@dataclass(frozen=True)
class IfReading:
    """What a handler's ``if`` comes to: a condition, none, an error (the handler is invalid), a warning."""

    condition: Condition | None = None
    error: str = ""
    warning: str = ""


def read_if(value: Any, event: str, agent: Literal["claude", "codebuddy"], *, root_anchor: bool) -> IfReading:
    """Read a handler's ``if`` as ``agent`` does, for a handler of ``event``.

    Claude Code evaluates ``if`` only when it is a non-empty string, and only on
    tool events (elsewhere the handler never runs: hookcage calls that an
    error); hookcage refuses a rule it cannot evaluate rather than run the
    handler on every call. CodeBuddy Code runs the handler on every call for an
    empty rule, a rule it cannot read and on events without a tool (a warning).
    """
    refused = " (a condition hookcage cannot evaluate: the hook is not run)"
    if agent == "codebuddy":
        every_call = "CodeBuddy Code runs the hook on every call, and so does hookcage"
        if not isinstance(value, str) or not value.strip():
            return IfReading(warning=f"not a non-empty string: no condition ({every_call})")
        if event not in TOOL_EVENTS:
            return IfReading(warning=f"{event} has no tool to compare: no condition ({every_call})")
        try:
            condition = parse_codebuddy_condition(value, root_anchor=root_anchor)
        except ConditionError as exc:
            return IfReading(error=f"{exc}{refused}")
        if condition is None:
            return IfReading(warning=f"not a rule CodeBuddy Code reads (Name or Name(spec), no ')' inside): {every_call}")
        return IfReading(condition)
    if value == "":
        return IfReading(warning="empty: no condition (the hook runs whenever its matcher matches, as Claude Code runs it)")
    if event not in TOOL_EVENTS:
        return IfReading(error=f"only evaluated on tool events ({', '.join(TOOL_EVENTS)}): Claude Code never runs a "
                         f"handler with 'if' on {event}")
    try:
        return IfReading(parse_condition(value, root_anchor=root_anchor))
    except ConditionError as exc:
        return IfReading(error=f"{exc}{refused}")
