"""An isolated installation for the unit tests that drive HookExecutor over real hook files and a FakeSandbox."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from executor.executor import HookExecutor
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings


class Env:
    """An isolated installation: HOOKCAGE_HOME, a managed dir and a project."""

    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.managed = tmp / "managed"
        self.project = tmp / "project"
        for d in (self.home, self.managed, self.project / ".hookcage"):
            d.mkdir(parents=True)
        # Any simple command: these tests are about dispatch, not the allow-list.
        (self.home / "config.toml").write_text('[allowlist]\nallow = ["*"]\n')

    def write(self, scope: str, hooks: dict[str, Any] | str) -> Path:
        path = {
            "managed": self.managed / "hooks.json",
            "user": self.home / "hooks.json",
            "project": self.project / ".hookcage" / "hooks.json",
            "local": self.project / ".hookcage" / "hooks.local.json",
        }[scope]
        path.write_text(hooks if isinstance(hooks, str) else json.dumps(hooks))
        return path

    def executor(self, handler: Callable[[RunRequest], RunResult] | None = None, **settings: Any) -> tuple[HookExecutor, FakeSandbox]:
        fake = FakeSandbox(handler)
        ex = HookExecutor(
            load_settings(home=self.home, managed_dir=self.managed, **settings),
            sandboxes={"docker": fake, "host": fake},
            environ={},
        )
        return ex, fake

    def payload(self, **extra: Any) -> dict[str, Any]:
        base: dict[str, Any] = {"session_id": "s1", "cwd": str(self.project),
                                "transcript_path": "", "tool_name": "Bash",
                                "tool_input": {"command": "ls"}}
        base.update(extra)
        return base

    def log(self) -> list[dict[str, Any]]:
        path = self.home / "runs.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def hooks(event: str, *commands: str | dict[str, Any], matcher: str | None = None, **top: Any) -> dict[str, Any]:
    handlers = [c if isinstance(c, dict) else {"type": "command", "command": c} for c in commands]
    group: dict[str, Any] = {"hooks": handlers}
    if matcher is not None:
        group["matcher"] = matcher
    return {"hooks": {event: [group]}, **top}
