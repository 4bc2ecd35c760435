"""The offline base built on a machine without debootstrap: hookcage fetches its own (minutes).

``build_base_image`` runs with debootstrap absent from its search path and a
fresh cache, so it must fetch the ``debootstrap`` package with apt (private
state, this machine's sources and keys), unpack it into the cache and run it
from there. The base goes to a throwaway tag (never ``hookcage/base:...``
that other tests and the runner use), is checked (its label, the packages
debootstrap and apt installed, nothing of debootstrap's own left inside) and
removed. It is the one test here that runs debootstrap: about 2-4 minutes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors  # type: ignore[import-untyped, unused-ignore]
import pytest

from executor.provision.base_image import build_base_image
from executor.provision.debootstrap import SBIN_DIRS, find_debootstrap
from executor.provision.recipe import PACKAGES_LABEL, base_inputs
from executor.sandbox.docker import MANAGED_LABEL

pytestmark = pytest.mark.docker
SESSION = {"hookcage.test-session": os.environ.get("HOOKCAGE_TEST_SESSION", "base-without-debootstrap")}


def path_without_debootstrap() -> str:
    """``$PATH`` without the folders a system debootstrap lives in."""
    sbin = set(SBIN_DIRS.split(":"))
    return ":".join(d for d in os.environ.get("PATH", "").split(":") if d and d.rstrip("/") not in sbin)


@pytest.fixture
def throwaway_tag(docker_api: Any) -> Iterator[str]:
    tag = f"hookcage-test/base:{secrets.token_hex(4)}"
    yield tag
    with contextlib.suppress(docker.errors.NotFound):
        docker_api.remove_image(tag, force=True)


def test_the_base_builds_with_a_fetched_debootstrap(
    docker_api: Any, throwaway_tag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        message = "debootstrap needs root: run this test as root"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)
    if shutil.which("apt-get") is None:
        pytest.skip("no apt-get on this machine: hookcage cannot fetch debootstrap here")
    search = path_without_debootstrap()
    assert shutil.which("debootstrap", path=search) is None, f"debootstrap is on {search}"
    monkeypatch.setenv("PATH", search)
    cache = tmp_path / "cache"
    lines: list[str] = []

    image_id = build_base_image(
        docker_api, force=True, tag=throwaway_tag, cache=cache, search_path=search, log=lines.append
    )

    [copy] = [p for p in cache.iterdir() if p.name.startswith("debootstrap-")]
    assert any(line.startswith("no debootstrap on this machine: fetching it into") for line in lines), lines
    assert any(line.startswith(f"running /bin/sh {copy}/usr/sbin/debootstrap --variant=minbase")
               for line in lines), lines
    assert any(line.startswith("debootstrap: Base system installed successfully") for line in lines), lines
    assert lines[-1].startswith(f"imported {throwaway_tag} ({image_id[:19]}")
    info = docker_api.inspect_image(throwaway_tag)
    assert info["Id"] == image_id and info["Config"]["Labels"][PACKAGES_LABEL] == base_inputs()

    container = docker_api.create_container(
        throwaway_tag,
        ["sh", "-c", "dpkg-query -W -f '${db:Status-Status} ${Package}\\n' bash python3 npm jq; "
                     "test ! -e /debootstrap && echo clean"],
        labels={MANAGED_LABEL: "true", **SESSION},
        network_disabled=True,
    )
    try:
        docker_api.start(container)
        assert docker_api.wait(container, timeout=60)["StatusCode"] == 0
        out = docker_api.logs(container, stderr=False).decode()
    finally:
        docker_api.remove_container(container, force=True)
    *packages, last = out.splitlines()
    assert (sorted(packages), last) == ([f"installed {p}" for p in ("bash", "jq", "npm", "python3")], "clean")

    # The second build takes the cached copy: nothing is fetched.
    again: list[str] = []
    with find_debootstrap(search_path=search, cache=cache, log=again.append) as tool:
        assert tool.origin == str(copy)
    assert again == [f"using debootstrap {tool.version} from {copy} (fetched earlier; no download)"]
