"""One hook's bytes: what it reads on stdin, and what its exit code, stdout and stderr mean.

:func:`build_stdin` writes the payload every hook of an event reads;
:func:`parse_outcome` reads one hook's run (:class:`HookRun`) into a
:class:`~executor.core.protocol.values.HookOutcome`, with the findings
for exits that are not verdicts (a program that could not be run, the
shell's own error) and the advice they carry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from executor.core.events import EventSpec
from executor.core.protocol.answers import parse_json, parse_path
from executor.core.protocol.values import NAME_CAP, HookOutcome, SandboxFacts, dumps
from executor.core.text import cap_text, decode, first_line, one_line, sanitize


def build_stdin(event: EventSpec, payload: Mapping[str, Any], *, name: str | None = None) -> bytes:
    """The bytes every hook of this event reads on stdin: the payload passed through.

    Args:
        name: the event's name in the hook's dialect (the canonical name by default).
    """
    data = dict(payload)
    data["hook_event_name"] = name or event.name
    return dumps(data).encode("utf-8")


_KEEP: Any = object()


@dataclass(frozen=True)
class HookRun:
    """One hook's run, as its answer is read: what it printed and how it ended.

    What a dialect's ``parse_answer`` reads (:mod:`executor.dialects.base`);
    :meth:`outcome` is :func:`parse_outcome` of it, any of the exit code,
    stdout and stderr replaced (a dialect that reads them its own way).
    """

    hook: str
    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    oom_killed: bool = False
    timeout: float | None = None
    hook_id: str = ""
    sandbox: SandboxFacts | None = None
    image: str | None = None
    project_dir: str | None = None
    stdout_truncated: bool = False
    """hookcage cut stdout at its cap: the end the agent would have read is missing."""

    @property
    def finished(self) -> bool:
        """It exited by itself (not killed at its timeout or memory limit)."""
        return not (self.timed_out or self.oom_killed) and self.exit_code is not None

    def outcome(self, event: EventSpec, *, exit_code: int | None = _KEEP, stdout: bytes = _KEEP,
                stderr: bytes = _KEEP) -> HookOutcome:
        """Claude Code's reading of this run (:func:`parse_outcome`), with the values given replaced."""
        return parse_outcome(
            event, self.hook, self.exit_code if exit_code is _KEEP else exit_code,
            self.stdout if stdout is _KEEP else stdout, self.stderr if stderr is _KEEP else stderr,
            timed_out=self.timed_out, oom_killed=self.oom_killed, timeout=self.timeout,
            hook_id=self.hook_id, sandbox=self.sandbox, image=self.image, project_dir=self.project_dir,
        )


def parse_outcome(
    event: EventSpec,
    hook: str,
    exit_code: int | None,
    stdout: bytes,
    stderr: bytes,
    *,
    timed_out: bool = False,
    oom_killed: bool = False,
    timeout: float | None = None,
    hook_id: str = "",
    sandbox: SandboxFacts | None = None,
    image: str | None = None,
    project_dir: str | None = None,
) -> HookOutcome:
    """Parse one hook's exit status and output into an outcome.

    Args:
        event: the event the hook ran for.
        hook: the hook's name for messages.
        exit_code: its exit code, ``None`` when it was killed.
        stdout: its raw stdout (possibly truncated).
        stderr: its raw stderr.
        timed_out: it was killed at its timeout.
        oom_killed: it was killed for going past its memory limit.
        timeout: the timeout, for the message.
        sandbox: where it ran (backend, workspace, network), for the advice
            an error carries; ``None`` gives no sandbox advice.
        image: the image it ran in (``None``: the default image).
        project_dir: the project root, to tell a write to the project from
            one elsewhere.
    """
    base = HookOutcome(hook=hook, exit_code=exit_code, hook_id=hook_id)
    err_text = sanitize(stderr).strip()
    if timed_out:
        after = f" after {timeout:g} s" if timeout is not None else ""
        return replace(base, status="error", error=f"timed out{after}")
    if oom_killed:
        return replace(base, status="error", error="killed: out of memory (memory limit reached)")
    if exit_code is None:
        return replace(base, status="error", error="killed before it answered")
    place = _Place(sandbox, image, project_dir)
    tail = _tail_lines(stderr)
    if exit_code == 2:
        shell_error = _shell_own_error(tail, place)
        if shell_error is not None:
            # The shell's own failure (a redirection, a syntax error), not the hook's verdict.
            return replace(base, status="error", error=shell_error)
        if event.can_block:
            return replace(base, status="block", reason=err_text or f"blocked by hook {one_line(hook, NAME_CAP)}")
        # Events that cannot block show the reason to the user instead.
        return replace(base, system_message=err_text or None, notes=_unheeded_exit2(event))
    if exit_code != 0:
        return replace(base, status="error", error=_exit_error(exit_code, err_text, tail, place))
    text = decode(stdout)
    if text.lstrip().startswith("{"):
        return parse_json(event, base, text)
    if event.answers_path:
        return parse_path(base, text)
    plain = sanitize(stdout).strip()
    if plain and event.plain_text_context:
        return replace(base, additional_context=plain)
    return base


