"""Only ``executor/sandbox/docker/`` imports docker-py.

Every other module reaches the engine through that package (which re-exports
what they need: ``NotFound``, ``APIClient``, ...), and the pure pool helpers
do not load docker-py at all, even indirectly: they take their labels and
stream ids from ``executor.sandbox.conventions``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import executor

pytestmark = pytest.mark.spawns

PACKAGE_ROOT = Path(executor.__file__).parent
DOCKER_PACKAGE = PACKAGE_ROOT / "sandbox" / "docker"
PURE_MODULES = (
    "executor.sandbox.conventions",
    "executor.sandbox.warmjob",
    "executor.sandbox.poolbook",
    "executor.sandbox.backends",
    "executor.sandbox.checks",
)


def docker_imports(source: str, filename: str) -> list[str]:
    """``file:line: statement`` for each import of ``docker`` or ``docker.*`` (absolute imports only)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name == "docker" or name.startswith("docker.") for name in names):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_sees_every_form_of_import() -> None:
    source = (
        "import docker\nimport os, docker.errors as e\nfrom docker import APIClient\n"
        "from docker.utils import socket\ndef f():\n    import docker.tls\n"
        "import dockerfile\nfrom . import docker\nfrom executor.sandbox.docker import X\n"
    )
    assert [hit.split(": ")[0] for hit in docker_imports(source, "m.py")] == [
        "m.py:1", "m.py:2", "m.py:3", "m.py:4", "m.py:6",
    ]


def test_only_the_docker_package_imports_docker_py() -> None:
    modules = sorted(PACKAGE_ROOT.rglob("*.py"))
    assert len(modules) > 40  # the walk found the package
    outside = [
        hit
        for module in modules
        if DOCKER_PACKAGE not in module.parents
        for hit in docker_imports(module.read_text(encoding="utf-8"), str(module.relative_to(PACKAGE_ROOT.parent)))
    ]
    assert outside == []


def test_the_docker_package_does_import_it() -> None:
    inside = [
        hit
        for module in sorted(DOCKER_PACKAGE.glob("*.py"))
        for hit in docker_imports(module.read_text(encoding="utf-8"), module.name)
    ]
    assert inside  # else the check above proves nothing about where docker-py went


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_helpers_do_not_load_docker_py(module: str) -> None:
    probe = f"import sys, {module}; print(sorted(m for m in sys.modules if m == 'docker' or m.startswith('docker.')))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
