"""The allow-list's catalogue of programs keeps up with the runner image (issue 11).

Every executable the runner image ships must be classified in
:mod:`executor.gates.allowlist.programs`: as a wrapper (runs the command in its arguments), an
interpreter, a runner (runs programs through options, program text or the
files it reads) or a plain program. A new package in the image that brings a
new program fails this test until someone decides which it is, so a `*`
entry can never silently allow a program-runner the list does not know.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from executor.gates.allowlist import programs

pytestmark = pytest.mark.docker

LIST = "for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do ls -1 $d 2>/dev/null; done | sort -u"


def test_every_executable_in_the_runner_image_is_classified(runner_image: str) -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("the docker CLI is not installed")
    proc = subprocess.run([docker, "run", "--rm", "--network", "none", "--entrypoint", "sh", runner_image, "-c", LIST],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    names = [name for name in proc.stdout.split() if name]
    assert len(names) > 100, names  # the listing worked
    unknown = [name for name in names if programs.kind(name) is None]
    assert not unknown, (f"programs in {runner_image} that executor/gates/allowlist/programs.py does not classify "
                         f"(wrapper, interpreter, runner or plain): {unknown}")
    for name in ("sh", "bash", "env", "setarch", "prlimit", "setpriv", "ld.so", "rbash", "xargs"):
        if name in names:
            assert programs.kind(name) == "wrapper", name