def _unheeded_exit2(event: EventSpec) -> tuple[str, ...]:
    """The note for an exit 2 on an event that cannot block (none where stderr to the user is all it does)."""
    if event.exit2 == "not_honoured":
        return (f"exit 2 is not honoured on {event.name}, so it is not a deny "
                "(only a JSON decision.behavior allows or denies)",)
    if event.exit2 == "ignored":
        return (f"exit 2 has no effect on {event.name} (Claude Code ignores it there)",)
    return ()


# -- findings: exits that are not verdicts ---------------------------------------------------

_TAIL_BYTES = 16 * 1024
"""Bytes at the end of stderr searched for the shell's own last words."""
_TAIL_LINES = 20
_WHO = r"[^\s:][^:]*"
"""Who speaks first on a shell's error line: ``sh``, ``/bin/sh``, ``bash``, ``./hook.sh``, ..."""
_LINE = r"(?:\d+: |(?:-c: )?line \d+: )?"
"""Where: dash says ``1: ``, bash ``line 1: `` (``-c: line 1: `` for syntax errors)."""
_ENV_MISSING = re.compile(r"^(?:/usr/bin/|/bin/)?env: ['\u2018\"]?(?P<prog>[^'\u2019\"]+?)['\u2019\"]?: No such file or directory$")
_NOT_FOUND = re.compile(rf"^{_WHO}: {_LINE}(?P<prog>[^:]+): (?:command not found|not found|No such file or directory)$")
_CANNOT_EXEC = re.compile(
    rf"^{_WHO}: {_LINE}(?P<prog>[^:]+): (?:cannot execute(?: binary file)?: )?"
    r"(?P<why>Permission denied|Exec format error|Is a directory)$"
)
_REDIRECT = re.compile(
    rf"^{_WHO}: \d+: cannot (?P<op>create|open) (?P<path>.+): (?P<why>[A-Z][a-z-]*(?: [a-z-]+)*)$"
)
"""dash's failed redirection (exit 2): ``sh: 1: cannot create /repo/x: Read-only file system``."""
_READ_ONLY = frozenset({"Read-only file system", "Permission denied"})
"""How a write into a read-only workspace fails: EROFS (runc: the host kernel), EACCES (gVisor's kernel)."""
_DASH_SYNTAX = re.compile(rf"^{_WHO}: \d+: Syntax error: .+$")
_BASH_SYNTAX = re.compile(
    rf"^(?P<who>{_WHO}): (?:-c: )?line \d+: syntax error"
    r"(?: near unexpected token `.*'| near `.*'|: unexpected end of file(?: from `.*' command on line \d+)?)$"
)
_BASH_SYNTAX_SOURCE = re.compile(rf"^(?P<who>{_WHO}): (?:-c: )?line \d+: `.*'$")
"""bash's second line after a syntax error: the offending source line, quoted."""
_NETWORK = re.compile(
    r"Temporary failure in name resolution|Could not resolve host|Network is unreachable"
    r"|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)"
)
HOME_ADVICE = (
    "the sandbox's home is throw-away and /tmp is the only writable place; "
    'a persistent home: sandbox.home: "persistent" (see docs/sandbox.md)'
)


@dataclass(frozen=True)
class _Place:
    sandbox: SandboxFacts | None
    image: str | None
    project_dir: str | None

    @property
    def container(self) -> bool:
        """The hook ran in a container (advice about images and options applies)."""
        return self.sandbox is not None and self.sandbox.backend != "host"

    @property
    def image_name(self) -> str:
        return f"the image {self.image}" if self.image else "the default image"

    def in_project(self, path: str) -> bool:
        if not path.startswith("/"):
            return True  # relative to the hook's cwd, which is inside the workspace
        root = (self.project_dir or "").rstrip("/")
        return bool(root) and (path == root or path.startswith(root + "/"))


