"""The hook protocol (Claude Code dialect), with no I/O.

How this works:

1. :func:`build_stdin` turns the agent's payload into the bytes every matching
   hook reads on stdin (the payload passed through, ``hook_event_name`` set).
2. :func:`parse_outcome` turns one hook's exit code, stdout and stderr into a
   :class:`HookOutcome`: 0 = success (stdout is JSON when its first non-blank
   character is ``{``, else plain text), 2 = block with stderr as the reason
   (on events that can block; elsewhere it is shown to the user), anything
   else = a non-blocking error. Timeouts and OOM kills are errors too: data,
   never exceptions. Two exits are findings rather than verdicts: 126/127
   (the command could not be run: the error names the program and how to
   get it) and an exit 2 whose last stderr line is the shell's own error (a
   failed redirection, a syntax error: the error says what the sandbox
   refused and which option allows it). :func:`apply_on_error` turns an
   error into a denial for hooks whose ``on_error`` is ``deny``.
3. :func:`fold` combines the outcomes of every hook of one event, in config
   order, into one :class:`Verdict`: deny > defer > ask > allow; any block
   blocks; ``continue: false`` wins; contexts and system messages
   concatenate; two different input rewrites become ``ask`` naming both.
4. The agent's dialect (:meth:`executor.dialects.base.Dialect.render`) turns
   the verdict into hookcage's own answer to the agent, in its words; for
   Claude Code: exit 0 with the folded JSON on stdout
   (``{}`` when there is nothing to say); a block rides in that JSON where
   the agent reads it there (``permissionDecision: "deny"``,
   ``decision.behavior: "deny"`` or ``decision: "block"``), else it is exit 2
   with the reason on stderr. :func:`executor.dialects.resolve_dialect`
   picks the dialect from ``--agent`` or recognises it from the payload.

Every string that reaches the agent passes :func:`executor.core.text.sanitize`
(terminal escapes, controls, bidi and invisible characters shown as visible
escapes such as ``\\x1b``, nothing dropped) and is capped at 10,000
characters; the dialect's ``render`` applies it once more to whatever it writes, so no
path around the parser reaches the agent raw. hookcage's own lines come
first in the system message, one line each, secrets redacted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from executor.core.events import EventSpec
from executor.core.text import MESSAGE_CAP, cap_text, decode, first_line, one_line, redact, sanitize

Decision = Literal["allow", "deny", "ask", "defer"]
Status = Literal["ok", "block", "error"]

DECISION_RANK: Mapping[str, int] = {"allow": 0, "ask": 1, "defer": 2, "deny": 3}
_LEGACY_DECISIONS: Mapping[str, Decision] = {"approve": "allow", "block": "deny"}


class _Unset:
    """Marks "the hook did not rewrite the tool output" (``None`` is a valid rewrite)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class HookOutcome:
    """What one hook said, parsed. Strings are already sanitised and capped.

    Attributes:
        hook: how the hook is named in messages (its name or command).
        status: ``ok``, ``block`` (exit 2 or ``decision: "block"``) or
            ``error`` (it could not answer: crash, timeout, garbage).
        decision: a permission decision, on events that carry one.
        reason: why it blocked, or its ``permissionDecisionReason``.
        error: what went wrong, for ``status == "error"``.
        notes: parts of the answer that were ignored, and why.
        updated_output: the rewritten tool output, or ``UNSET``.
        worktree_path: the path a WorktreeCreate hook answered (the last
            non-empty line of its stdout, or ``hookSpecificOutput.worktreePath``).
    """

    hook: str
    status: Status = "ok"
    exit_code: int | None = 0
    decision: Decision | None = None
    reason: str | None = None
    continue_: bool = True
    stop_reason: str | None = None
    suppress_output: bool = False
    system_message: str | None = None
    additional_context: str | None = None
    updated_input: dict[str, Any] | None = None
    updated_output: Any = UNSET
    error: str | None = None
    notes: tuple[str, ...] = ()
    hook_id: str = ""
    worktree_path: str | None = None


