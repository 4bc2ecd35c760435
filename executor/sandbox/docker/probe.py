"""A tiny network-less container of the runner image under a runtime: what ``doctor`` and ``setup runsc`` ask.

:func:`lists_files` finds the statx refusal of an old gVisor (:data:`STATX_BUG`)
by running coreutils' ``ls -l /``; :func:`probe_run` runs any one command.
"""

from __future__ import annotations

import os
from typing import Any

from executor.core.options import SandboxOptions
from executor.sandbox import orphans
from executor.sandbox.base import RunRequest, RunResult
from executor.sandbox.docker.backend import DockerSandbox

__all__ = ["STATX_BUG", "lists_files", "probe_run"]

STATX_BUG = ("this runsc's kernel refuses statx with AT_NO_AUTOMOUNT (gVisor before 2023, e.g. Debian's "
             "20221219), so coreutils' ls and stat fail in hooks with 'Invalid argument' (python, node, find, "
             "test -f work); hookcage's runner image works around it with a statx shim when built on a machine with a C "
             "compiler (apt-get install gcc; hookcage image build); a newer runsc from gVisor's own apt repository "
             "fixes it, or set runtime = \"runc\"")
"""What :func:`lists_files` finding a failure means, for ``setup runsc`` and ``doctor``."""


def probe_run(client: Any, runtime: str, command: str) -> RunResult:
    """``command`` in a tiny network-less container of the runner image under ``runtime``; its RunResult.

    Raises:
        SandboxUnavailable, SandboxError: the engine, the image or the runtime is missing.
    """
    labels = {orphans.OWNER_LABEL: orphans.owner_value(), "hookcage.probe": "runtime"}
    session = os.environ.get("HOOKCAGE_TEST_SESSION")
    if session:  # the test suite counts its own containers by this label
        labels["hookcage.test-session"] = session
    with DockerSandbox(runtime=runtime, client=client, reap_on_start=False, memory="128m", path_map={}) as sandbox:
        return sandbox.run(RunRequest(command=command, cwd="/tmp", project_dir="/", timeout=60,
                                      options=SandboxOptions(workspace="none"), labels=labels, warm=False))


def lists_files(client: Any, runtime: str) -> str:
    """``""`` when coreutils' ``ls -l /`` works under ``runtime``, else its last line of error."""
    result = probe_run(client, runtime, "ls -l / >/dev/null")
    if result.exit_code == 0:
        return ""
    err = result.stderr.decode("utf-8", "replace").strip().splitlines()
    return err[-1][:200] if err else f"ls -l / exited {result.exit_code}"