def _tail_lines(stderr: bytes) -> list[str]:
    """The last non-blank lines of stderr (sanitised, stripped), oldest first."""
    text = sanitize(stderr[-_TAIL_BYTES:], _TAIL_BYTES)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-_TAIL_LINES:]


def _name(text: str) -> str:
    return cap_text(text.strip(), NAME_CAP)


def _shell_own_error(tail: Sequence[str], place: _Place) -> str | None:
    """The finding when an exit 2 is the shell's own error, or None when it is the hook's verdict.

    Only the LAST non-blank stderr line counts, and only in the exact forms
    dash and bash print: a guard that prints its own reason last still blocks.
    """
    if not tail:
        return None
    last = tail[-1]
    redirect = _REDIRECT.match(last)
    if redirect is not None:
        path, why = _name(redirect["path"]), redirect["why"]
        verb = "write" if redirect["op"] == "create" else "read"
        head = f"exited 2 because the shell could not {verb} {path} ({why}), not as a verdict"
        if not place.container or verb == "read":
            return head
        assert place.sandbox is not None
        if place.in_project(path):
            # gVisor refuses a write to a read-only bind with EACCES where the host kernel says EROFS.
            if why in _READ_ONLY and place.sandbox.workspace != "rw":
                return f'{head}: the project is read-only in the sandbox; to let this hook write it: sandbox.workspace: "rw"'
            return head
        return f"{head}: {HOME_ADVICE}"
    if _DASH_SYNTAX.match(last) or _BASH_SYNTAX.match(last):
        return f"exited 2 on the shell's syntax error, not as a verdict: {last}"
    source = _BASH_SYNTAX_SOURCE.match(last)
    if source is not None and len(tail) >= 2:
        before = _BASH_SYNTAX.match(tail[-2])
        if before is not None and before["who"] == source["who"]:
            return f"exited 2 on the shell's syntax error, not as a verdict: {tail[-2]}"
    return None


def _telling_line(err_text: str, tail: Sequence[str]) -> str:
    """The stderr line that says what went wrong: the first, or a traceback's last
    (Python's ``Traceback (most recent call last):`` says nothing; its end says why)."""
    line = first_line(err_text)
    if line.startswith("Traceback (most recent call last)") and tail:
        return tail[-1]
    return line


def _exit_error(code: int, err_text: str, tail: Sequence[str], place: _Place) -> str:
    """The error of a hook that exited neither 0 nor 2: what it said, and what it means."""
    offline = place.container and place.sandbox is not None and place.sandbox.network == "none"
    refused = [line.strip() for line in err_text.splitlines() if _NETWORK.search(line)] if offline else []
    finding = _cannot_run(code, tail, place) if code in (126, 127) else None
    if finding is None:
        line = refused[0] if refused else _telling_line(err_text, tail)
        what = {126: " (could not execute)", 127: " (command not found)"}.get(code, "")
        finding = f"exited {code}{what}" + (f": {line}" if line else "")
    if refused:
        finding += "; no network in the sandbox (sandbox.network)"
    return finding


def _cannot_run(code: int, tail: Sequence[str], place: _Place) -> str | None:
    """The finding for an exit 126/127 whose stderr names the program, or None."""
    for line in reversed(tail):
        missing = _ENV_MISSING.match(line) or _NOT_FOUND.match(line)
        if missing is not None and code == 127:
            prog = _name(missing["prog"])
            if "/" in prog:
                where = "in the sandbox" if place.container else "on this machine"
                return f"exited 127: `{prog}` does not exist {where}"
            if place.container:
                return (f"exited 127: {place.image_name} has no `{prog}`: use an image that has it "
                        "(sandbox.image) or see docs/recipes.md")
            return f"exited 127: `{prog}` is not installed (not on PATH)"
        cannot = _CANNOT_EXEC.match(line)
        if cannot is not None and code == 126:
            prog, why = _name(cannot["prog"]), cannot["why"]
            if why == "Permission denied":
                hint = f"give it the execute bit or run it through its interpreter (`sh {prog}`)"
                if place.container and prog.startswith("/tmp/"):
                    hint += "; /tmp in the sandbox cannot hold programs (noexec)"
                return f"exited 126: `{prog}` cannot be executed (Permission denied): {hint}"
            if why == "Exec format error":
                return (f"exited 126: `{prog}` cannot be executed (Exec format error): not a program "
                        "for this machine, or a script without a #! line")
            return f"exited 126: `{prog}` is a directory"
    return None