@dataclass(frozen=True)
class Verdict:
    """The folded answer of every hook that ran for one event.

    ``worktree_path`` is WorktreeCreate's answer: the one path its hooks
    printed, ``None`` when the creation fails (then ``blocked`` is set and
    ``reason`` says why); :func:`worktree_answer` turns it into the answer.
    """

    event: str
    outcomes: tuple[HookOutcome, ...] = ()
    blocked: bool = False
    reason: str | None = None
    decision: Decision | None = None
    decision_reason: str | None = None
    continue_: bool = True
    stop_reason: str | None = None
    suppress_output: bool = False
    system_message: str | None = None
    additional_context: str | None = None
    updated_input: dict[str, Any] | None = None
    updated_output: Any = UNSET
    notes: tuple[str, ...] = field(default=())
    worktree_path: str | None = None

    @property
    def blocks(self) -> bool:
        """The agent must not go on with what it was doing (block or deny)."""
        return self.continue_ and (self.blocked or self.decision == "deny")


@dataclass(frozen=True)
class AgentAnswer:
    """hookcage's own answer: the exit code and the two streams."""

    exit_code: int
    stdout: str
    stderr: str


def build_stdin(event: EventSpec, payload: Mapping[str, Any], *, name: str | None = None) -> bytes:
    """The bytes every hook of this event reads on stdin: the payload passed through.

    Args:
        name: the event's name in the hook's dialect (the canonical name by default).
    """
    data = dict(payload)
    data["hook_event_name"] = name or event.name
    return _dumps(data).encode("utf-8")


def _dumps(value: Any) -> str:
    """JSON text that can always be written as UTF-8.

    A lone surrogate (``"\\ud800"`` in the JSON it came from) cannot be encoded
    as UTF-8; such text falls back to ASCII escapes, which keep it exactly.
    """
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


MAX_JSON_DEPTH = 100
"""Nesting a hook's JSON answer may have: deeper could not be re-encoded on a deeper stack."""


def _depth(value: Any) -> int:
    """How deeply objects and arrays nest in ``value`` (iteratively: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON: passed on, they would break the agent's parser.
    raise ValueError(f"{name} is not valid JSON")


class SandboxFacts(Protocol):
    """Where a hook ran, as far as its error messages need (``SandboxOptions`` fits)."""

    @property
    def backend(self) -> str: ...

    @property
    def workspace(self) -> str: ...

    @property
    def network(self) -> str: ...


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
            return replace(base, status="block", reason=err_text or f"blocked by hook {one_line(hook, _NAME_CAP)}")
        # Events that cannot block show the reason to the user instead.
        return replace(base, system_message=err_text or None, notes=_unheeded_exit2(event))
    if exit_code != 0:
        return replace(base, status="error", error=_exit_error(exit_code, err_text, tail, place))
    text = decode(stdout)
    if text.lstrip().startswith("{"):
        return _parse_json(event, base, text)
    if event.answers_path:
        return _parse_path(base, text)
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


PATH_CAP = 4096
"""Characters of a worktree path a hook may answer."""
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
"""Terminal escapes Claude Code strips from a WorktreeCreate hook's stdout before reading the path."""
_ABSOLUTE = re.compile(r"/|[A-Za-z]:[\\/]|\\\\")


def _path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a worktree path, or None."""
    shown = one_line(path, _NAME_CAP)
    if len(path) > PATH_CAP:
        return f"a worktree path longer than {PATH_CAP} characters ({shown})"
    if one_line(path, None) != path:
        return f"a worktree path holding control or invisible characters ({shown})"
    if not _ABSOLUTE.match(path):
        return f"a worktree path that is not absolute ({shown})"
    return None


def _parse_path(base: HookOutcome, text: str) -> HookOutcome:
    """WorktreeCreate's plain answer: the last non-empty line of stdout, terminal escapes stripped.

    No line at all is no answer (the fold fails the creation when no hook answered).
    """
    lines = [line.strip() for line in _ANSI.sub("", text).splitlines() if line.strip()]
    if not lines:
        return base
    problem = _path_problem(lines[-1])
    if problem is not None:
        return replace(base, status="error", error=f"printed {problem}")
    return replace(base, worktree_path=lines[-1])


# -- findings: exits that are not verdicts ---------------------------------------------------

_TAIL_BYTES = 16 * 1024
"""Bytes at the end of stderr searched for the shell's own last words."""
_TAIL_LINES = 20
_NAME_CAP = 200
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
    return cap_text(text.strip(), _NAME_CAP)


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


