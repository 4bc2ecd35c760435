"""The caller's settings and environment, as the daemon rebuilds them for one forwarded event.

``hookcage dispatch`` sends its environment along (:mod:`executor.service.client`);
the daemon answers only where it can promise what the caller's own process
would have answered. From the forwarded ``HOOKCAGE_*`` variables it builds
the settings ``hookcage dispatch`` would load (:func:`caller_settings`, never
reading the daemon's own environment), and from the project-dir variables, the
payload's ``cwd`` and the caller's working directory the environment the
executor finds the project in (:func:`project_environ`; on TCP,
:func:`remote_environ`, behind the keep-out). What cannot be promised (a
relative path, settings that do not load, another installation) is a
:class:`~executor.service.dispatching.Refusal`: the caller answers in-process.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from executor import filecache
from executor.core.envnames import AGENT_CONFIG_VARS, PROJECT_DIR_VARS
from executor.sandbox.host import DEFAULT_LANG, DEFAULT_PATH
from executor.service import client
from executor.service.dispatching import Refusal
from executor.service.keepout import (
    Fence,
    Fenced,
    NoProject,
    PathRefused,
    fence_request,
    well_formed,
)
from executor.settings import DEFAULT_MANAGED_DIR, SETTINGS_FILE, Settings, read_toml_cached

_PREFIX = "hookcage_"


class ForwardedSettings(Settings):
    """Settings of a forwarded call: the caller's ``HOOKCAGE_*`` variables come in as
    init arguments, and the daemon's own environment is never read."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources = super().settings_customise_sources(
            settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
        )
        return tuple(source for source in sources if source is not env_settings)


def _is_complex(field: FieldInfo) -> bool:
    """Whether pydantic-settings reads this field's variable as JSON (models and containers)."""
    annotation = field.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]  # X | None, as pydantic-settings reads it (e.g. path_map)
    origin = typing.get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, BaseModel):
        return True
    return origin in (list, dict, tuple, set, frozenset)


def _absolute(value: str, what: str) -> str:
    try:
        well_formed(value, what)
    except PathRefused as exc:
        # No file system has it (a NUL byte, a lone surrogate, too long, '..'): the caller's own
        # process reports it, as it would without the daemon.
        raise Refusal(str(exc)) from None
    if not os.path.isabs(value):
        # Relative to the caller's working directory, which the daemon does not share.
        raise Refusal(f"{what} {value!r} is not an absolute path")
    return value


def caller_settings(env: Mapping[str, str], caller_home: str | None, home: Path) -> Settings:
    """The settings ``hookcage dispatch`` would load in the caller's environment.

    Args:
        env: the caller's forwarded environment.
        caller_home: the home the caller computed when ``HOOKCAGE_HOME`` is unset
            (the platform's config directory, as ``platformdirs`` gives it).
        home: this daemon's home: it serves no other installation.

    Raises:
        Refusal: the caller's settings do not load, name another installation,
            or hold a path relative to its working directory.
    """
    values: dict[str, Any] = {}
    for name, value in env.items():
        lowered = name.lower()
        if not lowered.startswith(_PREFIX):
            continue
        if name != name.upper():
            # pydantic-settings reads any letter case, the rest of hookcage upper case only.
            raise Refusal(f"variable {name} is not in upper case")
        field = Settings.model_fields.get(lowered[len(_PREFIX):])
        if field is None:
            continue
        if _is_complex(field):
            try:
                values[lowered[len(_PREFIX):]] = json.loads(value)
            except ValueError as exc:
                raise Refusal(f"{name} is not JSON") from exc
        else:
            values[lowered[len(_PREFIX):]] = value
    own_home = values.get("home")
    if own_home is None:
        if caller_home is None:
            raise Refusal("the caller could not tell its hookcage home")
        values["home"] = caller_home
    values["home"] = _absolute(values["home"], "HOOKCAGE_HOME")
    if os.path.realpath(values["home"]) != os.path.realpath(home):
        raise Refusal(f"the caller's home {values['home']} is not this daemon's ({home})")
    values["managed_dir"] = _absolute(values.get("managed_dir", str(DEFAULT_MANAGED_DIR)), "HOOKCAGE_MANAGED_DIR")
    try:
        settings = _forwarded_settings(values)
    except Exception as exc:
        # In-process this is an error message naming the variable or file: let it say so.
        raise Refusal(f"the caller's settings do not load: {type(exc).__name__}") from exc
    for name in ("trust_file", "log_file"):
        path = getattr(settings, name)
        if path is not None:
            _absolute(str(path), name)
    return settings


