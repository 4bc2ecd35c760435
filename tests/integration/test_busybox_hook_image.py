"""A hook whose ``sandbox.image`` is a user's image with nothing but busybox's ``/bin/sh``: cold and warm.

The runner image is hookcage's default, not a requirement: any image with a
``/bin/sh`` runs hooks. The image here is built on this machine from the
static busybox (Debian's ``busybox-static``; no registry, no Debian base) and
removed at the end. The same hook answers the same in-process (cold), from
the daemon's first run (cold) and from its warm pool.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_support import Daemon
from support import agent_session

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def busybox_only_image(docker_api: Any) -> Iterator[str]:
    """An image holding a static busybox and its applet links, nothing else."""
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.fail("no busybox binary to build the image from: apt-get install busybox-static")
    tag = f"hookcage-test/busybox-hook:{uuid.uuid4().hex[:8]}"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        tar.add(busybox, arcname="busybox")
        dockerfile = (
            b"FROM scratch\nCOPY busybox /bin/busybox\n"
            b'RUN ["/bin/busybox", "mkdir", "-p", "/usr/bin", "/sbin", "/usr/sbin", "/tmp"]\n'
            b'RUN ["/bin/busybox", "--install", "-s"]\n'
        )
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    context.seek(0)
    log = list(docker_api.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                                network_mode="none", decode=True))
    errors = [entry for entry in log if "error" in entry]
    if errors:
        pytest.fail(f"could not build the busybox image: {errors}")
    yield tag
    docker_api.remove_image(tag, force=True)


@pytest.fixture
def daemon(tmp_path: Path, workspace: Path) -> Iterator[Daemon]:
    (tmp_path / "home").mkdir()
    d = Daemon(tmp_path / "home", tmp_path / "managed", workspace, tmp_path / "daemon.log")
    yield d
    d.stop()


def test_a_busybox_only_image_runs_a_hook_cold_and_warm(daemon: Daemon, busybox_only_image: str) -> None:
    hook = {
        "type": "command",
        "command": 'read -r line; echo "sh is $(readlink /bin/sh), no bash: $(command -v bash || echo none), '
                   'cwd $(pwd), $(cat README.md)"',
        "sandbox": {"image": busybox_only_image},
    }
    daemon.user_hooks({"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}})
    daemon.start()
    payload = json.dumps({"session_id": agent_session("busybox"), "cwd": str(daemon.project),
                          "prompt": "hi"}).encode() + b"\n"
    in_process = daemon.dispatch("UserPromptSubmit", payload, daemon=False)
    code, stdout, stderr = in_process
    assert (code, stderr) == (0, "")
    assert json.loads(stdout)["hookSpecificOutput"]["additionalContext"] == (
        f"sh is /bin/busybox, no bash: none, cwd {daemon.project}, hello from the workspace")

    assert daemon.dispatch("UserPromptSubmit", payload, daemon=True) == in_process  # cold
    daemon.wait_ready(1)
    assert daemon.dispatch("UserPromptSubmit", payload, daemon=True) == in_process  # warm
    stats = daemon.pool()
    assert (stats["cold"], stats["warm"], stats["fallbacks"]) == (1, 1, 0)
    first, cold, warm = daemon.log_lines()
    assert first == cold == warm and first["exit_code"] == 0
