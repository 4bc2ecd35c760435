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

import shlex
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from executor.core.events import EVENTS, EventSpec
from executor.core.hookparse import parse_hook_file
from executor.core.hooks import FileShape, HookFile, Scope
from executor.core.install import (
    NEVER_ROUTED,
    FileEdit,
    InstallMode,
    NotInstallable,
    Plan,
    Read,
    dispatch_command,
    json_bytes,
    merge_routes,
    read_json,
    routes,
)
from executor.core.protocol import HookOutcome, HookRun
from executor.core.text import decode, sanitize
from executor.dialects.base import Dialect, HookSource, Where, home_path, project_sources

MANAGED_DIR = "/etc/claude-code"

# Keys of a Claude Code settings file that are not about hooks (hookcage reads only "hooks").
SETTINGS_KEYS = frozenset({"hooks", "disableAllHooks"})


def settings_hooks(data: Any) -> Any:
    """The hook part of an agent's settings file (the rest is the agent's own business)."""
    if not isinstance(data, dict):
        return data
    return {k: v for k, v in data.items() if k in SETTINGS_KEYS}


WRAPPER_MARK = "hookcage-wrapper"
"""In the head of every wrapper ``hookcage install`` writes: a wrapper looking for the real
agent on PATH skips files that carry it (itself, and another hookcage wrapper)."""
MANAGED_DROP_IN = "managed-settings.d/50-hookcage.json"


def hookcage_home(where: Where) -> str:
    """hookcage's home as the edge hands it in (``HOOKCAGE_HOME``), else its default."""
    return where.environ.get("HOOKCAGE_HOME") or f"{where.home.rstrip('/')}/.config/hookcage"


def is_wrapper(content: bytes | None) -> bool:
    """The file is a wrapper hookcage wrote."""
    return content is not None and content.startswith(b"#!") and WRAPPER_MARK.encode() in content[:512]


def wrapper_script(*, binary: str, title: str, settings: str, fallback: str | None,
                   passthrough: tuple[str, ...] = (), env: Mapping[str, str] | None = None) -> bytes:
    """A POSIX sh wrapper: finds the real ``binary`` later on PATH (skipping hookcage's wrappers,
    this one included; else ``fallback``, found at install time) and runs it with
    ``--setting-sources user --settings SETTINGS`` before the user's arguments.

    ``passthrough``: subcommands that take no such options (run as they are); ``env``:
    variables set unless the user set them.
    """
    q = shlex.quote
    lines = [
        "#!/bin/sh",
        f"# {WRAPPER_MARK}: {title} through hookcage. Written by `hookcage install {binary} --user`;",
        f"# `hookcage uninstall {binary}` removes it. It runs the real {binary} (the next one on PATH)",
        "# with --setting-sources user, so no repository's settings are loaded (their hooks, env,",
        "# MCP servers), and --settings with hookcage's routes: every event goes to hookcage dispatch.",
    ]
    for name, value in (env or {}).items():
        lines.append(f': "${{{name}:={value}}}"; export {name}')
    lines += [
        "real=",
        # The current directory is the repository being worked on: nothing in it is the agent
        # (unless it holds $HOME, an agent started in ~, and the file is under $HOME).
        "here=$(pwd -P 2>/dev/null) || here=",
        "in_here() {",
        '  for top in "$PWD" "$here"; do',
        '    case $top in ""|/) continue ;; esac',
        '    case $1 in "$top"/*) ;; *) continue ;; esac',
        '    case ${HOME:-/}/ in "$top"/*) case $1 in "${HOME%/}"/*) continue ;; esac ;; esac',
        "    return 0",
        "  done",
        "  return 1",
        "}",
        # Absolute entries only: an empty or relative entry ("." or "bin") would let the
        # repository being worked on supply its own "claude". No globbing of the entries.
        "saved_ifs=$IFS; IFS=:; set -f",
        "for dir in $PATH; do",
        '  case $dir in /*) ;; *) continue ;; esac',
        '  in_here "$dir/" && continue',
        '  phys=$(cd "$dir" 2>/dev/null && pwd -P) || continue',
        '  in_here "$phys/" && continue',
        f'  candidate="$dir/{binary}"',
        '  [ -f "$candidate" ] && [ -x "$candidate" ] || continue',
        f'  head -c 512 "$candidate" 2>/dev/null | grep -q {WRAPPER_MARK} && continue',
        '  real=$candidate; break',
        "done",
        "IFS=$saved_ifs; set +f",
    ]
    if fallback:
        # Recorded at install time (absolute, never in the directory install ran in); checked
        # again here against the directory this run is in.
        lines += [
            f"fallback={q(fallback)}",
            'if [ -z "$real" ]; then',
            '  case $fallback in /*) in_here "$fallback" || real=$fallback ;; esac',
            "fi",
        ]
    lines += [
        'if [ -z "$real" ] || [ ! -x "$real" ]; then',
        f'  echo "hookcage: no {binary} found on PATH after this wrapper ($0); '
        f'hookcage uninstall {binary} removes it" >&2',
        "  exit 127",
        "fi",
    ]
    if passthrough:
        lines += [
            'case "${1-}" in',
            f'  {"|".join(passthrough)}) exec "$real" "$@" ;;',
            "esac",
        ]
    lines.append(f'exec "$real" --setting-sources user --settings {q(settings)} "$@"')
    return ("\n".join(lines) + "\n").encode()


