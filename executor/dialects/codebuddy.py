"""CodeBuddy Code (Tencent's CLI): Claude Code's files and payload under ``.codebuddy``.

Files: ``~/.codebuddy/settings.json`` (user), ``.codebuddy/settings.json``
(project), ``.codebuddy/settings.local.json`` (local), Claude Code's shape.
Payload: Claude Code's plus ``client``, ``version``, ``model`` and
``generation_id`` (measured with CodeBuddy Code 2.163's ``-p``), which is how
it is recognised without ``--agent``. Answers: Claude Code's, with the
PreToolUse input rewrite spelled ``modifiedInput`` (both spellings are read
from hooks). Its IDE plugin's tool names (``execute_command``,
``write_to_file``, ``replace_in_file``, ``read_file``, ``delete_files``) meet
Claude Code's through the tool aliases.
"""

from __future__ import annotations

from collections.abc import Mapping

from executor.core.hooks import FileShape
from executor.dialects.claude import ClaudeDialect


class CodeBuddyDialect(ClaudeDialect):
    """CodeBuddy Code: Claude Code's dialect with ``modifiedInput``."""

    name = "codebuddy"
    title = "CodeBuddy Code"
    shape = FileShape(agent="codebuddy")
    settings_dir = ".codebuddy"
    config_dir_var = None
    managed_dir = None
    project_dir_var = "CODEBUDDY_PROJECT_DIR"
    input_key = "modifiedInput"
    # Its IDE plugin's tools (AGENTS.md; the CLI itself uses Claude Code's names).
    tool_names: Mapping[str, str] = {"execute_command": "Bash", "read_file": "Read", "write_to_file": "Write",
                  "replace_in_file": "Edit", "search_files": "Grep", "list_files": "LS"}
    # CodeBuddy Code 2.163 adds these to every payload ({"client": "CLI", "version": "2.163.0",
    # "generation_id": "...", "model": "..."}); Claude Code sends none of them (only
    # SessionStart's model), Cursor's generation_id comes without client and version.
    recognised_by = ("client", "version", "generation_id")


DIALECT = CodeBuddyDialect()
