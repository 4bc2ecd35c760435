"""Hook specs: what a hook is, and one handler validated (pure, no I/O).

:class:`HookSpec` is one handler of one hook file, :class:`HookFile` a parsed
file and :class:`Problem` one thing wrong in it, naming the file and the JSON
path. :func:`parse_handler` validates one handler (Claude Code's keys, its
``env``, ``sandbox`` and ``if``) into a spec: a handler with an error is kept
(so it can be listed and logged as ``invalid``) but never runs.
:class:`FileShape` says how an agent's file differs from hookcage's own. A
whole file is walked by :func:`executor.core.hookparse.parse_hook_file`; the
environment names a repository's hook may not set are in
:mod:`executor.core.protected_env`.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal

from executor.core.conditions import Condition, read_if
from executor.core.events import EVENTS, EventSpec
from executor.core.matchers import Matcher, compile_matcher
from executor.core.options import SandboxOptions
from executor.core.protected_env import protected_env_name

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 24 * 3600.0


class Scope(StrEnum):
    """Where a hook file lives; earlier scopes come first in config order."""

    MANAGED = "managed"
    USER = "user"
    PROJECT = "project"
    LOCAL = "local"

    @property
    def from_repository(self) -> bool:
        """Project and local hooks come with the repository: not the user's own."""
        return self in (Scope.PROJECT, Scope.LOCAL)


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or doubtful) in a hook file."""

    source: str
    path: str
    message: str
    severity: Literal["error", "warning"] = "error"
    event: str | None = None
    agent: str = ""

    def __str__(self) -> str:
        prefix = "warning: " if self.severity == "warning" else ""
        who = f"{self.agent} hook file " if self.agent else ""
        return f"{prefix}{who}{self.source}: {self.path}: {self.message}"


@dataclass(frozen=True)
class HookSpec:
    """One handler of one hook file, with where it came from.

    ``invalid`` holds the first error of this handler (it never runs then);
    ``matcher`` is compiled once here.
    """

    event: str
    matcher: Matcher
    type: str
    command: str | None
    scope: Scope
    source: str
    json_path: str
    timeout: float = DEFAULT_TIMEOUT
    is_async: bool = False
    once: bool = False
    name: str | None = None
    enabled: bool = True
    on_error: Literal["allow", "deny"] = "allow"
    sandbox: SandboxOptions = field(default_factory=SandboxOptions)
    env: tuple[tuple[str, str], ...] = ()
    capabilities: frozenset[str] = frozenset()
    invalid: str | None = None
    agent: str = ""
    """The agent whose file it comes from (its dialect); "" for hookcage's own files."""
    selectors: tuple[tuple[str, Matcher], ...] = ()
    """Further payload fields that must match (dotted paths, e.g. ``tool_input.file_path``)."""
    condition: Condition | None = None
    """Its ``if`` rule (:mod:`executor.core.conditions`), in the files of agents that read one."""

    @property
    def id(self) -> str:
        """A short stable id: the same handler in the same file keeps it."""
        return "h" + _digest([self.scope.value, self.source, self.event, *self.identity()])[:11]

    def identity(self) -> list[Any]:
        """What makes two handlers "the same hook" (run once when repeated).

        An agent's hook reads that agent's payload and answers in its dialect, so
        the agent is part of it; hookcage's own hooks keep the identity (and the
        ids) they had before agents' files were read.
        """
        base = [self.type, self.command, _options_json(self.sandbox), list(self.env)]
        ident = [*base, self.agent] if self.agent else base
        # Only when set: hooks without `if` keep their ids.
        return [*ident, {"if": self.condition.source}] if self.condition is not None else ident

    @property
    def label(self) -> str:
        """How people see this hook in messages: its name or its command."""
        return self.name or self.command or f"<{self.type} hook>"