class ClaudeDialect(Dialect):
    """Claude Code (the canonical dialect: every default of :class:`Dialect`)."""

    name = "claude"
    title = "Claude Code"
    shape = FileShape(agent="claude", conditions="claude")  # `if`: executor.core.conditions
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

    # -- answers -------------------------------------------------------------------------

    json_on_every_exit: bool = True
    """Claude Code's hooks reference ("Exit code output", code.claude.com/docs/en/hooks; the
    wording of the page since 2026-08-31, quoted in gabriel-dehan/claude_hooks issue #63 and in
    later copies): stdout "starts with ``{`` and ends with ``}``" is JSON, else plain text; on
    "any other exit code" (1, 3, ...) "with a parsed object that passes schema validation ...
    Claude Code ignores the exit code and the JSON alone decides the outcome"; on exit 2
    "Claude Code still reads any valid JSON output on stdout" and "The blocking message is the
    reason from your JSON's blocking decision when it makes one, and your stderr text
    otherwise". ``False`` keeps the earlier rule (JSON read on exit 0 only)."""

    def parse_answer(self, spec: EventSpec, run: HookRun) -> HookOutcome:
        text = decode(run.stdout).strip()
        if not self.json_on_every_exit or not run.finished or not text.startswith("{") \
                or spec.errors_fail or spec.answers_path:
            return super().parse_answer(spec, run)
        if run.stdout_truncated:
            # Cut at hookcage's cap: the agent would have read the whole document (and maybe a
            # decision at its end), so it is not plain text: reported as a cut answer, as before.
            return super().parse_answer(spec, run)
        if not text.endswith("}"):
            # "Starts with { but doesn't end with }: Claude Code treats it as plain text."
            base = super().parse_answer(spec, replace(run, stdout=b""))
            plain = sanitize(run.stdout).strip()
            if run.exit_code == 0 and plain and spec.plain_text_context:
                return replace(base, additional_context=plain)
            return base
        if run.exit_code == 0:
            return super().parse_answer(spec, run)
        read = super().parse_answer(spec, replace(run, exit_code=0))
        valid = read.status != "error" and not read.notes  # "passes schema validation"
        if run.exit_code != 2:
            return replace(read, exit_code=run.exit_code) if valid else super().parse_answer(spec, run)
        blocked = super().parse_answer(spec, run)
        if not valid or blocked.status != "block":
            return blocked  # schema-invalid JSON still blocks, on stderr; the shell's own exit 2 stays a failure
        said = read.reason if read.status == "block" or read.decision == "deny" else None
        return replace(read, status="block", exit_code=2, reason=said or blocked.reason,
                       decision="deny" if read.decision == "deny" else None, updated_input=None)

    # -- hookcage install -----------------------------------------------------------------

    binary: str = "claude"
    routed_events: tuple[str, ...] = tuple(e for e in EVENTS if e not in NEVER_ROUTED)
    """Every event Claude Code fires but the routing traps."""
    passthrough: tuple[str, ...] = ()
    """Subcommands the wrapper runs without its options (none: Claude Code 2.1.330 takes
    ``--setting-sources``/``--settings`` before ``mcp list``, ``--version``, ``doctor``...)."""
    wrapper_env: Mapping[str, str] = {}

    def route_settings(self, read: Read, path: str, hookcage: str) -> dict[str, Any]:
        """The settings at ``path`` with hookcage's routes for every routed event."""
        new = routes(self.routed_events, dispatch_command(hookcage, self.name),
                     matcher_events=[e for e in self.routed_events if EVENTS[e].matcher_field])
        return merge_routes(read_json(read, path), new)

    def install(self, mode: InstallMode, where: Where, read: Read, hookcage: str) -> Plan:
        """``user``: a settings file of routes and a wrapper that runs the agent with
        ``--setting-sources user --settings FILE``; ``managed``: the managed drop-in with
        ``allowManagedHooksOnly`` and the routes (see docs/install.md)."""
        if mode == "managed":
            return self.install_managed(where, read, hookcage)
        return self.install_user(where, read, hookcage)

    def install_managed(self, where: Where, read: Read, hookcage: str) -> Plan:
        if not self.managed_dir:
            raise NotInstallable(f"{self.title} has no managed settings file to write", None)
        path = f"{self.managed_dir}/{MANAGED_DROP_IN}"
        data = self.route_settings(read, path, hookcage)
        data = {"allowManagedHooksOnly": True, **{k: v for k, v in data.items() if k != "allowManagedHooksOnly"}}
        raw = read(path)
        content = raw if raw is not None and read_json(read, path) == data else json_bytes(data)
        return Plan(self.name, "managed", (FileEdit(path, content, why=(
            f"{self.title}'s managed drop-in: only managed hooks run (allowManagedHooksOnly), "
            "every event routed to hookcage")),), (
            f"{self.title} reads managed settings when it starts: restart running sessions",
            "still outside hookcage: a repository's env, apiKeyHelper and .mcp.json; a server-managed "
            "or MDM policy, or a later managed-settings.d file, outranks this one (hookcage doctor checks "
            "the files)",
        ))

    def install_user(self, where: Where, read: Read, hookcage: str) -> Plan:
        settings = f"{hookcage_home(where)}/agents/{self.name}-settings.json"
        data = self.route_settings(read, settings, hookcage)
        raw = read(settings)
        content = raw if raw is not None and read_json(read, settings) == data else json_bytes(data)
        # Absolute entries only ("." or "bin" would be the directory install runs in; the edge
        # also drops entries inside it): the fallback is never the repository's own binary.
        path_dirs = [d for d in where.environ.get("PATH", "").split(":") if d.startswith("/")]
        local_bin = f"{where.home.rstrip('/')}/.local/bin"
        wrapper_dir = local_bin
        occupied = read(f"{local_bin}/{self.binary}")
        if occupied is not None and not is_wrapper(occupied):
            # The native installer's claude lives there (and its updater rewrites it).
            wrapper_dir = f"{hookcage_home(where)}/bin"
        wrapper = f"{wrapper_dir}/{self.binary}"
        found = [f"{d.rstrip('/')}/{self.binary}" for d in path_dirs]
        real = next((p for p in found if p != wrapper and (c := read(p)) is not None and not is_wrapper(c)), None)
        script = wrapper_script(binary=self.binary, title=self.title, settings=settings, fallback=real,
                                passthrough=self.passthrough, env=self.wrapper_env)
        notes = []
        position = path_dirs.index(wrapper_dir) if wrapper_dir in path_dirs else None
        ahead = position is not None and (real is None or position < found.index(real))
        if not ahead:
            notes.append(f"put {wrapper_dir} ahead of {real.rsplit('/', 1)[0] if real else 'the real one'} "
                         f'on PATH (e.g. export PATH="{wrapper_dir}:$PATH" in ~/.bashrc): until then plain '
                         f"`{self.binary}` runs repositories' hooks itself (hookcage doctor checks it)")
        if real is None:
            notes.append(f"no {self.binary} found on PATH: the wrapper runs the first one after it once installed")
        notes.append(f"still outside hookcage: a {self.binary} started another way (an IDE, an absolute path) "
                     "skips the wrapper and runs a repository's hooks itself")
        return Plan(self.name, "user", (
            FileEdit(settings, content, why=f"hookcage's routes for {self.title}: every event to hookcage dispatch"),
            FileEdit(wrapper, script, 0o755, why=(
                f"runs the real {self.binary} with --setting-sources user --settings {settings}")),
        ), tuple(notes))


DIALECT = ClaudeDialect()
