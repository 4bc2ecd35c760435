"""Environment variable names hookcage sets or reads, defined once (stdlib only, no imports).

The stdlib-only client (:mod:`executor.service.client`) imports this module
too, so it must stay free of imports.
"""

PROJECT_DIR_VARS: tuple[str, ...] = (
    "CLAUDE_PROJECT_DIR", "HOOKCAGE_PROJECT_DIR", "CODEBUDDY_PROJECT_DIR", "GEMINI_PROJECT_DIR", "CURSOR_PROJECT_DIR",
)
"""The project-root variables: the first one set names the root; every hook gets them all.

Each agent's dialect names the one its hooks read (``Dialect.project_dir_var``);
a test checks each is here.
"""

AGENT_CONFIG_VARS: tuple[str, ...] = (
    "HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "CODEX_HOME", "INFER_HOOKS_ENABLED", "COPILOT_HOME",
)
"""What the dialects read to find an agent's files (``Where.environ``): the daemon is
handed the caller's, so it reads the same files as an in-process dispatch. A test
checks no dialect reads another variable."""

AGENT_DIR_VARS: tuple[str, ...] = ("HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "CODEX_HOME", "COPILOT_HOME")
"""The :data:`AGENT_CONFIG_VARS` that name directories: a relative one is taken against the
project root, where the agent runs and resolves it."""

IN_HOOK_VAR = "HOOKCAGE_IN_HOOK"
"""Set in every hook's environment: a ``hookcage dispatch`` that sees it answers
at once without running anything (no configuration can make hookcage call itself)."""

DAEMON_OFF_WORDS = ("off", "0", "false", "no", "never")
"""What ``HOOKCAGE_DAEMON`` and the setting ``daemon`` take for ``off`` (the self-start never starts one)."""
DAEMON_ON_WORDS = ("auto", "on", "1", "true", "yes")
"""What they take for ``auto`` (an event that finds no daemon starts one)."""
