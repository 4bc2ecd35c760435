"""The offline base built on a machine without mmdebstrap: hookcage fetches its own (minutes).

``build_base_image`` runs with mmdebstrap absent from its search path and a
fresh cache, so it must fetch the ``mmdebstrap`` package with apt (private
state, this machine's sources and keys), unpack it into the cache and run it
from there with the host's perl. The base goes to a throwaway tag (never
``hookcage/base:...`` that other tests and the runner use), is checked (its
label, the packages apt installed, /usr merged with usr-is-merged as
debootstrap merges it, no build-only dpkg setting left) and removed. It is the one test
here that runs mmdebstrap: about 1-3 minutes.
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
from executor.provision.mmdebstrap import SBIN_DIRS, find_mmdebstrap
from executor.provision.recipe import PACKAGES_LABEL, base_inputs
from executor.sandbox.docker import MANAGED_LABEL

pytestmark = pytest.mark.docker
SESSION = {"hookcage.test-session": os.environ.get("HOOKCAGE_TEST_SESSION", "base-without-mmdebstrap")}


def path_without_mmdebstrap() -> str:
    """``$PATH`` (and the sbin folders) without the folders holding a system mmdebstrap: where the build looks.

    Only the search is narrowed: the build's own tools (apt-get, dpkg, perl, mount...) share
    /usr/bin with a system mmdebstrap, and a fetched copy is run by its path, not looked up.
    """
    folders = [d for d in f"{os.environ.get('PATH', '')}:{SBIN_DIRS}".split(":") if d]
    return ":".join(d for d in folders if not os.path.exists(os.path.join(d, "mmdebstrap")))


@pytest.fixture
def throwaway_tag(docker_api: Any) -> Iterator[str]:
    tag = f"hookcage-test/base:{secrets.token_hex(4)}"
    yield tag
    with contextlib.suppress(docker.errors.NotFound):
        docker_api.remove_image(tag, force=True)


def test_the_base_builds_with_a_fetched_mmdebstrap(
    docker_api: Any, throwaway_tag: str, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        message = "mmdebstrap needs root: run this test as root"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)
    if shutil.which("apt-get") is None or shutil.which("perl") is None:
        pytest.skip("no apt-get or perl on this machine: hookcage cannot fetch and run mmdebstrap here")
    search = path_without_mmdebstrap()
    assert shutil.which("mmdebstrap", path=search) is None, f"mmdebstrap is on {search}"
    cache = tmp_path / "cache"
    lines: list[str] = []

    image_id = build_base_image(
        docker_api, force=True, tag=throwaway_tag, cache=cache, search_path=search, log=lines.append
    )

    [copy] = [p for p in cache.iterdir() if p.name.startswith("mmdebstrap-")]
    assert any(line.startswith("no mmdebstrap on this machine: fetching it into") for line in lines), lines
    assert any(line.startswith("running ") and f" {copy}/usr/bin/mmdebstrap --mode=root --variant=minbase" in line
               for line in lines), lines
    assert f"--hook-dir={copy}/usr/share/mmdebstrap/hooks/merged-usr" in next(
        line for line in lines if line.startswith("running "))
    assert any(line.startswith("mmdebstrap: success in") for line in lines), lines
    assert lines[-1].startswith(f"imported {throwaway_tag} ({image_id[:19]}")
    info = docker_api.inspect_image(throwaway_tag)
    assert info["Id"] == image_id and info["Config"]["Labels"][PACKAGES_LABEL] == base_inputs()

    container = docker_api.create_container(
        throwaway_tag,
        ["sh", "-c", "dpkg-query -W -f '${db:Status-Status} ${Package}\\n' bash python3 npm jq usr-is-merged; "
                     "dpkg-query -W -f '${db:Status-Status}' usrmerge | grep -qx installed || echo no-usrmerge; "
                     "test ! -e /etc/dpkg/dpkg.cfg.d/99mmdebstrap && echo clean"],
        labels={MANAGED_LABEL: "true", **SESSION},
        network_disabled=True,
    )
    try:
        docker_api.start(container)
        assert docker_api.wait(container, timeout=60)["StatusCode"] == 0
        out = docker_api.logs(container, stderr=False).decode()
    finally:
        docker_api.remove_container(container, force=True)
    *packages, no_usrmerge, last = out.splitlines()
    assert sorted(packages) == [f"installed {p}" for p in ("bash", "jq", "npm", "python3", "usr-is-merged")]
    assert (no_usrmerge, last) == ("no-usrmerge", "clean")

    # The second build takes the cached copy: nothing is fetched.
    again: list[str] = []
    with find_mmdebstrap(search_path=search, cache=cache, log=again.append) as tool:
        assert tool.origin == str(copy)
    assert again == [f"using mmdebstrap {tool.version} from {copy} (fetched earlier; no download)"]