def _parse_json(event: EventSpec, base: HookOutcome, text: str) -> HookOutcome:
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return replace(base, status="error", error=f"stdout starts with '{{' but is not valid JSON ({exc.msg} at line {exc.lineno})")
    except (ValueError, RecursionError) as exc:
        # NaN/Infinity, integers past Python's digit limit, nesting past the recursion limit.
        msg = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return replace(base, status="error", error=f"stdout starts with '{{' but is not valid JSON ({sanitize(msg, 200)})")
    if not isinstance(data, dict):
        return replace(base, status="error", error="stdout JSON is not an object")
    if _depth(data) > MAX_JSON_DEPTH:
        return replace(base, status="error", error=f"stdout JSON nests deeper than {MAX_JSON_DEPTH} levels")
    notes: list[str] = []
    fields: dict[str, Any] = {}

    def text_field(source: Mapping[str, Any], key: str) -> str | None:
        value = source.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            notes.append(f"{key!r} must be a string; ignored")
            return None
        return sanitize(value) or None

    def bool_field(key: str) -> bool | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            notes.append(f"{key!r} must be true or false; ignored")
            return None
        return value

    cont = bool_field("continue")
    if cont is False:
        fields["continue_"] = False
        fields["stop_reason"] = text_field(data, "stopReason")
    if bool_field("suppressOutput"):
        fields["suppress_output"] = True
    fields["system_message"] = text_field(data, "systemMessage")
    reason = text_field(data, "reason")

    decision = data.get("decision")
    if decision is not None:
        if decision == "block":
            if event.json_blocks:
                fields["status"] = "block"
                fields["reason"] = reason or f"blocked by hook {one_line(base.hook, _NAME_CAP)}"
            else:
                notes.append(f"'decision: block' has no effect on {event.name}; ignored")
        elif decision == "approve" and event.permission:
            fields["decision"] = "allow"
            fields["reason"] = reason
        elif not (isinstance(decision, dict) and event.name == "PermissionRequest"):
            notes.append(f"unknown decision {decision!r}; ignored")

    specific = data.get("hookSpecificOutput")
    if specific is not None:
        if not isinstance(specific, dict):
            notes.append("'hookSpecificOutput' must be an object; ignored")
        elif specific.get("hookEventName", event.name) != event.name:
            notes.append(
                f"hookSpecificOutput is for {specific.get('hookEventName')!r}, not {event.name}; ignored"
            )
        else:
            _parse_specific(event, specific, fields, notes, text_field)
    if isinstance(decision, dict) and event.name == "PermissionRequest":
        _parse_permission_request(decision, fields, notes, text_field)
    # None is a valid output rewrite (UNSET marks "no rewrite"); elsewhere None means unset.
    fields = {k: v for k, v in fields.items() if v is not None or k == "updated_output"}
    return replace(base, notes=tuple(notes), **fields)


def _parse_specific(
    event: EventSpec,
    specific: Mapping[str, Any],
    fields: dict[str, Any],
    notes: list[str],
    text_field: Any,
) -> None:
    context = text_field(specific, "additionalContext")
    if context is not None:
        fields["additional_context"] = context
    if event.permission:
        raw = specific.get("permissionDecision")
        if raw is not None:
            decision = _LEGACY_DECISIONS.get(raw, raw) if isinstance(raw, str) else None
            if decision in DECISION_RANK:
                fields["decision"] = decision
                fields["reason"] = text_field(specific, "permissionDecisionReason")
            else:
                notes.append(f"unknown permissionDecision {raw!r}; ignored")
        if isinstance(specific.get("decision"), dict) and event.name == "PermissionRequest":
            _parse_permission_request(specific["decision"], fields, notes, text_field)
    elif specific.get("permissionDecision") is not None:
        notes.append(f"'permissionDecision' has no effect on {event.name}; ignored")
    for key in ("updatedInput", "modifiedInput"):
        if key in specific:
            value = specific[key]
            if not event.rewrites_input:
                notes.append(f"{key!r} has no effect on {event.name}; ignored")
            elif not isinstance(value, dict):
                notes.append(f"{key!r} must be an object; ignored")
            elif "updated_input" in fields and fields["updated_input"] != value:
                notes.append("both 'updatedInput' and 'modifiedInput' given and they differ; both ignored")
                fields["updated_input"] = None
            else:
                fields["updated_input"] = value
    for key in ("updatedToolOutput", "updatedMCPToolOutput"):
        if key in specific:
            if event.rewrites_output:
                fields["updated_output"] = specific[key]
            else:
                notes.append(f"{key!r} has no effect on {event.name}; ignored")
    if "worktreePath" in specific:
        path = specific["worktreePath"]
        if not event.answers_path:
            notes.append(f"'worktreePath' has no effect on {event.name}; ignored")
        elif not isinstance(path, str):
            notes.append("'worktreePath' must be a string; ignored")
        elif (problem := _path_problem(path)) is not None:
            notes.append(f"'worktreePath' is {problem}; ignored")
        else:
            fields["worktree_path"] = path


