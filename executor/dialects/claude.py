"""Claude Code: the canonical dialect (its files, its payload, its answers).

Files (code.claude.com/docs/en/settings, "Settings files" and "Hook
configuration"): managed ``/etc/claude-code/managed-settings.json`` plus the
drop-ins in ``managed-settings.d/*.json``; user ``~/.claude/settings.json``
(the directory moves with ``CLAUDE_CONFIG_DIR``); project
``.claude/settings.json``; local ``.claude/settings.local.json``. Hooks are
under ``"hooks"`` in Claude Code's shape, which is hookcage's own; the rest of
a settings file (permissions, env, ...) is not hookcage's and is ignored
without a warning. ``allowManagedHooksOnly`` is Claude Code's switch for its
own loader (``hookcage install`` sets it so that Claude Code stops running
repository hooks itself): hookcage does not apply it to the hooks it reads
from these files, which still pass trust and the allow-list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from executor.core.hooks import FileShape, HookFile, Scope, parse_hook_file
from executor.dialects.base import Dialect, HookSource, Where, home_path, project_sources

MANAGED_DIR = "/etc/claude-code"

# Keys of a Claude Code settings file that are not about hooks (hookcage reads only "hooks").
SETTINGS_KEYS = frozenset({"hooks", "disableAllHooks"})


def settings_hooks(data: Any) -> Any:
    """The hook part of an agent's settings file (the rest is the agent's own business)."""
    if not isinstance(data, dict):
        return data
    return {k: v for k, v in data.items() if k in SETTINGS_KEYS}


class ClaudeDialect(Dialect):
    """Claude Code (the canonical dialect: every default of :class:`Dialect`)."""

    name = "claude"
    title = "Claude Code"
    shape = FileShape(agent="claude")
    tool_names: Mapping[str, str] = {"Agent": "Task"}  # the subagent tool, renamed Agent in Claude Code 2.1
    settings_dir = ".claude"
    config_dir_var: str | None = "CLAUDE_CONFIG_DIR"
    managed_dir: str | None = MANAGED_DIR

    def sources(self, where: Where) -> list[HookSource]:
        files = []
        if self.managed_dir:
            files += [HookSource(Scope.MANAGED, f"{self.managed_dir}/managed-settings.json"),
                      HookSource(Scope.MANAGED, f"{self.managed_dir}/managed-settings.d/*.json", glob=True)]
        user_dir = home_path(where, env=self.config_dir_var) if self.config_dir_var and where.environ.get(
            self.config_dir_var) else home_path(where, self.settings_dir)
        files.append(HookSource(Scope.USER, f"{user_dir}/settings.json"))
        files += project_sources(where, (Scope.PROJECT, (self.settings_dir, "settings.json")),
                                 (Scope.LOCAL, (self.settings_dir, "settings.local.json")))
        return files

    def parse(self, data: Any, *, scope: Scope, source: str, project_root: str | None,
              environ: Mapping[str, str] | None = None) -> HookFile:
        return parse_hook_file(settings_hooks(data), scope=scope, source=source, project_root=project_root,
                               shape=self.shape)


DIALECT = ClaudeDialect()
