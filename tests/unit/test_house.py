"""The house's rules that ``lint-imports`` cannot check (README.md, "Development").

- No module of ``executor/`` uses another module's private name (``from
  executor.x import _name``, or ``x._name`` after importing ``x``): a name
  another module needs is part of its module's interface, and says so.
- A unit test module that starts a process (``subprocess``, ``os.fork``,
  ``multiprocessing``) is marked ``spawns``, so ``pytest -m "not spawns"
  tests/unit`` runs in this process alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import executor

PACKAGE_ROOT = Path(executor.__file__).parent
SOURCE_ROOT = PACKAGE_ROOT.parent
UNIT_TESTS = Path(__file__).parent

# Test modules someone else is changing right now; they get their mark with that change.
NOT_YET_MARKED: dict[str, str] = {}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = SOURCE_ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported_from(node: ast.ImportFrom, here: str, package: bool) -> str | None:
    """The absolute module an ``import from`` reads (a relative one resolved against ``here``)."""
    if node.level == 0:
        return node.module
    base = here.split(".") if package else here.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def private_uses(source: str, path: Path) -> Iterator[str]:
    """``line: what`` for each private name of another ``executor`` module this module uses."""
    here = _module_name(path)
    tree = ast.parse(source, str(path))
    modules: dict[str, str] = {}  # local name -> the executor module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = _imported_from(node, here, path.name == "__init__.py")
            if origin is None or not (origin == "executor" or origin.startswith("executor.")):
                continue
            for alias in node.names:
                if _is_module(f"{origin}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{origin}.{alias.name}"
                elif _private(alias.name) and origin != here:
                    yield f"{node.lineno}: from {origin} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("executor.") and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        chain: list[str] = []
        value = node.value
        while isinstance(value, ast.Attribute):
            chain.insert(0, value.attr)
            value = value.value
        if not isinstance(value, ast.Name):
            continue
        head = modules.get(value.id) or ("executor" if value.id == "executor" else None)
        if head is None:
            continue
        owner = ".".join([head, *chain])
        if owner != here and _is_module(owner):
            yield f"{node.lineno}: {owner}.{node.attr}"


def _package_modules() -> list[Path]:
    return sorted(p for p in PACKAGE_ROOT.rglob("*.py") if "demo/project" not in p.as_posix())


def test_no_module_uses_another_modules_private_name() -> None:
    found = [f"{path.relative_to(SOURCE_ROOT)}:{use}"
             for path in _package_modules() for use in private_uses(path.read_text(), path)]
    assert not found, "private names used across modules (drop the underscore: they are an interface):\n" + "\n".join(found)


@pytest.mark.parametrize(("source", "found"), [
    ("from executor.core.text import _cap\n", ["1: from executor.core.text import _cap"]),
    ("from .words import _Word\n", ["1: from executor.gates.allowlist.words import _Word"]),
    ("from executor.core import text\ntext._cap('x')\n", ["2: executor.core.text._cap"]),
    ("import executor.core.text as t\nt._cap\n", ["2: executor.core.text._cap"]),
    ("from __future__ import annotations\nfrom executor.core.text import sanitize\n", []),
    ("from executor.gates.allowlist.walk import _helper\n", []),  # its own private name
    ("from executor.core import text\ntext.__name__\n", []),
])
def test_the_check_sees_every_form(source: str, found: list[str]) -> None:
    path = PACKAGE_ROOT / "gates" / "allowlist" / "walk.py"
    assert list(private_uses(source, path)) == found


# --- the spawns mark -------------------------------------------------------------------------

SPAWNING_MODULES = ("multiprocessing", "concurrent.futures.process")
SPAWNING_CALLS = {
    *(("subprocess", name) for name in ("run", "Popen", "call", "check_call", "check_output", "getoutput",
                                        "getstatusoutput")),
    *(("os", name) for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "popen", "spawnv",
                                "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnlp")),
    ("pty", "fork"), ("pty", "spawn"), ("concurrent.futures", "ProcessPoolExecutor"),
    ("asyncio", "create_subprocess_exec"), ("asyncio", "create_subprocess_shell"),
}


def starts_processes(tree: ast.Module) -> bool:
    """The module starts a process itself: ``subprocess.run``, ``Popen``, ``os.fork`` and their kin, or
    ``multiprocessing`` (``subprocess.CompletedProcess`` or ``PIPE`` alone start nothing).

    A process started by the code under test (the host sandbox, the daemon's autostart) is not seen
    here: those modules are marked by hand.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(alias.name.startswith(SPAWNING_MODULES) for alias in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith(SPAWNING_MODULES):
                return True
            if any((node.module, alias.name) in SPAWNING_CALLS for alias in node.names):
                return True
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and (node.value.id, node.attr) in SPAWNING_CALLS):
            return True
    return False


def _is_spawns_mark(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "spawns"
            and isinstance(node.value, ast.Attribute) and node.value.attr == "mark")


def marked_spawns(tree: ast.Module) -> bool:
    """A module-level ``pytestmark`` is ``pytest.mark.spawns`` or a list holding it."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        if not any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            continue
        value = node.value
        marks = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        if any(_is_spawns_mark(mark) for mark in marks):
            return True
    return False


def test_every_unit_test_that_starts_a_process_is_marked_spawns() -> None:
    unmarked = []
    for path in sorted(UNIT_TESTS.rglob("test_*.py")):
        name = path.relative_to(UNIT_TESTS).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        if starts_processes(tree) and not marked_spawns(tree) and name not in NOT_YET_MARKED:
            unmarked.append(name)
    assert not unmarked, "start processes without `pytestmark = pytest.mark.spawns`:\n" + "\n".join(unmarked)


def test_the_spawns_mark_is_registered(pytestconfig: pytest.Config) -> None:
    assert any(line.startswith("spawns:") for line in pytestconfig.getini("markers"))


@pytest.mark.parametrize(("source", "starts", "marked"), [
    ("import subprocess\nsubprocess.run(['true'])\n", True, False),
    ("from subprocess import Popen\n", True, False),
    ("import subprocess\nx: subprocess.CompletedProcess[str]\nsubprocess.PIPE\n", False, False),
    ("import os\nos.fork()\n", True, False),
    ("from os import fork\n", True, False),
    ("import multiprocessing.pool\n", True, False),
    ("import asyncio\nasyncio.create_subprocess_exec\n", True, False),
    ("import os\nos.getpid()\n", False, False),
    ("import pytest\npytestmark = pytest.mark.spawns\n", False, True),
    ("import pytest\npytestmark = [pytest.mark.skipif(True, reason='x'), pytest.mark.spawns]\n", False, True),
    ("import pytest\ndef f():\n    pytestmark = pytest.mark.spawns\n", False, False),
])
def test_the_spawns_check_reads_imports_calls_and_marks(source: str, starts: bool, marked: bool) -> None:
    tree = ast.parse(source)
    assert (starts_processes(tree), marked_spawns(tree)) == (starts, marked)