def _parse_permission_request(
    decision: Mapping[str, Any], fields: dict[str, Any], notes: list[str], text_field: Any
) -> None:
    behavior = decision.get("behavior")
    if behavior in ("allow", "deny", "ask"):
        fields["decision"] = behavior
        fields["reason"] = text_field(decision, "message")
    else:
        notes.append(f"unknown decision behavior {behavior!r}; ignored")
    if isinstance(decision.get("updatedInput"), dict):
        fields["updated_input"] = decision["updatedInput"]
    elif decision.get("updatedInput") is not None:
        notes.append("'decision.updatedInput' must be an object; ignored")


def apply_on_error(event: EventSpec, outcome: HookOutcome, on_error: str) -> HookOutcome:
    """Turn a failed hook into a denial when its ``on_error`` is ``deny``."""
    if outcome.status != "error" or on_error != "deny":
        return outcome
    why = f"hook {one_line(outcome.hook, _NAME_CAP)} could not answer ({outcome.error}) and its on_error is deny"
    if event.permission:
        return replace(outcome, status="ok", decision="deny", reason=why)
    if event.can_block:
        return replace(outcome, status="block", reason=why)
    return outcome


CAPABILITIES: Mapping[str, str] = {
    "approve": "pre-approve the tool call (permissionDecision: allow)",
    "rewrite_input": "rewrite the tool input (updatedInput)",
    "rewrite_output": "rewrite the tool output (updatedToolOutput)",
    "env_file": "set environment variables for the agent's later commands (CLAUDE_ENV_FILE)",
}
"""What a hook's answer may do beyond deny/block/ask/context, granted per hook at trust time."""


def restrict(
    outcome: HookOutcome, granted: frozenset[str], *, wrote_env_file: bool = False
) -> tuple[HookOutcome, tuple[str, ...]]:
    """Drop the parts of an answer that need a capability the hook was not granted.

    Args:
        outcome: the hook's parsed answer.
        granted: the capabilities its trust record grants.
        wrote_env_file: it wrote to the agent's environment file (``CLAUDE_ENV_FILE``),
            which the caller applies only when ``env_file`` is not among the dropped.

    Returns:
        The outcome without the unauthorised parts, and the names of the
        capabilities that were used without being granted.
    """
    dropped: list[str] = []
    changes: dict[str, Any] = {}
    if outcome.decision == "allow" and "approve" not in granted:
        dropped.append("approve")
        changes.update(decision=None, reason=None)
    if outcome.updated_input is not None and "rewrite_input" not in granted:
        dropped.append("rewrite_input")
        changes["updated_input"] = None
    if outcome.updated_output is not UNSET and "rewrite_output" not in granted:
        dropped.append("rewrite_output")
        changes["updated_output"] = UNSET
    if wrote_env_file and "env_file" not in granted:
        dropped.append("env_file")
    if not dropped:
        return outcome, ()
    notes = tuple(_drop_note(c) for c in dropped)
    return replace(outcome, notes=outcome.notes + notes, **changes), tuple(dropped)


def _drop_note(capability: str) -> str:
    return f"tried to {CAPABILITIES[capability]} without that capability (not granted at trust time); dropped"


_DROP_NOTES = frozenset(_drop_note(c) for c in CAPABILITIES)


def error_outcome(hook: str, error: str, *, hook_id: str = "") -> HookOutcome:
    """The outcome of a hook that could not be run at all (sandbox down, ...)."""
    return HookOutcome(hook=hook, status="error", exit_code=None, error=error, hook_id=hook_id)


