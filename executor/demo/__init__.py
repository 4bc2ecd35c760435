"""``hookcage demo``: a realistic agent session against a sample repository.

The sample project (``executor/demo/project``) carries its own hooks, as a
cloned repository would; one of them is hostile. The demo copies it to a
temporary folder, isolates a hookcage installation there (so your own hooks
and settings play no part), dispatches the events an agent would send, and
prints what each hook did and what hookcage answered. It then checks the
sandbox held: it exits non-zero if anything got out.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.events import get_event
from executor.executor import HookExecutor
from executor.protocol import Verdict, render
from executor.settings import load_settings

PROJECT = Path(__file__).resolve().parent / "project"
Echo = Callable[[str], None]


@dataclass(frozen=True)
class Step:
    """One agent event of the demo and what a newcomer should take from it."""

    title: str
    event: str
    fields: dict[str, Any]
    expect: Callable[[Verdict], bool]
    lesson: str


def _steps(root: Path) -> list[Step]:
    app = str(root / "src" / "app.py")
    return [
        Step("The agent starts a session", "SessionStart", {"source": "startup"},
             lambda v: "unittest" in (v.additional_context or ""),
             "a SessionStart hook's plain output became context for the model."),
        Step("The agent wants to run `rm -rf build/ src/`", "PreToolUse",
             {"tool_name": "Bash", "tool_input": {"command": "rm -rf build/ src/"}},
             lambda v: v.blocks and "rm-guard" in (v.reason or ""),
             "the repository's guard blocked the call (exit 2); the reason goes to the model."),
        Step("The agent wants to run the tests", "PreToolUse",
             {"tool_name": "Bash", "tool_input": {"command": "python3 -m unittest discover src"}},
             lambda v: not v.blocks,
             "nothing to say: hookcage answers {} and the agent goes on."),
        Step("The agent edits src/app.py (a hostile hook fires)", "PreToolUse",
             {"tool_name": "Edit", "tool_input": {"file_path": app, "old_string": "Hello", "new_string": "Hi"}},
             lambda v: "backdoor write blocked" in (v.system_message or "")
             and "network blocked" in (v.system_message or "")
             and "found ~/.ssh" not in (v.system_message or ""),
             "the hostile hook ran in a container: read-only workspace, no network, no home, no secrets."),
        Step("The edit is done; a formatter check looks at it", "PostToolUse",
             {"tool_name": "Edit", "tool_input": {"file_path": app}, "tool_response": {"success": True}},
             lambda v: v.blocks and "trailing whitespace" in (v.reason or ""),
             "a PostToolUse check sent its finding to the model (decision: block)."),
        Step("The agent wants to stop", "Stop", {"stop_hook_active": False},
             lambda v: v.blocks and "TODO" in (v.reason or ""),
             "the Stop hook kept the agent working: a TODO is left in src/."),
        Step("The agent stops again, from a Stop hook's nudge", "Stop", {"stop_hook_active": True},
             lambda v: not v.blocks,
             "stop_hook_active reached the hook, which let the agent stop (no loop)."),
    ]


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _describe(verdict: Verdict, event: str) -> list[str]:
    lines = []
    for o in verdict.outcomes:
        state = {"ok": "answered", "block": "BLOCKED", "error": "failed"}[o.status]
        lines.append(f"   hook {o.hook}: {state} (exit {o.exit_code})")
    answer = render(get_event(event), verdict)
    shown = answer.stdout.strip() if answer.exit_code == 0 else answer.stderr.strip()
    if len(shown) > 300:
        shown = shown[:297] + "..."
    lines.append(f"   hookcage answers the agent: exit {answer.exit_code}  {shown}")
    return lines


def run_demo(echo: Echo, *, executor_factory: Callable[[Path], HookExecutor] | None = None) -> bool:
    """Run the demo, printing through ``echo``; True when every step behaved as expected.

    Args:
        echo: prints one line.
        executor_factory: builds the executor for an installation folder
            (tests inject one; by default the docker backend from settings).
    """
    with tempfile.TemporaryDirectory(prefix="hookcage-demo-") as tmp:
        base = Path(tmp)
        base.chmod(0o755)  # the container user (not root) must reach the workspace
        root = base / "project"
        shutil.copytree(PROJECT, root)
        for path in (root, *root.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        before = _digest(root)
        if executor_factory is None:
            settings = load_settings(home=base / "home", managed_dir=base / "managed")
            executor = HookExecutor(settings, environ={})
        else:
            executor = executor_factory(base)
        echo(f"hookcage demo: a cloned repository at {root} carries its own hooks")
        echo("(.hookcage/hooks.json); one of them is hostile. Each hook runs in a fresh")
        echo("container: workspace read-only, no network, no capabilities, your environment left out.")
        echo("")
        ok = True
        with executor:
            for i, step in enumerate(_steps(root), 1):
                payload = {"session_id": "demo-session", "cwd": str(root),
                           "hook_event_name": step.event, **step.fields}
                verdict = executor.dispatch(step.event, payload)
                passed = step.expect(verdict)
                ok &= passed
                echo(f"{i}. {step.title}  [{step.event}]")
                for line in _describe(verdict, step.event):
                    echo(line)
                echo(f"   -> {step.lesson}" if passed else "   -> UNEXPECTED: see the answer above")
                echo("")
        intact = _digest(root) == before
        ok &= intact
        echo("The workspace after the session: " + (
            "unchanged, byte for byte (the hostile hook's backdoor never landed)."
            if intact else "CHANGED: a hook wrote to it."))
        runs = (base / "home" / "runs.jsonl")
        if runs.exists():
            count = len(runs.read_text().splitlines())
            echo(f"Every hook considered was logged ({count} lines in the run log).")
        echo("")
        echo("demo passed: every hook behaved as expected and nothing escaped." if ok
             else "demo FAILED: see the UNEXPECTED lines above.")
        return ok

