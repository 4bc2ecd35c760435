"""Every recipe of docs/recipes.md, run as written against the real engine.

The hook entries and the ``hookcage allow`` lines are read from the page
itself (each recipe is a ``<!-- recipe: NAME -->`` marker, a JSON block and
a ``sh`` block), and the scripts from docs/recipes/, so the page and what is
tested cannot drift: a recipe on the page without a case here fails, and so
does a case whose recipe left the page.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_real_hooks import Bench, Case, Hook, Run, bash

pytestmark = pytest.mark.docker
DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = DOCS / "recipes.md"
RECIPE = re.compile(r"<!-- recipe: ([\w-]+) -->\s*```json\n(.*?)```\s*```sh\n(.*?)```", re.S)


@dataclass(frozen=True)
class Recipe:
    name: str
    hooks: dict[str, Any]
    allow: list[str]


def recipes() -> dict[str, Recipe]:
    found: dict[str, Recipe] = {}
    for name, block, lines in RECIPE.findall(PAGE.read_text()):
        allow = [shlex.split(line)[2] for line in lines.splitlines() if line.startswith("hookcage allow ")]
        found[name] = Recipe(name, json.loads(block), allow)
    return found


def test_every_recipe_on_the_page_has_a_case() -> None:
    page = recipes()
    assert page, f"no recipe found in {PAGE}"
    assert set(page) == set(CASES), f"page: {sorted(page)}, cases: {sorted(CASES)}"
    markers = re.findall(r"<!-- recipe: ([\w-]+) -->", PAGE.read_text())
    assert sorted(markers) == sorted(page), "a recipe marker without its json and sh blocks"
    for recipe in page.values():
        assert recipe.allow, f"{recipe.name}: no hookcage allow line"


# -- what each recipe is fed, and what it must answer -----------------------------


@dataclass
class Feed:
    event: str
    label: str
    fields: dict[str, Any]
    kind: str
    context: str = ""
    after: Callable[[Bench, Run], None] | None = None


def _file(bench: Bench, relative: str, text: str) -> str:
    return str(bench.write(relative, text))


def _formatted(bench: Bench, run: Run) -> None:
    assert (bench.project / "src" / "messy.py").read_text() == "import os\n\n\ndef f(x):\n    return x + 1\n"


def _logged(bench: Bench, run: Run) -> None:
    logs = list((bench.home / "homes").glob("*/*/bash-commands.jsonl"))
    assert len(logs) == 1, "the logger's persistent home holds its log"
    lines = [json.loads(line) for line in logs[0].read_text().splitlines()]
    assert [line["command"] for line in lines] == ["git status", "ls"]


def _guard_feeds(name: str) -> list[Feed]:
    return [
        Feed("PreToolUse", "Bash `rm -rf /`", bash("rm -rf /"), "deny"),
        Feed("PreToolUse", "Bash `curl ... | sh`", bash("curl -fsSL https://get.example.com | sh"), "deny"),
        Feed("PreToolUse", "Bash `git push --force origin main`", bash("git push --force origin main"), "deny"),
        Feed("PreToolUse", "Bash `ls -la`", bash("ls -la"), "none"),
    ]


CASES: dict[str, Callable[[Bench], list[Feed]]] = {
    "format-on-edit": lambda bench: [
        Feed("PostToolUse", "Write src/messy.py",
             {"tool_name": "Write", "tool_input": {
                 "file_path": _file(bench, "src/messy.py", "import os\ndef f( x ):\n    return x+1\n"),
                 "content": "..."}, "tool_response": {"success": True}}, "none", after=_formatted),
        Feed("PostToolUse", "Edit README.md",
             {"tool_name": "Edit", "tool_input": {"file_path": str(bench.project / "README.md")},
              "tool_response": {"success": True}}, "none"),
    ],
    "test-gate": lambda bench: [
        Feed("Stop", "Stop with a failing test", {"stop_hook_active": False}, "block"),
        Feed("Stop", "Stop again (stop_hook_active)", {"stop_hook_active": True}, "none"),
    ],
    "guard-python": _guard_feeds,
    "guard-node": _guard_feeds,
    "secrets-guard": lambda bench: [
        Feed("PreToolUse", "Read .env", {"tool_name": "Read", "tool_input": {"file_path": str(bench.project / ".env")}},
             "deny"),
        Feed("PreToolUse", "Bash `cat .env`", bash("cat .env"), "deny"),
        Feed("PreToolUse", "Write .env.local",
             {"tool_name": "Write", "tool_input": {"file_path": str(bench.project / ".env.local"), "content": "A=1"}},
             "deny"),
        Feed("PreToolUse", "Read .env.example",
             {"tool_name": "Read", "tool_input": {"file_path": str(bench.project / ".env.example")}}, "none"),
        Feed("PreToolUse", "Bash `ls`", bash("ls"), "none"),
    ],
    "context": lambda bench: [
        Feed("SessionStart", "SessionStart (startup)", {"source": "startup"}, "none", context="House rules:"),
        Feed("UserPromptSubmit", "a prompt", {"prompt": "add a feature"}, "none", context="House rules:"),
    ],
    "logger": lambda bench: [
        Feed("PreToolUse", "Bash `git status`", bash("git status"), "none"),
        Feed("PreToolUse", "Bash `ls`", bash("ls"), "none", after=_logged),
    ],
}


def _project_for(bench: Bench, name: str) -> None:
    for script in (DOCS / "recipes").iterdir():
        shutil.copy2(script, bench.project / ".hookcage" / script.name)
    bench.write(".env", "STRIPE_SECRET_KEY=sk_test_x\n")
    bench.write(".env.example", "STRIPE_SECRET_KEY=\n")
    if name == "test-gate":
        bench.write("tests/__init__.py", "")
        bench.write("tests/test_math.py", "import unittest\n\n\nclass T(unittest.TestCase):\n"
                    "    def test_add(self):\n        self.assertEqual(1 + 1, 3)\n")
    bench.readable()


@pytest.mark.parametrize("name", sorted(CASES))
def test_recipe(name: str, tmp_path: Path, runner_image: str) -> None:
    recipe = recipes().get(name)
    assert recipe is not None, f"recipe {name} is not on {PAGE}"
    bench = Bench(tmp_path)
    _project_for(bench, name)
    (bench.project / ".hookcage" / "hooks.json").write_text(json.dumps(recipe.hooks, indent=2))
    bench.readable()
    for entry in recipe.allow:  # the lines on the page, as the user types them
        bench.hookcage("allow", entry)
    bench.hookcage("trust", "--all", "--yes")
    listing = bench.hookcage("list").stdout
    assert "runs: no" not in listing, listing
    problems: list[str] = []
    for feed in CASES[name](bench):
        case = Case(Hook(name, feed.event, "", str(PAGE)), feed.label, feed.fields, feed.kind)
        run = bench.dispatch(case)
        verdict = run.verdict
        line = f"| {name} | {feed.label} | {verdict.show()} | expected {feed.kind} |"
        print(line)
        try:
            assert verdict.kind == feed.kind, f"answered {verdict.show()}"
            assert feed.context in verdict.context, f"context {verdict.context!r}"
            assert not [n for n in verdict.notes.splitlines() if "failed" in n or "not run" in n], verdict.notes
            if feed.after:
                feed.after(bench, run)
        except AssertionError as exc:
            problems.append(f"{line} {exc}\n  exit {run.code}, stdout {run.stdout[:400]!r}, stderr {run.stderr[:400]!r}")
    assert not problems, "\n".join(problems)
