"""Matchers: does a hook's ``matcher`` select this event's payload? (pure)

The rules (Claude Code's, extended with tool-name aliases across agents):

* ``None``, ``""`` and ``"*"`` match everything.
* A matcher made only of letters, digits, ``_``, ``-``, space, ``,`` and ``|``
  is an exact name or a list of names split on ``|`` and ``,``.
* Anything else is a regular expression, searched (unanchored), by RE2
  (:mod:`executor.core.linre`): time linear in the name searched, whatever the
  pattern, so no matcher can stall a dispatch. RE2 is Python's syntax without
  what needs backtracking: backreferences and lookaround are refused.
* An invalid regular expression (for RE2) never fires; :func:`compile_matcher`
  reports it so the config loader can say where it is.

Tool events match ``tool_name``; the name and every alias of it (``Bash``,
``execute_command``, ``run_shell_command``, ...) are tried, so a hook written
for one agent fires for the same tool in another. The aliases are each
agent's own knowledge (``Dialect.tool_names``): they are handed in
(:data:`Aliases`), never kept here.

Two events read their matcher differently (:attr:`EventSpec.matcher_style
<executor.core.events.EventSpec.matcher_style>`), as Claude Code's hooks
reference says (code.claude.com/docs/en/hooks, "Matcher patterns" and
"FileChanged"):

* StopFailure (``narrow``): only letters, digits, ``_`` and ``|`` make an
  exact name or a list split on ``|``; a hyphen, space or comma puts the
  matcher on the regular-expression path.
* FileChanged (``filenames``): the matcher is the list of files to watch.
  Each ``|``-separated part is a literal file name compared with the
  changed file's basename (``file_path``'s last component), and the whole
  matcher is also read by the ``narrow`` rule against that basename (the
  filter Claude Code applies to every watched file, including the ones a
  hook added with ``watchPaths``). ``.envrc|.env`` fires for ``/p/.envrc``
  and ``/p/.env``; ``^\\.env`` for any basename starting with ``.env``.

:func:`compile_matcher` compiles by the usual rule (the config loader does
not know which rule an event wants); :func:`event_matches` compiles again by
the event's own rule when it differs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from executor.core import linre
from executor.core.events import EventSpec, MatcherStyle

Aliases = Callable[[str], tuple[str, ...]]
"""A tool name -> the name and every other agent's name for the same tool (canonical first).

The table is built from each agent's dialect (``Dialect.tool_names``, see
:func:`executor.dialects.tool_aliases`) and handed in where hooks are matched;
without it a tool name matches only itself.
"""


def no_aliases(name: str) -> tuple[str, ...]:
    """The :data:`Aliases` without a table: a tool name matches only itself."""
    return (name,)


_SIMPLE = re.compile(r"[A-Za-z0-9_\- ,|]*")
_NARROW = re.compile(r"[A-Za-z0-9_|]*")
_PATH_SEPARATORS = re.compile(r"[/\\]")




@dataclass(frozen=True)
class Matcher:
    """A compiled matcher. ``error`` is set (and nothing matches) for a bad regex.

    Attributes:
        source: the matcher as written.
        names: exact names, when it is a name or a list of names.
        pattern: the regular expression, when it is one.
        error: why the regular expression is invalid.
        literals: literal file names that match besides the rule (FileChanged).
        style: the rule :func:`compile_matcher` read it by; ``None`` for a
            matcher compiled some other way, which is used as it is.
    """

    source: str | None
    names: frozenset[str] | None = None
    pattern: linre.LinearPattern | None = None
    error: str | None = None
    literals: frozenset[str] = frozenset()
    style: MatcherStyle | None = None

    @property
    def matches_all(self) -> bool:
        """True for ``None``, ``""`` and ``"*"``."""
        return self.names is None and self.pattern is None and self.error is None

    def matches(self, value: str | None, *, tool: bool = False, aliases: Aliases = no_aliases) -> bool:
        """Test one payload value (``None`` when the field is absent).

        Args:
            value: the payload field the event matches on.
            tool: the value is a tool name, so its ``aliases`` count.
            aliases: every agent's names for a tool (:data:`Aliases`).
        """
        if self.error is not None:
            return False
        if self.matches_all:
            return True
        if value is None:
            return False
        if value in self.literals:
            return True
        candidates = aliases(value) if tool else (value,)
        if self.names is not None:
            return any(c in self.names for c in candidates)
        assert self.pattern is not None
        return any(self.pattern.search(c) for c in candidates)


def compile_matcher(source: str | None, style: MatcherStyle = "names") -> Matcher:
    """Compile a matcher string by the rules in this module's docstring.

    Args:
        source: the matcher as written (``None`` when absent).
        style: the rule to read it by: ``names`` (most events), ``narrow``
            (StopFailure) or ``filenames`` (FileChanged).
    """
    if source is None or source.strip() in ("", "*"):
        return Matcher(source, style=style)
    literals: frozenset[str] = frozenset()
    if style == "filenames":
        literals = frozenset(source.split("|")) - {""}
    if style == "names" and _SIMPLE.fullmatch(source):
        names = {part.strip() for part in re.split(r"[|,]", source)} - {""}
        return Matcher(source, names=frozenset(names), style=style)
    if style != "names" and _NARROW.fullmatch(source):
        return Matcher(source, names=frozenset(source.split("|")) - {""}, literals=literals, style=style)
    try:
        return Matcher(source, pattern=linre.compile(source), literals=literals, style=style)
    except linre.PatternError as exc:
        return Matcher(source, error=f"invalid regular expression {source!r}: {exc}", style=style)


@lru_cache(maxsize=1024)
def _compile_as(source: str | None, style: MatcherStyle) -> Matcher:
    return compile_matcher(source, style)


def basename(path: str) -> str:
    """The last component of a path (``/`` or ``\\`` separated; a trailing separator ignored)."""
    parts = [p for p in _PATH_SEPARATORS.split(path) if p]
    return parts[-1] if parts else path


def event_matches(
    event: EventSpec, matcher: Matcher, payload: Mapping[str, Any], aliases: Aliases = no_aliases
) -> bool:
    """Does ``matcher`` select this payload for ``event``? (``aliases``: every agent's names for a tool)

    Events without a matcher field ignore the matcher (even an invalid one
    does not stop them: Claude Code ignores it there too). A matcher
    compiled by the usual rule is read again by the event's own rule when
    that differs (StopFailure, FileChanged); FileChanged tests the basename
    of ``file_path``.
    """
    if event.matcher_field is None:
        return True
    if matcher.style is not None and matcher.style != event.matcher_style:
        matcher = _compile_as(matcher.source, event.matcher_style)
    value = payload.get(event.matcher_field)
    if not isinstance(value, str):
        return matcher.matches(None)
    if event.matcher_style == "filenames":
        value = basename(value)
    return matcher.matches(value, tool=event.matcher_field == "tool_name", aliases=aliases)