@dataclass(frozen=True)
class HookFile:
    """A parsed hook file.

    ``routes`` are the JSON paths of entries that call ``hookcage dispatch``:
    hookcage's own routing, never hooks (:func:`is_self_route`).
    """

    source: str
    scope: Scope
    hooks: tuple[HookSpec, ...] = ()
    problems: tuple[Problem, ...] = ()
    disable_all: bool = False
    managed_only: bool = False
    agent: str = ""
    routes: tuple[str, ...] = ()
    disable_reason: str = ""
    """What switched the file's hooks off when ``disable_all`` (default: disableAllHooks)."""

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The problems that stop something from running."""
        return tuple(p for p in self.problems if p.severity == "error")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _options_json(options: SandboxOptions) -> dict[str, Any]:
    data: dict[str, Any] = {
        "backend": options.backend, "image": options.image, "workspace": options.workspace,
        "network": options.network, "mounts": list(options.mounts), "memory": options.memory,
        "cpus": options.cpus, "pids": options.pids,
    }
    if options.home != "tmp":  # only when asked: existing hooks keep their ids
        data["home"] = options.home
    return data


_HANDLER_KEYS = {"type", "command", "timeout", "async", "once", "name", "enabled", "on_error",
                 "sandbox", "env", "capabilities"}
CAPABILITY_NAMES = ("approve", "rewrite_input", "rewrite_output", "env_file")
# Keys other agents put in handlers that hookcage reads but does not act on.
_IGNORED_KEYS = {"statusMessage", "shell", "description"}
# What a hook's sandbox table may set (the docker backend's options, and the backend).
SANDBOX_KEYS = {"image", "workspace", "network", "mounts", "memory", "cpus", "pids", "env",
                "backend", "home"}
HOME_MODES = ("tmp", "persistent")
_FORBIDDEN_SANDBOX_KEYS = {
    "privileged", "cap_add", "capabilities", "caps", "devices", "device", "pid", "pid_mode",
    "ipc", "ipc_mode", "uts", "userns", "userns_mode", "security_opt", "volumes", "binds",
    "runtime", "user", "cgroup_parent", "sysctls",
}
_HOST_NAMESPACE_NETWORKS = re.compile(r"^(host|container:.*)$")
DOCKER_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/docker")
# \Z, not $: "$" also matches before a trailing newline ("FOO\n", "512m\n").
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_MEMORY = re.compile(r"^[1-9][0-9]*[bkmgBKMG]?\Z")


class Collector:
    """Gathers problems while walking one file (of one agent)."""

    def __init__(self, source: str, agent: str = "") -> None:
        self.source = source
        self.agent = agent
        self.problems: list[Problem] = []
        self.routes: list[str] = []

    def error(self, path: str, message: str, event: str | None = None) -> str:
        self.problems.append(Problem(self.source, path, message, "error", event, self.agent))
        return message

    def warn(self, path: str, message: str, event: str | None = None) -> None:
        self.problems.append(Problem(self.source, path, message, "warning", event, self.agent))


@dataclass(frozen=True)
class FileShape:
    """How one agent's Claude-Code-shaped hook file differs from hookcage's own.

    Attributes:
        agent: the agent ("" for hookcage's own files).
        event_names: the agent's event names -> canonical names, or the name of
            one of its ``own_events`` (an event not listed is looked up in the
            catalog as it is).
        own_events: the agent's events with no canonical twin, carried under
            their own name (only that agent's hooks match them).
        timeout_scale: seconds per unit of ``timeout`` (0.001 for agents that
            count milliseconds).
        default_timeout: the agent's default, in seconds.
        compile: how the agent's ``matcher`` strings are compiled.
        ignored_keys: handler keys the agent reads that hookcage does not act on.
        conditions: how the agent reads a handler's ``if`` (a permission rule,
            :mod:`executor.core.conditions`): ``"claude"`` as Claude Code,
            ``"codebuddy"`` as CodeBuddy Code; ``""``: it does not, so it runs
            the handler whatever its ``if`` says, and so does hookcage.
    """

    agent: str = ""
    event_names: Mapping[str, str] = field(default_factory=dict)
    own_events: Mapping[str, EventSpec] = field(default_factory=dict)
    timeout_scale: float = 1.0
    default_timeout: float = DEFAULT_TIMEOUT
    compile: Any = compile_matcher
    ignored_keys: frozenset[str] = frozenset()
    canonical_names: bool = True
    """The agent's files may also name events canonically (Claude-Code-like agents)."""
    conditions: Literal["", "claude", "codebuddy"] = ""

    def event(self, name: str) -> str | None:
        """The name hooks of ``name`` are filed under (canonical, or the agent's own), or None."""
        if name in self.own_events:
            return name
        canonical = self.event_names.get(name, name if self.canonical_names else None)
        return canonical if canonical in EVENTS or canonical in self.own_events else None

    def spec(self, name: str) -> EventSpec:
        """The event spec of a name :meth:`event` returned."""
        return self.own_events.get(name) or EVENTS[name]

    def event_list(self) -> str:
        """The event names this agent's files may use, for messages."""
        names = [*self.event_names, *self.own_events]
        if self.canonical_names:
            names += [n for n in EVENTS if n not in names]
        return ", ".join(names)


HOOKCAGE_FILES = FileShape(conditions="claude")
"""hookcage's own files: the canonical catalog, seconds, Claude Code's matchers."""

# hookcage's route, exactly as `hookcage install` writes it (executor.core.install.dispatch_command):
# the program, " dispatch", and optionally " --agent NAME"; spaces or tabs between the words.
_ROUTE = re.compile(r"[ \t]*(?P<program>\S.*?)[ \t]+dispatch(?:[ \t]+--agent[ \t]+[A-Za-z0-9][A-Za-z0-9_-]*)?[ \t]*",
                    re.DOTALL)
MAX_ROUTE = 4096
"""A route is one short line; a longer command is a hook."""


def is_self_route(command: str, *, absolute: bool = True) -> bool:
    """Is this command exactly hookcage's route? Then it is hookcage's routing, never a hook.

    A route is the whole command ``hookcage dispatch`` or ``/abs/path/to/hookcage dispatch``
    (the path quoted as :func:`shlex.quote` quotes it, as ``hookcage install`` writes it),
    optionally followed by ``--agent NAME``, and nothing else: no other word, no ``;``, ``|``,
    ``&&``, ``#``, ``$(...)``, redirection or second line. Anything else that merely mentions
    ``hookcage dispatch`` (``curl ... | sh # hookcage dispatch``) is a hook, shown in the review
    and gated like any other: an agent that runs its files itself would run it.

    Args:
        absolute: also an absolute path to a program called ``hookcage``. Not in a repository's
            files: ``/proc/self/cwd/hookcage`` or a guessed checkout path would name the
            repository's own program (``install`` writes routes into your files, not theirs).
    """
    if len(command) > MAX_ROUTE or any(c in command for c in "\n\r\0"):
        return False
    match = _ROUTE.fullmatch(command)
    if match is None:
        return False
    written = match.group("program")
    try:
        words = shlex.split(written)
    except ValueError:
        return False
    if len(words) != 1 or shlex.quote(words[0]) != written:
        return False  # quoted otherwise than shlex.quote would: "$(...)", backslashes, two words
    program = words[0]
    return program == "hookcage" or (absolute and program.startswith("/") and posixpath.basename(program) == "hookcage")


def parse_handler(
    raw: Any, path: str, event: str, matcher: Matcher, scope: Scope, root: str | None,
    out: Collector, *, shape: FileShape = HOOKCAGE_FILES, keys: Mapping[str, str] | None = None,
) -> HookSpec | None:
    """Validate one handler (Claude Code's keys) into a :class:`HookSpec`.

    Args:
        raw: the handler object; agents with other spellings map theirs to
            Claude Code's before calling (``keys`` maps back, for messages).
        keys: hookcage's key -> the key the file really has, so an error names
            the key the author wrote (``timeoutSec``, ``bash``...).

    Returns:
        The spec, or None for an entry that routes to ``hookcage dispatch``
        (hookcage's own route: recorded in ``out.routes``, never a hook).
    """
    base = HookSpec(event, matcher, "command", None, scope, out.source, path, agent=shape.agent,
                    timeout=shape.default_timeout)
    if (isinstance(raw, dict) and isinstance(raw.get("command"), str) and "env" not in raw  # PATH=./bin
            and is_self_route(raw["command"], absolute=not scope.from_repository)):
        out.routes.append(path)
        return None
    keys = keys or {}
    if not isinstance(raw, dict):
        return replace(base, invalid=out.error(path, "a hook handler must be an object", event))
    errors: list[str] = []

    def err(key: str, message: str) -> None:
        key = keys.get(key, key)
        errors.append(out.error(f"{path}.{key}" if key else path, message, event))

    hook_type = raw.get("type")
    if not isinstance(hook_type, str) or not hook_type:
        err("type", "required: a string such as \"command\"")
        hook_type = "command"
    command = raw.get("command")
    if hook_type == "command":
        if not isinstance(command, str) or not command.strip():
            err("command", "required for a command hook: a non-empty string")
            command = None
        elif command.lstrip().startswith("-"):
            err("command", "must not start with '-'")
    elif command is not None and not isinstance(command, str):
        err("command", "must be a string")
        command = None
    timeout = raw.get("timeout", shape.default_timeout)
    if "timeout" not in raw:
        timeout = shape.default_timeout
    elif (isinstance(timeout, bool) or not isinstance(timeout, int | float)
          or not 0 < timeout <= MAX_TIMEOUT / shape.timeout_scale):  # no product: 10**400 is no float
        unit = "milliseconds" if shape.timeout_scale == 0.001 else "seconds"
        err("timeout", f"must be a number of {unit} between 0 and {int(MAX_TIMEOUT / shape.timeout_scale)}")
        timeout = shape.default_timeout
    else:
        timeout = timeout * shape.timeout_scale
    bools: dict[str, bool] = {}
    for key, default in (("async", False), ("once", False), ("enabled", True)):
        value = raw.get(key, default)
        if not isinstance(value, bool):
            err(key, "must be true or false")
            value = default
        bools[key] = value
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        err("name", "must be a string")
        name = None
    on_error = raw.get("on_error", "allow")
    if on_error not in ("allow", "deny"):
        err("on_error", "must be \"allow\" or \"deny\"")
        on_error = "allow"
    env = _parse_env(raw.get("env"), f"{path}.env", err_path=path, errors=errors, out=out, event=event,
                     scope=scope)
    capabilities = raw.get("capabilities", [])
    if not isinstance(capabilities, list) or not all(c in CAPABILITY_NAMES for c in capabilities):
        err("capabilities", f"must be an array of: {', '.join(CAPABILITY_NAMES)}")
        capabilities = []
    sandbox, sandbox_env = _parse_sandbox(raw.get("sandbox"), path, event, scope, root, errors, out)
    condition = _parse_if(raw, path, event, scope, shape, err, out) if "if" in raw and shape.conditions else None
    for key in sorted(raw.keys() - _HANDLER_KEYS - ({"if"} if shape.conditions else set())):
        if key in _IGNORED_KEYS or key in shape.ignored_keys:
            continue
        hint = (f" ({shape.agent} does not read 'if': the hook runs whenever its matcher matches, as "
                f"{shape.agent} runs it)") if key == "if" else ""
        out.warn(f"{path}.{key}", f"unknown key, ignored{hint}", event)
    merged_env = dict(env)
    for key, value in sandbox_env:
        if key in merged_env and merged_env[key] != value:
            errors.append(out.error(f"{path}.sandbox.env.{key}", "also set in the handler's env with another value", event))
        merged_env[key] = value
    return replace(
        base,
        type=hook_type,
        command=command,
        timeout=float(timeout),
        is_async=bools["async"],
        once=bools["once"],
        enabled=bools["enabled"],
        name=name,
        on_error=on_error,
        sandbox=sandbox,
        env=tuple(sorted(merged_env.items())),
        capabilities=frozenset(capabilities),
        invalid=errors[0] if errors else None,
        condition=condition,
    )


def _parse_if(
    raw: Mapping[str, Any], path: str, event: str, scope: Scope, shape: FileShape, err: Any, out: Collector,
) -> Condition | None:
    """The handler's ``if`` rule (:func:`executor.core.conditions.read_if`): an error through
    ``err`` when it cannot be evaluated, a warning where the agent ignores it."""
    reading = read_if(raw["if"], event, shape.conditions or "claude", root_anchor=scope.from_repository)
    if reading.error:
        err("if", reading.error)
    if reading.warning:
        out.warn(f"{path}.if", reading.warning, event)
    return reading.condition


def _parse_env(
    raw: Any, path: str, *, err_path: str, errors: list[str], out: Collector, event: str,
    scope: Scope = Scope.USER,
) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        errors.append(out.error(path, "must be an object of NAME: \"literal value\"", event))
        return ()
    pairs = []
    for key, value in raw.items():
        if not _ENV_NAME.match(key):
            errors.append(out.error(f"{path}.{key}", "not a valid environment variable name", event))
        elif scope.from_repository and (why := protected_env_name(key)) is not None:
            errors.append(out.error(
                f"{path}.{key}",
                f"not allowed in {scope.value} scope: {why}, so the review could not say what runs"
                " (set it in your own hooks.json if you need it)",
                event,
            ))
        elif not isinstance(value, str):
            errors.append(out.error(f"{path}.{key}", "must be a string (a literal value)", event))
        else:
            pairs.append((key, value))
    return tuple(pairs)


def _parse_sandbox(
    raw: Any, path: str, event: str, scope: Scope, root: str | None, errors: list[str],
    out: Collector,
) -> tuple[SandboxOptions, tuple[tuple[str, str], ...]]:
    spath = f"{path}.sandbox"

    def err(key: str, message: str) -> None:
        errors.append(out.error(f"{spath}.{key}" if key else spath, message, event))

    if raw is None or raw == "docker":
        return SandboxOptions(), ()
    if raw == "host" or (isinstance(raw, dict) and raw.get("backend") == "host"):
        if scope.from_repository:
            err("", f"\"host\" is not allowed in {scope.value} scope: repository hooks always run sandboxed")
            return SandboxOptions(), ()
        if isinstance(raw, dict) and raw.get("home", "tmp") != "tmp":
            err("home", "means nothing for a \"host\" hook (it runs with your own HOME); remove it")
        return SandboxOptions(backend="host"), ()
    if not isinstance(raw, dict):
        err("", "must be \"docker\", \"host\" or an object of sandbox options")
        return SandboxOptions(), ()
    for key in sorted(raw.keys() & _FORBIDDEN_SANDBOX_KEYS):
        err(key, "not allowed: hookcage never grants privileges, capabilities, devices, host namespaces or extra volumes")
    for key in sorted(raw.keys() - _FORBIDDEN_SANDBOX_KEYS - SANDBOX_KEYS):
        err(key, f"unknown sandbox option; valid: {', '.join(sorted(SANDBOX_KEYS))}")
    backend = raw.get("backend", "docker")
    if backend != "docker":
        err("backend", "must be \"docker\" or \"host\"")
    image = raw.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip() or image.startswith("-")):
        err("image", "must be an image name that does not start with '-'")
        image = None
    workspace = raw.get("workspace", "ro")
    if workspace not in ("ro", "rw", "none"):
        err("workspace", "must be \"ro\", \"rw\" or \"none\"")
        workspace = "ro"
    network = raw.get("network", "none")
    if not isinstance(network, str) or not network or network.startswith("-"):
        err("network", "must be a network name (\"none\" by default)")
        network = "none"
    elif scope.from_repository and _HOST_NAMESPACE_NETWORKS.match(network):
        err("network", f"{network!r} shares a host namespace: not allowed in {scope.value} scope")
        network = "none"
    mounts = _parse_mounts(raw.get("mounts", []), scope, root, err)
    memory = raw.get("memory")
    if memory is not None:
        if isinstance(memory, int) and not isinstance(memory, bool) and memory > 0:
            memory = str(memory)
        if not isinstance(memory, str) or not _MEMORY.match(memory):
            err("memory", "must be a size such as \"512m\" or \"1g\"")
            memory = None
    cpus = raw.get("cpus")
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int | float) or not 0 < cpus <= 64):
        err("cpus", "must be a number of CPUs between 0 and 64")
        cpus = None
    pids = raw.get("pids")
    if pids is not None and (isinstance(pids, bool) or not isinstance(pids, int) or not 1 <= pids <= 65536):
        err("pids", "must be a whole number between 1 and 65536")
        pids = None
    home = raw.get("home", "tmp")
    if home not in HOME_MODES:
        err("home", "must be \"tmp\" (HOME=/tmp, thrown away) or \"persistent\" (kept per project and hook)")
        home = "tmp"
    env = _parse_env(raw.get("env"), f"{spath}.env", err_path=spath, errors=errors, out=out, event=event,
                     scope=scope)
    options = SandboxOptions(
        backend="docker", image=image, workspace=workspace, network=network, mounts=mounts,
        memory=memory, cpus=float(cpus) if cpus is not None else None, pids=pids, home=home,
    )
    return options, env


