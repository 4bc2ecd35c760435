"""infer's dialect (github.com/inference-gateway/cli): one YAML file, hook points, observe only.

Goldens from inference-gateway/cli (HEAD 3244c2f): ``config/hooks.go``,
``cmd/runtime/config.go`` (``getEffectiveHooksConfigPath``, ``applyHooksEnvOverrides``),
``internal/agent/hook_commands.go`` (``hookCommandStdin``, ``runHookCommand``),
``internal/agent/domain/hooks.go`` (``HookPoints``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor.config import agent_files, load_hooks
from executor.core.events import EVENTS
from executor.core.hooks import HookFile, Scope
from executor.core.policy import merge
from executor.core.protocol import HookOutcome, Verdict, fold
from executor.dialects import detect_dialect
from executor.dialects.base import Where
from executor.dialects.infer import DIALECT as INFER
from executor.dialects.infer import parse_bool
from executor.executor import HookExecutor
from executor.hookdecode import decode
from executor.sandbox import FakeSandbox, RunResult
from executor.settings import load_settings

# hook_commands.go hookCommandStdin: json.Marshal(map) -> keys sorted, compact.
GOLDEN_STDIN = b'{"hook":"post_tool","session_id":"abc","turn":3}'
# config/hooks.go DefaultHooksYAML's example, enabled.
GOLDEN_FILE = """
enabled: true
hooks:
  - name: gofmt
    hook: post_session
    command: "gofmt -w ."
    timeout: 30