def _join(parts: Iterable[str | None], sep: str = "\n") -> str | None:
    kept = [p for p in parts if p]
    return cap_text(sep.join(kept), MESSAGE_CAP) if kept else None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


NOTE_CAP = 1_000
"""Characters of one of hookcage's own lines in the system message."""
PROBLEM_NOTES = 20
"""Config problems named in the system message; the rest are counted (``hookcage validate`` lists them)."""
HOOK_MESSAGES_MIN = 200
"""Characters kept for the hooks' own system messages however long hookcage's lines are."""


def _note_line(note: str) -> str:
    """One of hookcage's own lines: one line, escapes visible, secrets redacted, capped."""
    line = one_line(note, NOTE_CAP)
    shown = redact(line)
    if shown != line and "hookcage allow " in line:
        shown += " (secrets shown as ***: `hookcage list` in the project shows the exact line)"
    return shown


def _own_notes(
    outcomes: Sequence[HookOutcome], notes: Sequence[str], problems: Sequence[str], conflicts: Sequence[str]
) -> list[str]:
    """hookcage's own lines, most important first: dropped capabilities, hooks not run, config
    problems (at most :data:`PROBLEM_NOTES`), conflicting rewrites, hook failures, ignored fields."""
    drops: list[str] = []
    failures: list[str] = []
    for o in outcomes:
        name = one_line(o.hook, _NAME_CAP)
        if o.status == "error":
            failures.append(f"hook {name} failed: {o.error}")
        for n in o.notes:
            (drops if n in _DROP_NOTES else failures).append(f"hook {name}: {n}")
    shown = list(problems[:PROBLEM_NOTES])
    if len(problems) > PROBLEM_NOTES:
        shown.append(f"{len(problems) - PROBLEM_NOTES} more config problem(s): `hookcage validate` lists them")
    return [_note_line(n) for n in (*drops, *notes, *shown, *conflicts, *failures)]


def _system_message(own: Sequence[str], messages: Iterable[str | None]) -> str | None:
    """hookcage's lines first, then the hooks' messages in the room left: a hook's long
    message can never cut hookcage's warnings off."""
    head = _join(f"hookcage: {n}" for n in own)
    hooks = [m for m in messages if m]
    if not hooks:
        return head
    if head is not None and len(head) > MESSAGE_CAP - HOOK_MESSAGES_MIN:
        head = cap_text(head, MESSAGE_CAP - HOOK_MESSAGES_MIN)
    room = MESSAGE_CAP - (len(head) + 1 if head else 0)
    tail = cap_text(sanitize("\n".join(hooks), None), room)
    return f"{head}\n{tail}" if head else tail


