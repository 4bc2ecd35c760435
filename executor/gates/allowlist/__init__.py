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

The package, by job: :mod:`.gate` (the entry points), :mod:`.walk` (the parse
tree, walked into simple commands), :mod:`.words` (a word's literal value),
:mod:`.entries` (allow and deny entries, and matching them), :mod:`.running`
(commands that run other commands) and :mod:`.programs` (the catalogue of
which programs do).
"""

from __future__ import annotations

from executor.gates.allowlist import programs
from executor.gates.allowlist.entries import AllowList
from executor.gates.allowlist.gate import AllowCheck, check_command, literal_words
from executor.gates.allowlist.running import entry_warning
from executor.gates.allowlist.walk import MAX_COMMAND_BYTES, MAX_NESTING, MAX_NODES

__all__ = [
    "MAX_COMMAND_BYTES",
    "MAX_NESTING",
    "MAX_NODES",
    "AllowCheck",
    "AllowList",
    "check_command",
    "entry_warning",
    "literal_words",
    "programs",
]
