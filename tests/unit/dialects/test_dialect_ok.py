"""ok's dialect (github.com/NB-Agent/ok v1.0.0): files, anchored match, camelCase payload, exit codes.

Goldens from NB-Agent/ok (HEAD 3ac64e3) ``internal/hook/hook.go`` (``Settings``,
``HookConfig``, ``compileMatch``, ``MatchesTool``, ``defaultTimeout``, ``timeout``,
``Payload``, ``decideOutcome``, ``Run``) and ``internal/hook/runner.go``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor.core.events import get_event
from executor.core.hooks import HookFile, Scope
from executor.core.protocol import Verdict
from executor.dialects import detect_dialect, selects
from executor.dialects.base import Where
from executor.dialects.ok import DIALECT as OK
from executor.executor import HookExecutor
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings

PRE = get_event("PreToolUse")
POST = get_event("PostToolUse")
STOP = get_event("Stop")
PROMPT = get_event("UserPromptSubmit")

# hook.go Payload / runner.go: one JSON line per event.
GOLDEN_PRE = {"event": "PreToolUse", "cwd": "/p", "toolName": "bash", "toolArgs": {"command": "ls"}}
GOLDEN_POST = {"event": "PostToolUse", "cwd": "/p", "toolName": "read_file", "toolArgs": {"path": "a"},
               "toolResult": "text"}
GOLDEN_PROMPT = {"event": "UserPromptSubmit", "cwd": "/p", "prompt": "hi", "turn": 1}
GOLDEN_STOP = {"event": "Stop", "cwd": "/p", "lastAssistantText": "done", "turn": 1}


def parse_file(data: Any, scope: Scope = Scope.PROJECT) -> HookFile:
    return OK.parse(data, scope=scope, source="/r/.ok/settings.json", project_root="/r")


def entry(event: str, **fields: Any) -> dict[str, Any]:
    return {"hooks": {event: [{"command": "./guard.sh", **fields}]}}


# -- files ---------------------------------------------------------------------------------


def test_files_per_scope() -> None:
    files = OK.sources(Where("/r", "/h", {}))
    assert [(f.scope, f.path) for f in files] == [(Scope.USER, "/h/.ok/settings.json"),
                                                  (Scope.PROJECT, "/r/.ok/settings.json")]
    assert "trust.json" in files[1].condition  # boot.go: hook.IsTrusted(cwd)


def test_parse_golden_entry() -> None:
    # hook.go HookConfig: {"match","command","description","timeout"(ms),"cwd"}
    f = parse_file({"hooks": {"PreToolUse": [
        {"match": "bash", "command": "./guard.sh", "description": "guard", "timeout": 5000}]}})
    assert not f.problems
    (hook,) = f.hooks
    assert (hook.event, hook.command, hook.name, hook.timeout, hook.agent) == (
        "PreToolUse", "./guard.sh", "guard", 5.0, "ok")


@pytest.mark.parametrize(("event", "timeout", "seconds"), [
    ("PreToolUse", None, 5.0), ("UserPromptSubmit", 0, 5.0), ("PostToolUse", None, 30.0),
    ("Stop", -5, 30.0),                                   # defaultTimeout
    ("PreToolUse", 120_000, 60.0), ("Stop", 600_000, 300.0),  # capped (maxBlocking/maxAsyncTimeout)
    ("Stop", 1500, 1.5),
])
def test_timeouts_in_milliseconds(event: str, timeout: int | None, seconds: float) -> None:
    fields = {} if timeout is None else {"timeout": timeout}
    assert parse_file(entry(event, **fields)).hooks[0].timeout == seconds


@pytest.mark.parametrize(("data", "path", "severity", "message"), [
    (entry("SessionStart"), "$.hooks.SessionStart", "warning", "ok has no event"),
    (entry("PreToolUse", timeout="5s"), "$.hooks.PreToolUse[0].timeout", "error", "milliseconds"),
    (entry("PreToolUse", match=7), "$.hooks.PreToolUse[0].match", "error", "string"),
    (entry("PreToolUse", match="(("), "$.hooks.PreToolUse[0].match", "warning", "never fires"),
    (entry("PreToolUse", description=3), "$.hooks.PreToolUse[0].description", "error", "string"),
    (entry("PreToolUse", cwd="/abs"), "$.hooks.PreToolUse[0].cwd", "warning", "not honoured"),
    (entry("Stop", match="bash"), "$.hooks.Stop[0].match", "warning", "ignores match"),
    ({"hooks": {"Stop": [{"command": "  "}]}}, "$.hooks.Stop[0].command", "warning", "skips"),
    ({"hooks": {"Stop": [{"command": 5}]}}, "$.hooks.Stop[0].command", "error", "required"),
    ({"hooks": {"Stop": {"command": "x"}}}, "$.hooks.Stop", "error", "array"),
    ({"hooks": {"Stop": ["x"]}}, "$.hooks.Stop[0]", "error", "object"),
    ({"hooks": []}, "$.hooks", "error", "object"),
    ("x", "$", "error", "JSON object"),
])
def test_parse_problems_name_agent_file_and_key(data: Any, path: str, severity: str, message: str) -> None:
    f = parse_file(data)
    found = [p for p in f.problems if p.path == path]
    assert found and found[0].severity == severity and message in found[0].message, f.problems
    assert "ok hook file /r/.ok/settings.json" in str(found[0])


def test_self_route_and_hookcage_keys() -> None:
    route = parse_file({"hooks": {"PreToolUse": [{"match": "*", "command": "hookcage dispatch --agent ok"}]}},
                       Scope.USER)
    assert not route.hooks and route.routes == ("$.hooks.PreToolUse[0]",)
    cap = parse_file(entry("PreToolUse", capabilities=["approve"]))
    assert cap.hooks[0].capabilities == frozenset({"approve"})


# -- match: ^(?:match)$ on ok's own tool name -------------------------------------------------


@pytest.mark.parametrize(("match", "tool", "fires"), [
    ("bash", "bash", True),
    ("file", "read_file", False),      # hook.go: anchored, "file" won't match "read_file"
    (".*file", "read_file", True),
    ("Bash", "bash", False),           # case-sensitive, ok's name
    ("bash|edit_file", "edit_file", True),
    ("*", "ls", True),
    ("", "git", True),
    ("git", "git", True),              # a tool with no canonical twin keeps its name
])
def test_anchored_match(match: str, tool: str, fires: bool) -> None:
    hook = parse_file(entry("PreToolUse", match=match)).hooks[0]
    payload = OK.canonical_payload(PRE, {**GOLDEN_PRE, "toolName": tool})
    assert selects(PRE, hook, payload) is fires


# -- payload in ----------------------------------------------------------------------------


def test_recognised_without_agent() -> None:
    for golden in (GOLDEN_PRE, GOLDEN_POST, GOLDEN_PROMPT, GOLDEN_STOP):
        assert detect_dialect(golden) is OK
    assert detect_dialect({"hook_event_name": "PreToolUse", "event": "PreToolUse", "toolName": "x"}) is not OK
    assert detect_dialect({"event": "Notification", "toolName": "x"}) is not OK


def test_canonical_payloads() -> None:
    assert OK.canonical_payload(OK.resolve_event(None, GOLDEN_PRE), GOLDEN_PRE) == {
        "hook_event_name": "PreToolUse", "cwd": "/p", "tool_name": "Bash", "tool_input": {"command": "ls"}}
    assert OK.canonical_payload(POST, GOLDEN_POST) == {
        "hook_event_name": "PostToolUse", "cwd": "/p", "tool_name": "Read", "tool_input": {"path": "a"},
        "tool_response": "text"}
    assert OK.canonical_payload(PROMPT, GOLDEN_PROMPT) == {"hook_event_name": "UserPromptSubmit", "cwd": "/p",
                                                           "prompt": "hi"}
    assert OK.canonical_payload(STOP, {**GOLDEN_STOP, "sessionId": "s9"}) == {  # Reasonix adds sessionId
        "hook_event_name": "Stop", "session_id": "s9", "cwd": "/p", "stop_hook_active": False,
        "last_assistant_message": "done"}


def test_hook_input_is_ok_payload_line() -> None:
    got = OK.hook_input(PRE, GOLDEN_PRE)
    assert got.stdin.endswith(b"\n") and got.stdin.count(b"\n") == 1
    assert json.loads(got.stdin) == GOLDEN_PRE and not got.env


# -- answers (decideOutcome) -----------------------------------------------------------------


def test_exit_codes() -> None:
    assert OK.read_answer(PRE, "h", 0, b'{"decision":"block"}', b"").status == "ok"  # stdout never read
    block = OK.read_answer(PRE, "h", 2, b"", b"no rm\n")  # golden: echo "no rm" >&2; exit 2
    assert (block.status, block.reason) == ("block", "no rm")
    assert OK.read_answer(PROMPT, "h", 2, b"from stdout", b"").reason == "from stdout"
    assert OK.read_answer(PRE, "h", 1, b"", b"warn").status == "error"  # warn: non-blocking
    post = OK.read_answer(STOP, "h", 2, b"", b"nope")
    assert post.status == "ok" and post.system_message == "nope" and "does not block" in post.notes[0]
    late = OK.read_answer(PRE, "h", None, b"", b"", timed_out=True, timeout=5.0)
    assert (late.status, late.reason) == ("block", "hook timed out after 5 s")
    assert OK.read_answer(POST, "h", None, b"", b"", timed_out=True, timeout=5.0).status == "error"


def test_no_rewrite_or_approval_in_ok() -> None:
    out = OK.read_answer(PRE, "h", 0, b'{"hookSpecificOutput":{"updatedInput":{"command":"x"},'
                                       b'"permissionDecision":"allow"}}', b"")
    assert out.updated_input is None and out.decision is None


# -- render ----------------------------------------------------------------------------------


def test_render_exit_codes_only() -> None:
    assert OK.render(PRE, Verdict("PreToolUse")) == OK.render(PRE, Verdict("PreToolUse", decision="allow"))
    assert OK.render(PRE, Verdict("PreToolUse", additional_context="c", system_message="m")).stdout == ""
    deny = OK.render(PRE, Verdict("PreToolUse", decision="deny", decision_reason="no\x1b[2J"))
    assert (deny.exit_code, deny.stdout, deny.stderr) == (2, "", "no\\x1b[2J\n")
    block = OK.render(PROMPT, Verdict("UserPromptSubmit", blocked=True, reason="secret"))
    assert (block.exit_code, block.stderr) == (2, "secret\n")
    assert OK.render(PROMPT, Verdict("UserPromptSubmit", continue_=False, stop_reason="halt")).exit_code == 2
    assert OK.render(PRE, Verdict("PreToolUse")).exit_code == 0


# -- the executor runs ok's hooks in order and stops at the first block (Run) -------------------


def test_serial_stop_at_first_block(tmp_path: Path) -> None:
    home, userhome, project = tmp_path / "hc", tmp_path / "u", tmp_path / "p"
    for d in (home, userhome / ".ok", project):
        d.mkdir(parents=True)
    (home / "config.toml").write_text('[allowlist]\nallow = ["*"]\n')
    (userhome / ".ok" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [
        {"match": "bash", "command": "first"}, {"match": "bash", "command": "second"},
        {"match": "read_file", "command": "other"}]}}))

    def handler(req: RunRequest) -> RunResult:
        return RunResult(2, stderr=b"no") if req.command == "first" else RunResult(0)

    fake = FakeSandbox(handler)
    payload = {**GOLDEN_PRE, "cwd": str(project)}
    with HookExecutor(load_settings(home=home, managed_dir=tmp_path / "m"), sandboxes={"docker": fake},
                      environ={"HOME": str(userhome)}) as ex:
        verdict = ex.dispatch(PRE, OK.canonical_payload(PRE, payload), dialect=OK, raw=payload)
    assert [r.command for r in fake.requests] == ["first"]
    assert json.loads(fake.requests[0].stdin) == payload
    assert OK.render(PRE, verdict).exit_code == 2