def fold(
    event: EventSpec, outcomes: Sequence[HookOutcome], notes: Sequence[str] = (), problems: Sequence[str] = ()
) -> Verdict:
    """Fold the outcomes of all hooks of one event (in config order) into one verdict.

    The system message starts with hookcage's own lines (``hookcage: ...``,
    each one line, escaped, secrets redacted), most important first, then the
    hooks' messages in config order, cut to the room left under the cap.

    Args:
        event: the event.
        outcomes: one per hook that ran, in config order.
        notes: hookcage's own warnings for the user (hooks not run and why).
        problems: config problems (after the warnings; only the first
            :data:`PROBLEM_NOTES` are named).

    On an event whose hooks are the operation (:attr:`EventSpec.errors_fail`:
    WorktreeCreate, WorktreeRemove) a hook that could not answer (any
    non-zero exit, a timeout, a crash) fails it like a block. WorktreeCreate
    succeeds with the one path its hooks printed: hooks that print nothing
    are silent, two different paths are a conflict that fails the creation
    (naming both; hookcage never picks one, since each hook made its own
    directory), and no path at all fails it too.
    """
    conflicts: list[str] = []

    decision: Decision | None = None
    for o in outcomes:
        if o.decision and (decision is None or DECISION_RANK[o.decision] > DECISION_RANK[decision]):
            decision = o.decision
    decision_reason = _join(o.reason for o in outcomes if decision and o.decision == decision)

    blockers = [o for o in outcomes if o.status == "block" or (o.status == "error" and event.errors_fail)]
    reasons = [o.reason if o.status == "block" else f"hook {one_line(o.hook, _NAME_CAP)} failed: {o.error}"
               for o in blockers]
    stoppers = [o for o in outcomes if not o.continue_]

    worktree_path = None
    if event.answers_path:
        answered = [o for o in outcomes if o.worktree_path is not None]
        if len({o.worktree_path for o in answered}) > 1:
            names = " and ".join(f"{o.hook!r} ({o.worktree_path})" for o in answered)
            conflict = one_line(f"hooks {names} answered different worktree paths; failing instead of choosing",
                                NOTE_CAP)
            conflicts.append(conflict)
            reasons.append(conflict)
        elif not answered and not reasons:
            reasons.append(f"no {event.name} hook printed a worktree path")
        elif not reasons:
            worktree_path = answered[0].worktree_path

    updated_input = None
    rewrites = [o for o in outcomes if o.updated_input is not None]
    distinct_inputs = {_canonical(o.updated_input) for o in rewrites}
    if len(distinct_inputs) == 1:
        updated_input = rewrites[0].updated_input
    elif len(distinct_inputs) > 1:
        names = " and ".join(repr(o.hook) for o in rewrites)
        conflict = one_line(f"hooks {names} rewrote the tool input differently; asking instead of choosing", NOTE_CAP)
        conflicts.append(conflict)
        if decision is None or DECISION_RANK[decision] < DECISION_RANK["ask"]:
            decision = "ask"
            decision_reason = conflict
    if decision in ("deny", "defer"):
        updated_input = None

    updated_output: Any = UNSET
    out_rewrites = [o for o in outcomes if o.updated_output is not UNSET]
    if len({_canonical(o.updated_output) for o in out_rewrites}) == 1:
        updated_output = out_rewrites[0].updated_output
    elif out_rewrites:
        names = " and ".join(repr(o.hook) for o in out_rewrites)
        conflicts.append(f"hooks {names} rewrote the tool output differently; the output is left as it was")

    own = _own_notes(outcomes, notes, problems, conflicts)
    system_message = _system_message(own, (o.system_message for o in outcomes))
    return Verdict(
        event=event.name,
        outcomes=tuple(outcomes),
        blocked=bool(reasons),
        reason=_join(reasons),
        decision=decision,
        decision_reason=decision_reason,
        continue_=not stoppers,
        stop_reason=stoppers[0].stop_reason if stoppers else None,
        suppress_output=any(o.suppress_output for o in outcomes),
        system_message=system_message,
        additional_context=_join(o.additional_context for o in outcomes),
        updated_input=updated_input,
        updated_output=updated_output,
        notes=tuple(own),
        worktree_path=worktree_path,
    )


def fail_verdict(event_name: str, message: str, *, block: bool) -> AgentAnswer:
    """hookcage's answer when no verdict could be produced (bad input, ...)."""
    return AgentAnswer(2 if block else 1, "", f"hookcage: {redact(one_line(message, MESSAGE_CAP))}\n")


def worktree_answer(verdict: Verdict) -> AgentAnswer:
    """hookcage's answer to WorktreeCreate, whose hooks replace worktree creation.

    Claude Code reads a command hook's stdout as the worktree path (never as
    JSON) and fails the creation on any non-zero exit ("Any non-zero exit
    code causes worktree creation to fail", code.claude.com/docs/en/hooks).
    So: the verdict's path on stdout, exit 0, when there is one and nothing
    failed or stopped; else exit 2 with why on stderr (Claude Code shows a
    failing hook's stderr), the system message after it. On success the
    system message goes to stderr too: nothing else can carry it, and
    Claude Code does not show it.
    """
    message = sanitize(verdict.system_message) if verdict.system_message else None
    if verdict.worktree_path is not None and verdict.continue_ and not verdict.blocks:
        return AgentAnswer(0, verdict.worktree_path + "\n", f"{message}\n" if message else "")
    if not verdict.continue_:
        why = verdict.stop_reason or f"a {verdict.event} hook answered continue: false"
    else:
        why = verdict.reason or f"no {verdict.event} hook printed a worktree path"
    lines = [sanitize(why), *([message] if message else [])]
    return AgentAnswer(2, "", "\n".join(lines) + "\n")
