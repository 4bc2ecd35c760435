"""Executor settings: pydantic-settings over init args, environment and TOML files.

Precedence, highest first: init arguments > ``HOOKCAGE_*`` environment >
the user's ``$HOOKCAGE_HOME/config.toml`` > the managed
``/etc/hookcage/config.toml`` (or ``$HOOKCAGE_MANAGED_DIR/config.toml``) >
defaults. One variable, ``HOOKCAGE_HOME``, isolates a whole installation:
the user hook file, settings, trust store, run log and daemon socket.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from executor.errors import ConfigError

DEFAULT_MANAGED_DIR = Path("/etc/hookcage")
SETTINGS_FILE = "config.toml"


def default_home() -> Path:
    """``$HOOKCAGE_HOME``, else the platform's per-user config directory."""
    env = os.environ.get("HOOKCAGE_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_config_dir("hookcage"))


def default_managed_dir() -> Path:
    """``$HOOKCAGE_MANAGED_DIR``, else ``/etc/hookcage``."""
    env = os.environ.get("HOOKCAGE_MANAGED_DIR")
    return Path(env).expanduser() if env else DEFAULT_MANAGED_DIR


class _TomlSource(PydanticBaseSettingsSource):
    """One ``config.toml``: a missing file is empty; a broken one is a ConfigError."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        super().__init__(settings_cls)
        self.path = path
        self.data = read_toml(path)
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
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
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

    # Docker backend defaults (per-hook ``sandbox`` options override them).
    image: str | None = None
    """Default hook image (default ``hookcage/runner:<version>``)."""
    runtime: str | None = None
    """OCI runtime for hook containers, e.g. ``runsc`` (gVisor)."""
    memory: str = "512m"
    cpus: float = Field(1.0, gt=0)
    pids: int = Field(256, ge=8)
    tmpfs_size: str = "64m"

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
        return (
            init_settings,
            env_settings,
            _TomlSource(settings_cls, home / SETTINGS_FILE),
            _TomlSource(settings_cls, managed / SETTINGS_FILE),
        )


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
        home, managed = _locations(overrides)
        where = _where(name, overrides, home, managed)
        raise ConfigError(f"{where}: setting {name!r}: {first['msg']}") from exc


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