def _parse_mounts(
    raw: Any, scope: Scope, root: str | None, err: Any
) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(m, str) and m for m in raw):
        err("mounts", "must be an array of paths")
        return ()
    mounts: list[str] = []
    for i, mount in enumerate(raw):
        if mount.startswith("-"):
            err(f"mounts[{i}]", "must not start with '-'")
            continue
        if ":" in mount:
            err(f"mounts[{i}]", "a path only: extra mounts are always read-only at the same path")
            continue
        if not posixpath.isabs(mount):
            if root is None:
                err(f"mounts[{i}]", "a relative path needs a project root")
                continue
            mount = posixpath.join(root, mount)
        # normpath keeps a leading "//" (POSIX leaves it implementation-defined);
        # the kernel reads "//var/run/docker.sock" as the socket all the same.
        mount = posixpath.normpath(mount)
        if mount.startswith("//"):
            mount = "/" + mount.lstrip("/")
        if any(mount == s or mount.startswith(s + "/") or s.startswith(mount + "/") or mount == "/"
               for s in DOCKER_SOCKETS):
            err(f"mounts[{i}]", "would expose the Docker socket: never allowed")
            continue
        if root is None or not _inside(mount, root):
            err(f"mounts[{i}]", f"{mount} is outside the project: extra mounts stay inside it")
            continue
        mounts.append(mount)
    return tuple(mounts)


def _inside(path: str, root: str) -> bool:
    root = posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def dedupe(hooks: Sequence[HookSpec]) -> list[HookSpec]:
    """Keep the first of handlers that are the same hook (config order wins)."""
    seen: set[str] = set()
    kept = []
    for hook in hooks:
        key = _digest([hook.event, *hook.identity()])
        if key not in seen:
            seen.add(key)
            kept.append(hook)
    return kept