_SETTINGS = filecache.memo(64)


def _forwarded_settings(values: dict[str, Any]) -> Settings:
    """``ForwardedSettings(**values)``, the same object again while the values and both
    ``config.toml`` files are (:mod:`executor.filecache`: a file edited since is read afresh).

    Settings are never changed once built, so one object serves every request that has them.
    """
    files = tuple(read_toml_cached(Path(values[name]) / SETTINGS_FILE) for name in ("managed_dir", "home"))
    key = json.dumps(values, sort_keys=True, default=str)
    built, seen = _SETTINGS.get(key, lambda: (ForwardedSettings(**values), files))
    if any(now is not then for now, then in zip(files, seen, strict=True)):
        built, seen = ForwardedSettings(**values), files  # a file changed: build, and keep the new one
        _SETTINGS.put(key, (built, seen))
    return built


def project_environ(env: Mapping[str, str], payload: Mapping[str, Any], cwd: str | None) -> dict[str, str]:
    """The environment ``HookExecutor`` finds the project root (and ``CLAUDE_ENV_FILE``) in, for the caller.

    In-process the root is the first project-dir variable, else the
    payload's ``cwd``, else the working directory; the caller's working
    directory stands in for the last.

    Raises:
        Refusal: the root, the payload's ``cwd`` or ``transcript_path`` is relative.
    """
    environ = {name: env[name] for name in (*PROJECT_DIR_VARS, *client.AGENT_ENV_VARS, *AGENT_CONFIG_VARS)
               if name in env}
    chosen = next((env[name] for name in PROJECT_DIR_VARS if env.get(name)), None)
    where = payload.get("cwd")
    if chosen is not None:
        _absolute(chosen, "the project directory")
    elif not (isinstance(where, str) and where):
        if cwd is None:
            raise Refusal("the caller has no working directory")
        environ[PROJECT_DIR_VARS[0]] = _absolute(cwd, "the working directory")
    if where and not (isinstance(where, str) and os.path.isabs(where)):
        raise Refusal(f"the payload's cwd {where!r} is not an absolute path")
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and transcript:
        _absolute(transcript, "the payload's transcript_path")
    return environ


def remote_environ(
    env: Mapping[str, str], payloads: Sequence[Mapping[str, Any]], cwd: str | None, own: Mapping[str, str],
    fence: Fence,
) -> tuple[dict[str, str], Fenced]:
    """The environment ``HookExecutor`` reads for a remote (TCP) caller, and what it may mount.

    Only where the project is comes from the caller: its project-dir variables,
    else the payload's ``cwd``, else its working directory, each an absolute
    path the service sees at the same place (the workspace is mounted at the
    same path in the agent's and the service's containers). What names the
    agents' user files (``HOME``, ``CODEX_HOME``, ...) is the service's own
    (``own``); the caller's ``CLAUDE_ENV_FILE`` is ignored.

    Every path the request names passes the keep-out
    (:func:`executor.service.keepout.fence_request`); the project is pinned
    as the resolved path it was judged by (``CLAUDE_PROJECT_DIR``), so the
    executor cannot find another one in the payload.

    Raises:
        PathRefused: a path is malformed (400) or leads where the caller may not go (403).
        Refusal: no project at all, or it does not exist on the service (409).
    """
    try:
        fenced = fence_request(env, payloads, cwd, fence)
    except NoProject as exc:
        raise Refusal(str(exc)) from None
    environ = {name: own[name] for name in AGENT_CONFIG_VARS if name in own}
    environ[PROJECT_DIR_VARS[0]] = fenced.project
    return environ, fenced


def host_base_env(env: Mapping[str, str]) -> dict[str, str]:
    """What ``executor.sandbox.host.default_base_env`` gives in the caller's environment."""
    base = {"PATH": env.get("PATH") or DEFAULT_PATH, "LANG": env.get("LANG") or DEFAULT_LANG}
    if "HOME" in env:
        base["HOME"] = env["HOME"]
    return base
