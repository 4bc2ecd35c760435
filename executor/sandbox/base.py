"""The one interface every sandbox backend implements (no I/O here).

A backend takes a :class:`RunRequest` (the command, its stdin, where it runs,
its hook-specific environment, its deadline and its sandbox options) and
returns a :class:`RunResult`. Hook-level trouble (non-zero exit, timeout, OOM
kill, output past the cap) is a field of the result, never an exception; a
backend raises only :class:`~executor.errors.SandboxError` (or
``SandboxUnavailable``) when no result can be had at all.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType

from executor.core.options import SandboxOptions

DEFAULT_OUTPUT_CAP = 1024 * 1024
"""Bytes kept per stream (stdout, stderr); the rest is read and discarded."""

@dataclass(frozen=True)
class Bind:
    """A host path hookcage itself prepared, bound into the container at ``target``.

    Only the executor makes these (dependency caches, a persistent home, the
    agent's environment file), never a hook's config: configs ask for
    ``SandboxOptions.mounts``, which must stay inside the project.
    """

    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class RunRequest:
    """One hook command to run once.

    Attributes:
        command: the hook's shell command, run as ``/bin/sh -c COMMAND``.
        stdin: bytes written to the command's stdin, then end-of-input.
        cwd: the working directory (the payload's ``cwd``).
        env: the hook-specific environment (project-dir variables and the
            hook's literal ``env``). Each backend adds its own base (PATH,
            HOME, LANG) and nothing else: never the caller's environment.
        timeout: seconds before the run is killed and marked ``timed_out``.
        project_dir: the project root (mounted into containers).
        transcript_path: the agent's transcript file, if any.
        transcript_source: the file bound there instead, when a caller's path
            was judged and resolved (the service's remote mode): its real
            path, bound only while it still is one (no symbolic link on the way).
        transcript_folder: a host folder bound read-only over the transcript's
            folder instead of the transcript itself (a warm pool's: a spare is
            made before its session is known, and the session's transcript is
            linked into this folder when the job comes; see
            :func:`executor.sandbox.poolkeys.transcript_folder_target`).
        options: the hook's sandbox options.
        labels: identifying labels (session, hook id) for backends that tag.
        output_cap: bytes kept per stream; past it the result is truncated.
        overlays: read-only files laid over workspace paths (container path
            -> host path of a staged copy): the exact bytes that were
            reviewed, whatever the workspace holds by the time the hook runs.
        binds: host paths hookcage prepared (see :class:`Bind`).
        warm: whether a pooled container may serve the run; False for runs
            whose binds are made for that run alone (a pool could not have
            created a container with them ahead of time).
    """

    command: str
    stdin: bytes = b""
    cwd: str = "/"
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 60.0
    project_dir: str = "/"
    transcript_path: str | None = None
    transcript_source: str | None = None
    transcript_folder: str | None = None
    options: SandboxOptions = field(default_factory=SandboxOptions)
    labels: Mapping[str, str] = field(default_factory=dict)
    output_cap: int = DEFAULT_OUTPUT_CAP
    overlays: Mapping[str, str] = field(default_factory=dict)
    binds: tuple[Bind, ...] = ()
    warm: bool = True


@dataclass(frozen=True)
class RunResult:
    """What came back from one run.

    ``exit_code`` is ``None`` only when the run was killed at its timeout;
    death by signal N is ``128 + N``, as a shell reports it.
    """

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    duration: float = 0.0
    timed_out: bool = False
    oom_killed: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def truncated(self) -> bool:
        """True when either stream went past the output cap."""
        return self.stdout_truncated or self.stderr_truncated


class Sandbox(abc.ABC):
    """A place to run hook commands. Use as a context manager or call close()."""

    name: str = "sandbox"

    @abc.abstractmethod
    def run(self, request: RunRequest) -> RunResult:
        """Run one command to completion (or its deadline) and return the result.

        Raises:
            SandboxUnavailable: the backend cannot be used at all.
            SandboxError: this run could not be attempted.
        """

    def image_identity(self, image: str | None) -> str:
        """What ``image`` (``None``: the backend's default) is, beyond its tag, e.g. a digest.

        Trust covers it, so a re-tagged image needs review again.
        """
        return image or self.name

    def runtime(self) -> str | None:
        """The OCI runtime this backend's containers get, resolved (``runsc``, ``runc``...); None: no container.

        Trust covers what it means (:func:`executor.sandbox.runtimes.isolation`): a hook
        reviewed under gVisor does not run under a shared kernel without a new review.
        """
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release what the backend holds (connections, pooled containers)."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
