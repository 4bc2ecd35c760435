"""Executor settings: pydantic-settings over init args, environment and TOML files.

Precedence, highest first: init arguments > ``HOOKCAGE_*`` environment >
the user's ``$HOOKCAGE_HOME/config.toml`` > the managed
``/etc/hookcage/config.toml`` (or ``$HOOKCAGE_MANAGED_DIR/config.toml``) >
defaults. One variable, ``HOOKCAGE_HOME``, isolates a whole installation:
the user hook file, settings, trust store, run log and daemon socket.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from executor import filecache
from executor.core.envnames import DAEMON_OFF_WORDS, DAEMON_ON_WORDS
from executor.core.pathmap import parse_path_map
from executor.errors import ConfigError

DEFAULT_MANAGED_DIR = Path("/etc/hookcage")
SETTINGS_FILE = "config.toml"
NO_FILE: dict[str, Any] = {}
"""What :func:`read_toml_cached` gives for a missing file (always this object: nobody changes it)."""


def default_home() -> Path:
    """``$HOOKCAGE_HOME``, else the platform's per-user config directory."""
    env = os.environ.get("HOOKCAGE_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_config_dir("hookcage"))


def default_managed_dir() -> Path:
    """``$HOOKCAGE_MANAGED_DIR``, else ``/etc/hookcage``."""
    env = os.environ.get("HOOKCAGE_MANAGED_DIR")
    return Path(env).expanduser() if env else DEFAULT_MANAGED_DIR


def check_engine_address(value: str) -> str:
    """``value`` when it is an engine address hookcage can use (``unix://``, ``tcp://``).

    Raises:
        ValueError: anything else (pydantic names the setting).
    """
    text = value.strip()
    if text.startswith("unix://") and len(text) > len("unix://") and text[len("unix://")] == "/":
        return text
    if text.startswith("tcp://") and len(text) > len("tcp://"):
        return text
    raise ValueError("an engine address: unix:///path/to/engine.sock or tcp://host:port")


class AllowlistSettings(BaseModel):
    """The bash allow-list: ``[allowlist]`` in the user and managed ``config.toml``."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class _TomlSource(PydanticBaseSettingsSource):
    """One ``config.toml``: a missing file is empty; a broken one is a ConfigError.

    ``inherit_allowlist`` is a lower scope's ``[allowlist]``: allow-lists add
    up across the managed and user files instead of replacing each other.
    """

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        path: Path,
        inherit_allowlist: Any = None,
    ) -> None:
        super().__init__(settings_cls)
        self.path = path
        self.data = read_toml(path)
        if isinstance(inherit_allowlist, dict):
            own = self.data.get("allowlist", {})
            if isinstance(own, dict):
                self.data["allowlist"] = {
                    **own,
                    **{key: [*inherit_allowlist.get(key, []), *own.get(key, [])]
                       for key in ("allow", "deny")
                       if isinstance(own.get(key, []), list) and isinstance(inherit_allowlist.get(key, []), list)},
                }
        unknown = sorted(self.data.keys() - settings_cls.model_fields.keys() - {"home", "managed_dir"})
        if unknown:
            valid = ", ".join(sorted(settings_cls.model_fields))
            raise ConfigError(f"{path}: unknown setting {unknown[0]!r}; valid settings: {valid}")
        # Where the installation lives is never taken from a settings file.
        self.data.pop("home", None)
        self.data.pop("managed_dir", None)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


def read_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file; ``{}`` when it does not exist.

    Raises:
        ConfigError: it cannot be read or is not valid TOML (names the file and line).
    """
    return copy.deepcopy(read_toml_cached(path))  # the callers change what they get


def read_toml_cached(path: Path) -> dict[str, Any]:
    """:func:`read_toml`, shared: the parsed file as it was last time when it has not changed
    (:mod:`executor.filecache`). The caller must not change it.

    Raises:
        ConfigError: as :func:`read_toml`.
    """
    def read() -> bytes:
        with path.open("rb") as handle:
            return handle.read()

    try:
        return filecache.FILES.load(path, ("config.toml", str(path)), read,
                                    lambda raw: tomllib.loads(raw.decode()))  # as tomllib.load decodes
    except FileNotFoundError:
        return NO_FILE
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from exc


class Settings(BaseSettings):
    """hookcage's executor settings. Build with :func:`load_settings`."""

    model_config = SettingsConfigDict(env_prefix="HOOKCAGE_", extra="ignore")

    home: Path = Field(default_factory=default_home)
    managed_dir: Path = Field(default_factory=default_managed_dir)
    fail_closed: bool = False
    """Bad input, or no verdict at all, blocks (exit 2) instead of exit 1."""
    output_cap: int = Field(1024 * 1024, ge=1024)
    """Bytes of output kept per stream of a hook."""
    max_parallel: int = Field(8, ge=1, le=64)
    """Hooks run at once for one event."""
    log_runs: bool = True
    """Write one JSON line per hook considered to ``runs.jsonl``."""
    log_file: Path | None = None
    """Where the run log goes (default ``$HOOKCAGE_HOME/runs.jsonl``)."""
    log_max_bytes: int = Field(10 * 1024 * 1024, ge=0)
    """Size past which the run log is rotated to ``runs.jsonl.1`` (0: never)."""
    log_keep: int = Field(3, ge=1, le=100)
    """Rotated run logs kept (``runs.jsonl.1`` ... ``runs.jsonl.<log_keep>``)."""

    # Docker backend defaults (per-hook ``sandbox`` options override them).
    image: str | None = None
    """Default hook image (default ``hookcage/runner:<version>``)."""
    runtime: str = "auto"
    """OCI runtime for hook containers: ``auto`` (gVisor's ``runsc`` when the engine has it, else the
    engine's default), ``runc``, ``runsc``, or another runtime the engine has (see docs/sandbox.md)."""

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime_name(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return "auto"  # HOOKCAGE_RUNTIME= (CI sets variables empty): the default
        if isinstance(value, str) and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}", value.strip()):
            raise ValueError("a runtime name (letters, digits, . _ + -), e.g. auto, runc or runsc")
        return value.strip() if isinstance(value, str) else value
    memory: str = "512m"
    cpus: float = Field(1.0, gt=0)
    pids: int = Field(256, ge=8)
    tmpfs_size: str = "64m"
    home_cap: str = Field("64m", pattern=r"^[1-9][0-9]*[bkmgBKMG]?$")  # Rust regex: "$" is the very end
    """Size past which a hook's persistent home (``sandbox.home``) is bound read-only."""
    path_map: dict[str, str] | None = None
    """Where the Docker engine's host sees hookcage's paths, ``{path here: path on the engine's host}``
    (``HOOKCAGE_PATH_MAP`` as a JSON object). Unset: detected from hookcage's own container's mounts
    when it runs in one; ``{}``: the engine sees every path as hookcage does. See docs/sandbox.md."""

    @field_validator("path_map")
    @classmethod
    def _valid_path_map(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            parse_path_map(value)  # ValueError: pydantic names the setting
        return value

    engine: str | None = None
    """The engine's address (``unix:///run/user/1000/podman/podman.sock``, ``tcp://host:2376``); over
    ``DOCKER_HOST`` when set. Docker's or Podman's Docker-compatible API. See docs/engines.md."""

    @field_validator("engine", mode="before")
    @classmethod
    def _engine_address(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None  # HOOKCAGE_ENGINE= (CI sets variables empty): DOCKER_HOST, or the default socket
        if isinstance(value, str):
            return check_engine_address(value)  # ValueError: pydantic names the setting
        return value

    # The daemon's warm pool (``hookcage serve``; in-process runs are always cold).
    pool_size: int = Field(2, ge=0, le=64)
    """Started containers kept ready per container shape (0: no pool, every run cold)."""
    pool_total: int = Field(8, ge=0, le=256)
    """Started containers kept ready across shapes, per sandbox profile."""
    pool_idle_timeout: float = Field(300.0, ge=5, le=86400)
    """Seconds a ready container waits for a hook before it exits (and a shape not asked for is forgotten)."""

    daemon: Literal["auto", "off"] = "auto"
    """``auto``: an event that finds no local daemon starts one; ``off``: never (a daemon that runs is
    still used). ``$HOOKCAGE_DAEMON`` wins over ``config.toml``; read by the self-start itself
    (:func:`executor.service.autostart.enabled`), which takes the same words."""

    @field_validator("daemon", mode="before")
    @classmethod
    def _daemon_words(cls, value: Any) -> Any:
        if isinstance(value, str):
            word = value.strip().lower()
            if word in DAEMON_OFF_WORDS:
                return "off"
            if not word or word in DAEMON_ON_WORDS:
                return "auto"
        return value

    daemon_idle_timeout: float = Field(1200.0, ge=0, le=7 * 86400)
    """Seconds a self-started daemon waits without an event before it stops (0: never). Read when an
    event starts the daemon (:mod:`executor.service.autostart`): a change applies to the next one."""

    # Gates.
    allowlist: AllowlistSettings = Field(default_factory=AllowlistSettings)
    """Commands hooks may run (user and managed config.toml only; they add up)."""
    allow_append: str = ""
    """More allow entries, one per line (``HOOKCAGE_ALLOW_APPEND``, for CI)."""
    trust_file: Path | None = None
    """A read-only trust file (``HOOKCAGE_TRUST_FILE``, e.g. exported on the base branch)."""

    @field_validator("trust_file", "log_file", mode="before")
    @classmethod
    def _no_file_when_empty(cls, value: Any) -> Any:
        # HOOKCAGE_TRUST_FILE= or HOOKCAGE_LOG_FILE= (CI sets variables empty) means none
        # (no trust file; the default run log), not the current directory.
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def allow_entries(self) -> tuple[str, ...]:
        """Every allow entry: managed, user, then ``HOOKCAGE_ALLOW_APPEND``."""
        appended = [line.strip() for line in self.allow_append.splitlines() if line.strip()]
        return (*self.allowlist.allow, *appended)

    @property
    def trust_store_file(self) -> Path:
        """The trust store (never inside a repository)."""
        return self.home / "trust.json"

    @property
    def user_hooks_file(self) -> Path:
        """The user's hook file."""
        return self.home / "hooks.json"

    @property
    def managed_hooks_file(self) -> Path:
        """The managed (organisation-wide) hook file."""
        return self.managed_dir / "hooks.json"

    @property
    def run_log(self) -> Path:
        """The JSON-lines run log."""
        return self.log_file or self.home / "runs.jsonl"

    @property
    def state_dir(self) -> Path:
        """Small state kept between calls (``once`` hooks)."""
        return self.home / "state"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        home, managed = _locations(init_settings())
        managed_source = _TomlSource(settings_cls, managed / SETTINGS_FILE)
        user_source = _TomlSource(
            settings_cls, home / SETTINGS_FILE, inherit_allowlist=managed_source.data.get("allowlist")
        )
        return (init_settings, env_settings, user_source, managed_source)


def _locations(init: dict[str, Any]) -> tuple[Path, Path]:
    home = Path(init["home"]) if init.get("home") else default_home()
    managed = Path(init["managed_dir"]) if init.get("managed_dir") else default_managed_dir()
    return home, managed


def load_settings(**overrides: Any) -> Settings:
    """Build the settings from every source.

    Raises:
        ConfigError: a settings file or variable is invalid; the message says which.
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "?"
        dotted = ".".join(str(part) for part in first["loc"]) or "?"
        home, managed = _locations(overrides)
        where = _where(name, overrides, home, managed)
        raise ConfigError(f"{where}: setting {dotted!r}: {first['msg']}") from exc
    except SettingsError as exc:
        # A structured setting (allowlist, path_map) whose variable is not JSON.
        field = re.search(r'field "([^"]+)"', str(exc))
        name = field.group(1) if field else "?"
        raise ConfigError(f"environment variable HOOKCAGE_{name.upper()}: setting {name!r}: "
                          "not valid JSON (it takes a JSON object)") from exc


def _where(name: str, overrides: dict[str, Any], home: Path, managed: Path) -> str:
    if name in overrides:
        return "arguments"
    env = f"HOOKCAGE_{name.upper()}"
    if env in os.environ:
        return f"environment variable {env}"
    for path in (home / SETTINGS_FILE, managed / SETTINGS_FILE):
        try:
            if name in read_toml(path):
                return str(path)
        except ConfigError:
            continue
    return "settings"


def update_allowlist(path: Path, entry: str, *, kind: str = "allow", remove: bool = False) -> bool:
    """Add (or remove) one entry of ``[allowlist]`` in a ``config.toml``, keeping its comments.

    The file is rewritten atomically (temp file, fsync, rename) under a lock.

    Returns:
        Whether the file changed.

    Raises:
        ConfigError: the file is not valid TOML or its ``[allowlist]`` is malformed.
    """
    import tempfile

    import tomlkit
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with FileLock(str(path) + ".lock"):
        try:
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            document = tomlkit.parse(text)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: cannot be updated: {exc}") from exc
        section = document.get("allowlist")
        if section is None:
            section = tomlkit.table()
            document["allowlist"] = section
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: 'allowlist' must be a table")
        items = section.get(kind)
        if items is None:
            items = tomlkit.array()
            items.multiline(True)
            section[kind] = items
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{path}: allowlist.{kind} must be an array of strings")
        if remove:
            if entry not in items:
                return False
            while entry in items:
                items.remove(entry)
        else:
            if entry in items:
                return False
            items.append(entry)
        fd, tmp = tempfile.mkstemp(prefix=".config.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(tomlkit.dumps(document))
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return True
