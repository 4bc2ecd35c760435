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
from executor.core.install import InstallMode, NotInstallable, Plan, Read
from executor.dialects.base import Where
from executor.dialects.claude import ClaudeDialect


class CodeBuddyDialect(ClaudeDialect):
    """CodeBuddy Code: Claude Code's dialect with ``modifiedInput``."""

    name = "codebuddy"
    title = "CodeBuddy Code"
    shape = FileShape(agent="codebuddy", conditions="codebuddy")
    """``if`` as CodeBuddy Code 2.163 reads it (its CLI's ``filterHooksByIfRule``, measured):
    :func:`executor.core.conditions.parse_codebuddy_condition`."""
    settings_dir = ".codebuddy"
    config_dir_var = None
    managed_dir = None
    project_dir_var = "CODEBUDDY_PROJECT_DIR"
    input_key = "modifiedInput"
    json_on_every_exit = False
    """Claude Code reads a hook's JSON on every exit code since mid-2026; nothing says CodeBuddy
    Code 2.163 does: its hooks' JSON is read on exit 0 only (the earlier rule)."""
    # Its IDE plugin's tools (AGENTS.md; the CLI itself uses Claude Code's names).
    tool_names: Mapping[str, str] = {"execute_command": "Bash", "read_file": "Read", "write_to_file": "Write",
                  "replace_in_file": "Edit", "search_files": "Grep", "list_files": "LS"}
    # CodeBuddy Code 2.163 adds these to every payload ({"client": "CLI", "version": "2.163.0",
    # "generation_id": "...", "model": "..."}); Claude Code sends none of them (only
    # SessionStart's model), Cursor's generation_id comes without client and version.
    recognised_by = ("client", "version", "generation_id")

    # -- hookcage install (Claude Code's, with these differences) -----------------------------
    binary = "codebuddy"
    routed_events = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Notification",
                     "SubagentStop", "Stop", "PreCompact", "SessionEnd")
    """The events CodeBuddy Code 2.163 fires (Claude Code's names; AGENTS.md)."""
    passthrough = ("config", "mcp", "sandbox", "plugin", "project", "doctor", "update", "install", "cleanup",
                   "daemon", "ps", "logs", "attach", "kill", "stop", "rm", "respawn", "agents", "auto-mode")
    """Its subcommands (``codebuddy --help``, 2.163.0): their own subcommands refuse
    ``--setting-sources`` given before them (``codebuddy --setting-sources user mcp list``:
    "unknown option"), so the wrapper runs them as they are."""
    wrapper_env: Mapping[str, str] = {"CODEBUDDY_DISABLE_CUSTOM_MODELS_FILE": "1"}
    """Without it CodeBuddy reads a repository's ``.codebuddy/models.json`` (models with their
    endpoints and keys) even under ``--setting-sources user``; it also skips the user's own
    ``~/.codebuddy/models.json`` (set it to 0 to read both)."""

    def install(self, mode: InstallMode, where: Where, read: Read, hookcage: str) -> Plan:
        if mode == "managed":
            raise NotInstallable(
                "CodeBuddy Code has no managed settings file: its policy settings live in the process "
                "(set by its host, never read from disk; CodeBuddy Code 2.163), so there is no machine-wide "
                "switch that stops it loading a repository's .codebuddy hooks. `hookcage install codebuddy "
                "--user` takes it over for your user: a wrapper runs codebuddy with --setting-sources user "
                "and hookcage's routes.", self.install_user(where, read, hookcage))
        return self.install_user(where, read, hookcage)


DIALECT = CodeBuddyDialect()
