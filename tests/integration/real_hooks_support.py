"""Shared by the real-hook suites: run a hook as its agent runs it and through ``hookcage dispatch``.

``test_real_hooks.py`` (published hooks from PyPI, one per test) and
``test_real_hooks_repos.py`` (several authors' hooks in one repository, per
agent) lay out a project with :class:`Bench`, run each :class:`Case`
directly on the host and through the real engine, turn both answers into a
:class:`Verdict` (what the agent would do) and compare them (:func:`agrees`),
printing a table of direct vs hookcage per payload.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support import agent_session

HOOKCAGE = shutil.which("hookcage")
BLOCKING = {"UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "SubagentStop", "Stop",
            "TaskCompleted", "ConfigChange"}
"""Events where exit 2 / ``decision: "block"`` blocks (docs/protocol.md)."""
PERMISSION = {"PreToolUse", "PermissionRequest"}
CONTEXT_FROM_PLAIN_STDOUT = {"UserPromptSubmit", "SessionStart"}
NETWORK_TROUBLE = re.compile(
    r"NewConnectionError|Name or service not known|Temporary failure in name resolution|Network is unreachable"
    r"|ConnectTimeout|Read timed out|ProxyError|SSLError|Connection refused|Could not fetch URL")


# -- what the agent would do with an answer ------------------------------------


DEVELOPER = 1000
"""The uid that owns the test projects when the suite runs as root (a developer's checkout)."""


@dataclass(frozen=True)
class Verdict:
    """An answer as the agent acts on it.

    ``kind``: ``deny``/``ask``/``allow`` (permission events), ``block``,
    ``stop`` (``continue: false``) or ``none``. ``error`` marks a
    non-blocking failure (exit other than 0 and 2). ``notes`` is the system
    message shown to the user (hookcage's own findings live there).
    """

    kind: str
    reason: str = ""
    context: str = ""
    error: bool = False
    notes: str = ""

    def show(self) -> str:
        text = self.kind + (" (error)" if self.error else "")
        if self.reason:
            text += f": {_short(self.reason)}"
        if self.context:
            text += f" [context: {_short(self.context)}]"
        return text


def _short(text: str, width: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 3] + "..."


def verdict_of(event: str, code: int, stdout: str, stderr: str) -> Verdict:
    """Normalise one answer (a hook's own, or hookcage's) into what the agent would do.

    Exit 2 blocks on blocking events (a PreToolUse block denies the call);
    exit 0 with JSON on stdout is read for ``continue``, ``decision``,
    ``hookSpecificOutput.permissionDecision`` and ``additionalContext``; plain
    stdout is context on UserPromptSubmit and SessionStart; any other exit is
    a non-blocking error.
    """
    if code == 2:
        if event not in BLOCKING:
            return Verdict("none", notes=stderr.strip())
        return Verdict("deny" if event in PERMISSION else "block", reason=stderr.strip())
    if code != 0:
        return Verdict("none", error=True, notes=(stderr.strip().splitlines() or [""])[0])
    text = stdout.strip()
    if not text.startswith("{"):
        context = text if event in CONTEXT_FROM_PLAIN_STDOUT else ""
        return Verdict("none", context=context)
    try:
        data = json.loads(text)
    except ValueError:
        return Verdict("none", error=True, notes="stdout is not valid JSON")
    specific = data.get("hookSpecificOutput") if isinstance(data.get("hookSpecificOutput"), dict) else {}
    context = str(specific.get("additionalContext") or "")
    notes = str(data.get("systemMessage") or "")
    if data.get("continue") is False:
        return Verdict("stop", reason=str(data.get("stopReason") or ""), context=context, notes=notes)
    decision = specific.get("permissionDecision")
    if event in PERMISSION and decision in ("deny", "ask", "allow"):
        return Verdict(decision, reason=str(specific.get("permissionDecisionReason") or data.get("reason") or ""),
                       context=context, notes=notes)
    if data.get("decision") == "block" and event in BLOCKING:
        return Verdict("deny" if event in PERMISSION else "block", reason=str(data.get("reason") or ""),
                       context=context, notes=notes)
    if data.get("decision") == "approve" and event in PERMISSION:
        return Verdict("allow", reason=str(data.get("reason") or ""), context=context, notes=notes)
    return Verdict("none", context=context, notes=notes)


def _norm(text: str) -> str:
    return " ".join(text.split())


def agrees(direct: Verdict, caged: Verdict) -> bool:
    """Same decision; the hook's reason and context reach the agent through hookcage."""
    return (direct.kind == caged.kind and _norm(direct.reason) in _norm(caged.reason)
            and _norm(direct.context) in _norm(caged.context))


# -- PyPI, at test time ----------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where a hook comes from: a PyPI distribution pinned by version, a file in it."""

    package: str
    version: str
    path: str
    """The hook's file (or package directory) inside the wheel."""

    def __str__(self) -> str:
        return f"{self.package}=={self.version}:{self.path}"


@pytest.fixture(scope="session")
def pypi(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """``pypi(name, version)``: the wheel downloaded (once per session) and unpacked; its directory."""
    root = tmp_path_factory.mktemp("pypi")
    unpacked: dict[tuple[str, str], Path] = {}

    def get(name: str, version: str) -> Path:
        if (name, version) in unpacked:
            return unpacked[(name, version)]
        download = root / f"{name}-{version}.dl"
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--retries", "2",
             "--timeout", "30", "--disable-pip-version-check", "-d", str(download), f"{name}=={version}"],
            capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            if NETWORK_TROUBLE.search(proc.stderr + proc.stdout):
                pytest.skip(f"PyPI cannot be reached to download {name}=={version}: "
                            f"{proc.stderr.strip().splitlines()[-1:]}")
            pytest.fail(f"pip download {name}=={version} failed:\n{proc.stderr}")
        wheel = next(download.glob("*.whl"))
        dest = root / f"{name}-{version}"
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                target = Path(archive.extract(info, dest))
                mode = info.external_attr >> 16
                if not info.is_dir():
                    target.chmod(0o755 if mode & 0o111 else 0o644)
        for path in [dest, *dest.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        unpacked[(name, version)] = dest
        return dest

    return get


UV_VERSION = "0.13.8"
"""The uv the host runs ``uv run --script`` hooks with (from PyPI's ``uv`` wheel)."""


@pytest.fixture(scope="session")
def host_uv(pypi: Callable[[str, str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the ``uv`` binary for the host's direct runs."""
    found = shutil.which("uv")
    if found:
        return Path(found).parent
    wheel = pypi("uv", UV_VERSION)
    binary = next(wheel.glob("uv-*.data/scripts/uv"))
    bindir = tmp_path_factory.mktemp("uvbin")
    shutil.copy(binary, bindir / "uv")
    (bindir / "uv").chmod(0o755)
    return bindir


# -- one project, run both ways ----------------------------------------------------


@dataclass
class Hook:
    """A hook as configured: the authors' command line, its event and matcher."""

    name: str
    event: str
    command: str
    source: str
    matcher: str | None = None
    timeout: int | None = None
    sandbox: dict[str, Any] | None = None

    def handler(self) -> dict[str, Any]:
        handler: dict[str, Any] = {"type": "command", "command": self.command, "name": self.name}
        if self.timeout is not None:
            handler["timeout"] = self.timeout
        if self.sandbox is not None:
            handler["sandbox"] = self.sandbox
        return handler


@dataclass
class Case:
    """One payload for one hook.

    ``expect``: the verdict kind the hook gives when run directly (so that two
    broken runs cannot agree by accident). ``by_design``: why hookcage's answer
    may differ, checked by ``check`` (given both runs) instead of equality.
    """

    hook: Hook
    label: str
    fields: dict[str, Any]
    expect: str
    transcript: list[dict[str, Any]] | None = None
    by_design: str = ""
    check: Callable[[Run, Run], None] | None = None


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    verdict: Verdict
    transcript: Path | None = None


@dataclass
class Row:
    hook: str
    payload: str
    direct: str
    hookcage: str
    outcome: str


@dataclass
class Bench:
    """A project in ``tmp`` with an isolated ``HOOKCAGE_HOME``, and the two ways to run its hooks."""

    tmp: Path
    extra_path: list[Path] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tmp.chmod(0o755)  # hooks run as another uid in the container: the project must be readable
        self.project = self.tmp / "project"
        (self.project / ".hookcage").mkdir(parents=True)
        (self.project / "src").mkdir()
        (self.project / "README.md").write_text("a project whose agent runs hooks\n")
        self.home = self.tmp / "hookcage-home"
        self.home.mkdir()
        self.managed = self.tmp / "managed"
        self.host_home = self.tmp / "host-home"
        (self.host_home / ".claude").mkdir(parents=True)
        self.transcripts = self.tmp / "transcripts"
        self.transcripts.mkdir()
        self.transcripts.chmod(0o755)
        self.session = agent_session("real")
        self.hooks: list[Hook] = []
        self._runs = 0

    # -- setting up ------------------------------------------------------------

    def put(self, source: Path, relative: str) -> Path:
        """Copy a file or a directory of a downloaded package into the project."""
        target = self.project / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "tests"))
        else:
            shutil.copy2(source, target)
        self.readable()
        return target

    def write(self, relative: str, text: str) -> Path:
        target = self.project / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        self.readable()
        return target

    def readable(self) -> None:
        for path in [self.project, *self.project.rglob("*")]:
            mode = path.stat().st_mode
            path.chmod(stat.S_IMODE(mode) | (0o755 if path.is_dir() else 0o444))
            if os.getuid() == 0:
                # A developer's checkout belongs to the developer, and hooks run as its
                # owner: a root-owned tree would make them run as nobody, who cannot
                # write it even with `"workspace": "rw"`.
                os.chown(path, DEVELOPER, DEVELOPER, follow_symlinks=False)

    def configure(self, *hooks: Hook) -> None:
        """Write ``.hookcage/hooks.json``: the hooks as the repository would carry them."""
        self.hooks = list(hooks)
        config: dict[str, list[dict[str, Any]]] = {}
        for hook in hooks:
            group: dict[str, Any] = {"hooks": [hook.handler()]}
            if hook.matcher:
                group = {"matcher": hook.matcher, **group}
            config.setdefault(hook.event, []).append(group)
        (self.project / ".hookcage" / "hooks.json").write_text(json.dumps({"hooks": config}, indent=2))
        self.readable()

    # -- the two ways to run ----------------------------------------------------

    def payload(self, case: Case, side: str) -> tuple[dict[str, Any], Path]:
        self._runs += 1
        transcript = self.transcripts / f"{side}-{self._runs}.jsonl"
        lines = case.transcript if case.transcript is not None else [
            {"type": "user", "message": {"role": "user", "content": "hello"}},
            {"type": "assistant", "message": {"role": "assistant", "stop_reason": "end_turn",
                                              "content": [{"type": "text", "text": "Hello."}]}}]
        transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
        transcript.chmod(0o644)
        payload = {"session_id": self.session, "transcript_path": str(transcript), "cwd": str(self.project),
                   "permission_mode": "default", "hook_event_name": case.hook.event, **case.fields}
        return payload, transcript

    def host_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKCAGE_", "PYTEST_"))}
        pyenv = Path.home() / ".pyenv"
        if pyenv.is_dir():
            env.setdefault("PYENV_ROOT", str(pyenv))  # pyenv's shims find it through HOME otherwise
        env.update(HOME=str(self.host_home), CLAUDE_PROJECT_DIR=str(self.project), LANG="C.UTF-8",
                   UV_CACHE_DIR=str(self.tmp.parent / "uv-cache"), UV_PYTHON_DOWNLOADS="never")
        env["PATH"] = os.pathsep.join([*map(str, self.extra_path), env.get("PATH", "")])
        return env

    def direct(self, case: Case) -> Run:
        """The hook as the agent runs it: ``sh -c COMMAND``, payload on stdin, cwd = the project."""
        payload, transcript = self.payload(case, "direct")
        proc = subprocess.run(["sh", "-c", case.hook.command], input=json.dumps(payload), capture_output=True,
                              text=True, cwd=self.project, env=self.host_env(),
                              timeout=case.hook.timeout or 60)
        return Run(proc.returncode, proc.stdout, proc.stderr,
                   verdict_of(case.hook.event, proc.returncode, proc.stdout, proc.stderr), transcript)

    def hookcage(self, *args: str, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess[str]:
        assert HOOKCAGE is not None, "the hookcage console script is not installed"
        env = {**os.environ, "HOOKCAGE_HOME": str(self.home), "HOOKCAGE_MANAGED_DIR": str(self.managed),
               "CLAUDE_PROJECT_DIR": str(self.project)}
        proc = subprocess.run([HOOKCAGE, *args], input=stdin, capture_output=True, text=True, cwd=self.project,
                              env=env, timeout=600)
        if check:
            assert proc.returncode == 0, f"hookcage {' '.join(args)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def adopt(self) -> list[str]:
        """Allow each hook with the line hookcage suggests, then trust them all. Returns the entries."""
        listing = self.hookcage("list").stdout
        entries = [shlex.split(line)[0] for line in re.findall(r"to allow it: hookcage allow (.+?)\)?$", listing, re.M)]
        for entry in dict.fromkeys(entries):
            self.hookcage("allow", entry)
        self.hookcage("trust", "--all", "--yes")
        listing = self.hookcage("list").stdout
        assert "runs: no" not in listing, listing
        return entries

    def dispatch(self, case: Case) -> Run:
        payload, transcript = self.payload(case, "hookcage")
        proc = self.hookcage("dispatch", case.hook.event, stdin=json.dumps(payload), check=False)
        verdict = verdict_of(case.hook.event, proc.returncode, proc.stdout, proc.stderr)
        if proc.returncode == 0 and proc.stdout.strip().startswith("{"):
            verdict = Verdict(verdict.kind, verdict.reason, verdict.context, verdict.error,
                              str(json.loads(proc.stdout).get("systemMessage") or ""))
        assert proc.returncode in (0, 2), f"hookcage dispatch failed: {proc.returncode}: {proc.stderr}"
        return Run(proc.returncode, proc.stdout, proc.stderr, verdict, transcript)

    # -- the comparison -----------------------------------------------------------

    def compare(self, cases: list[Case]) -> None:
        """Run every case directly, adopt the hooks, dispatch every case; compare; print the table."""
        direct = [self.direct(case) for case in cases]
        self.adopt()
        caged = [self.dispatch(case) for case in cases]
        problems = [self.judge(case.hook.name, case.label, host, cage, case.expect, by_design=case.by_design,
                               check=case.check, names=(case.hook.name,))
                    for case, host, cage in zip(cases, direct, caged, strict=True)]
        self.conclude(problems)

    def judge(self, hook: str, payload: str, host: Run, cage: Run, expect: str, *, by_design: str = "",
              check: Callable[[Run, Run], None] | None = None, names: tuple[str, ...] = (),
              same: Callable[[], bool] | None = None, direct: str = "") -> str:
        """Check one payload's two runs and add its row to the table. Returns the problem ("" if none).

        The direct run must answer ``expect``; then hookcage's answer must agree (``same``, default
        :func:`agrees`) with no failure reported for any of ``names``, or, ``by_design``, pass ``check``.
        """
        outcome, problem = "same", ""
        try:
            assert host.verdict.kind == expect, (
                f"run directly, {hook} answered {host.verdict.show()} (expected {expect}): "
                f"exit {host.code}, stdout {host.stdout[:300]!r}, stderr {host.stderr[:300]!r}")
            if by_design:
                assert check is not None
                check(host, cage)
                outcome = f"differs by design: {by_design}"
            else:
                assert same() if same else agrees(host.verdict, cage.verdict), "direct and hookcage disagree"
                assert not any(_failure_note(cage.verdict.notes, name) for name in names), (
                    f"hookcage reports a failure: {cage.verdict.notes}")
        except AssertionError as exc:
            outcome = f"FAIL: {_short(str(exc).splitlines()[0], 200)}"
            problem = (f"{hook} / {payload}: {exc}\n  hookcage exit {cage.code}, "
                       f"stdout {cage.stdout[:400]!r}, stderr {cage.stderr[:600]!r}")
        notes = f" {{notes: {_short(cage.verdict.notes, 90)}}}" if cage.verdict.notes else ""
        self.rows.append(Row(hook, payload, direct or host.verdict.show(), cage.verdict.show() + notes, outcome))
        return problem

    def conclude(self, problems: list[str]) -> None:
        """Print the table; fail with it and every problem when there is one."""
        table = self.table()
        print("\n" + table)
        found = [problem for problem in problems if problem]
        assert not found, table + "\n\n" + "\n\n".join(found)

    def table(self) -> str:
        lines = ["| hook | payload | direct (host) | hookcage | outcome |", "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in (r.hook, r.payload, r.direct, r.hookcage,
                                                                          r.outcome)) + " |" for r in self.rows]
        return "\n".join(lines)


def _failure_note(notes: str, name: str) -> bool:
    return any(name in line and ("failed" in line or "could not" in line or "not run" in line)
               for line in notes.splitlines())


def told_in_one_line(cage: Run, name: str, *words: str) -> None:
    """The user is told, in one line of hookcage's system message, that the hook hit the sandbox."""
    lines = [line for line in cage.verdict.notes.splitlines() if name in line]
    assert len(lines) == 1, f"expected one line about {name} in the system message, got {cage.verdict.notes!r}"
    assert all(word.lower() in lines[0].lower() for word in words), lines[0]


@pytest.fixture
def bench(tmp_path: Path, runner_image: str) -> Iterator[Bench]:
    yield Bench(tmp_path)


# -- payload helpers ------------------------------------------------------------------

AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example key id, split so scanners skip this file
STRIPE_KEY = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"  # Stripe's documented example key shape


def bash(command: str, description: str = "") -> dict[str, Any]:
    tool_input: dict[str, Any] = {"command": command}
    if description:
        tool_input["description"] = description
    return {"tool_name": "Bash", "tool_input": tool_input, "tool_use_id": "toolu_01"}


def assistant_says(*content: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "user", "message": {"role": "user", "content": "fix the bug"}},
            {"type": "assistant", "message": {"role": "assistant", "stop_reason": "end_turn",
                                              "content": list(content)}}]