"""


def parse_file(data: Any, environ: dict[str, str] | None = None, scope: Scope = Scope.PROJECT) -> HookFile:
    if isinstance(data, str):
        data = decode(data.encode(), "yaml")
    return INFER.parse(data, scope=scope, source="/r/.infer/hooks.yaml", project_root="/r", environ=environ or {})


def one(**fields: Any) -> dict[str, Any]:
    return {"enabled": True, "hooks": [{"name": "n", "hook": "post_tool", "command": "true", **fields}]}


# -- files: one file, project first, no merge -------------------------------------------------------


def test_sources_project_shadows_user() -> None:
    user, project = INFER.sources(Where("/r", "/h", {}))
    assert (user.scope, user.path, user.format) == (Scope.USER, "/h/.infer/hooks.yaml", "yaml")
    assert (project.scope, project.path, project.format) == (Scope.PROJECT, "/r/.infer/hooks.yaml", "yaml")
    assert user.unless_exists == project.path and "no .infer/hooks.yaml" in user.condition
    assert [s.scope for s in INFER.sources(Where(None, "/h", {}))] == [Scope.USER]


def test_config_reads_only_the_first_file_found(tmp_path: Path) -> None:
    home, root = tmp_path / "h", tmp_path / "r"
    (home / ".infer").mkdir(parents=True)
    (home / ".infer" / "hooks.yaml").write_text(GOLDEN_FILE)
    env = {"HOME": str(home)}
    settings = load_settings(home=tmp_path / "hc", managed_dir=tmp_path / "m")
    hooks = load_hooks(settings, root, [INFER], env).hooks
    assert [(h.scope, h.command) for h in hooks] == [(Scope.USER, "gofmt -w .")]
    (root / ".infer").mkdir(parents=True)
    (root / ".infer" / "hooks.yaml").write_text(GOLDEN_FILE.replace("gofmt -w .", "make lint"))
    assert [s.scope for s, _ in agent_files(INFER, root, env)] == [Scope.PROJECT]  # the user file: not read
    hooks = load_hooks(settings, root, [INFER], env).hooks
    assert [(h.scope, h.command) for h in hooks] == [(Scope.PROJECT, "make lint")]


# -- parsing ------------------------------------------------------------------------------------


def test_parse_golden_file() -> None:
    f = parse_file(GOLDEN_FILE)
    assert not f.problems and not f.disable_all
    (hook,) = f.hooks
    assert (hook.event, hook.name, hook.command, hook.timeout, hook.agent) == (
        "SessionEnd", "gofmt", "gofmt -w .", 30.0, "infer")
    assert parse_file(one()).hooks[0].timeout == 30.0          # absent -> 30
    assert parse_file(one(timeout=0)).hooks[0].timeout == 30.0  # 0 -> 30 (effective)
    assert parse_file(one(timeout=5)).hooks[0].timeout == 5.0


@pytest.mark.parametrize(("data", "path", "message"), [
    (one(timeout=-1), "$.hooks[0].timeout", "seconds"),
    (one(timeout="30s"), "$.hooks[0].timeout", "seconds"),
    (one(hook="PreToolUse"), "$.hooks[0].hook", "one of pre_session"),
    (one(hook="on_save"), "$.hooks[0].hook", "one of pre_session"),
    (one(name=""), "$.hooks[0].name", "required"),
    (one(name=None), "$.hooks[0].name", "required"),
    (one(command=""), "$.hooks[0].command", "required"),
    ({"enabled": "yes", "hooks": []}, "$.enabled", "true or false"),
    ({"enabled": True, "hooks": {"name": "x"}}, "$.hooks", "list"),
    ({"enabled": True, "hooks": ["x"]}, "$.hooks[0]", "mapping"),
    (["x"], "$", "mapping"),
])
def test_parse_errors_name_agent_file_and_key(data: Any, path: str, message: str) -> None:
    f = parse_file(data)
    found = [p for p in f.problems if p.path == path and p.severity == "error"]
    assert found and message in found[0].message, f.problems
    assert str(found[0]).startswith("infer hook file /r/.infer/hooks.yaml: ")
    assert all(h.invalid for h in f.hooks)


def test_unknown_keys_warn() -> None:
    f = parse_file({**one(matcher="x"), "extra": 1})
    assert {(p.path, p.severity) for p in f.problems} == {("$.extra", "warning"), ("$.hooks[0].matcher", "warning")}
    assert not f.hooks[0].invalid


# -- the master switch ----------------------------------------------------------------------------


@pytest.mark.parametrize(("enabled", "env", "runs", "reason"), [
    (True, None, True, ""),
    (False, None, False, '"enabled: false"'),
    (None, None, False, "infer's default: false"),           # DefaultHooksConfig: Enabled false
    (False, "true", True, ""),                                # the variable wins over the file
    (True, "0", False, "INFER_HOOKS_ENABLED=0"),
    (True, " F ", False, "INFER_HOOKS_ENABLED=F"),            # TrimSpace + ParseBool
    (True, "yes", True, ""),                                  # ParseBool refuses "yes": ignored
    (False, "yes", False, '"enabled: false"'),
])
def test_master_switch(enabled: bool | None, env: str | None, runs: bool, reason: str) -> None:
    data: dict[str, Any] = {"hooks": one()["hooks"]}
    if enabled is not None:
        data["enabled"] = enabled
    f = parse_file(data, {} if env is None else {"INFER_HOOKS_ENABLED": env})
    assert f.disable_all is not runs and reason in f.disable_reason
    hookset = merge([f])
    assert (hookset.skip(f.hooks[0]) is None) is runs


def test_parse_bool_is_gos() -> None:
    assert [parse_bool(v) for v in ("1", "t", "TRUE", "True", "0", "f", "False", "yes", "on", "")] == [
        True, True, True, True, False, False, False, None, None, None]


# -- events and payload ------------------------------------------------------------------------


def test_event_map() -> None:
    assert INFER.event_spec("pre_session").name == "SessionStart"
    assert INFER.event_spec("post_session").name == "SessionEnd"
    for point in ("pre_stream", "post_stream", "pre_tool", "post_tool", "pre_queue_drain", "post_queue_drain"):
        spec = INFER.event_spec(point)
        assert spec.name == point and point not in EVENTS and not spec.can_block
        assert INFER.native_event(spec) == point
    assert INFER.native_event(EVENTS["SessionStart"]) == "pre_session"


def test_payload_in_and_out() -> None:
    payload = json.loads(GOLDEN_STDIN)
    assert detect_dialect(payload) is INFER
    assert detect_dialect({**payload, "hook_event_name": "x"}) is not INFER
    spec = INFER.resolve_event(None, payload)
    assert spec.name == "post_tool"
    assert INFER.canonical_payload(spec, payload) == {"hook_event_name": "post_tool", "session_id": "abc", "turn": 3}
    got = INFER.hook_input(spec, payload)
    assert got.stdin == GOLDEN_STDIN and not got.env
    start = INFER.resolve_event(None, {"hook": "pre_session", "session_id": "", "turn": 1})
    assert INFER.hook_input(start, {"hook": "pre_session", "session_id": "", "turn": 1}).stdin == (
        b'{"hook":"pre_session","session_id":"","turn":1}')


# -- observe only ------------------------------------------------------------------------------


def test_answers_are_never_acted_on() -> None:
    spec = INFER.event_spec("pre_session")
    for code, out, err in ((2, b"", b"no"), (0, b'{"decision":"block","continue":false}', b""),
                           (0, b'{"hookSpecificOutput":{"additionalContext":"x","updatedInput":{}}}', b"")):
        got = INFER.read_answer(spec, "h", code, out, err)
        assert (got.status, got.decision, got.additional_context, got.updated_input, got.continue_) == (
            "ok", None, None, None, True)
    assert "exited 2" in INFER.read_answer(spec, "h", 2, b"", b"").notes[0]
    late = INFER.read_answer(spec, "h", None, b"", b"", timed_out=True, timeout=30.0)
    assert late.status == "ok" and "timed out after 30 s" in late.notes[0]
    assert not fold(spec, [late]).blocks


def test_render_is_always_exit_0_and_nothing() -> None:
    spec = INFER.event_spec("post_tool")
    for verdict in (Verdict("post_tool"), Verdict("post_tool", blocked=True, reason="x"),
                    Verdict("post_tool", decision="deny", additional_context="c", continue_=False),
                    Verdict("post_tool", outcomes=(HookOutcome("h"),), system_message="m")):
        answer = INFER.render(spec, verdict)
        assert (answer.exit_code, answer.stdout, answer.stderr) == (0, "", "")


def test_executor_runs_each_hook_of_the_point(tmp_path: Path) -> None:
    home, userhome, project = tmp_path / "hc", tmp_path / "u", tmp_path / "p"
    for d in (home, userhome / ".infer", project):
        d.mkdir(parents=True)
    (home / "config.toml").write_text('[allowlist]\nallow = ["*"]\n')
    (userhome / ".infer" / "hooks.yaml").write_text(
        "enabled: true\nhooks:\n  - {name: a, hook: post_tool, command: first}\n"
        "  - {name: b, hook: post_tool, command: second}\n  - {name: c, hook: pre_tool, command: other}\n")
    fake = FakeSandbox(lambda req: RunResult(2, stderr=b"x"))
    payload = json.loads(GOLDEN_STDIN)
    spec = INFER.resolve_event(None, payload)
    with HookExecutor(load_settings(home=home, managed_dir=tmp_path / "m"), sandboxes={"docker": fake},
                      environ={"HOME": str(userhome), "CLAUDE_PROJECT_DIR": str(project)}) as ex:
        verdict = ex.dispatch(spec, INFER.canonical_payload(spec, payload), dialect=INFER, raw=payload)
    assert sorted(r.command for r in fake.requests) == ["first", "second"]
    assert all(r.stdin == GOLDEN_STDIN for r in fake.requests)
    assert not verdict.blocks and INFER.render(spec, verdict).exit_code == 0
