"""HookExecutor end to end over real hook files and a FakeSandbox (no Docker)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from executor_env import Env, hooks

from executor.errors import PayloadError, SandboxUnavailable
from executor.executor import HookExecutor
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings


def answer(table: dict[str, RunResult]) -> Callable[[RunRequest], RunResult]:
    def handler(req: RunRequest) -> RunResult:
        return table.get(req.command, RunResult(0))
    return handler


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def test_blocking_hook_blocks_and_others_still_run(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "guard", "audit", matcher="Bash"))
    ex, fake = env.executor(answer({"guard": RunResult(2, stderr=b"no rm")}))
    verdict = ex.dispatch("PreToolUse", env.payload())
    assert verdict.blocks and verdict.reason == "no rm"
    assert sorted(r.command for r in fake.requests) == ["audit", "guard"]


def test_matcher_selects_hooks_and_aliases_cross_agents(env: Env) -> None:
    env.write("user", {"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "bash-hook"}]},
        {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "edit-hook"}]},
    ]}})
    ex, fake = env.executor()
    ex.dispatch("PreToolUse", env.payload(tool_name="run_shell_command"))
    assert [r.command for r in fake.requests] == ["bash-hook"]


def test_hooks_run_in_parallel(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "a", "b", "c"))
    barrier = threading.Barrier(3, timeout=5)

    def handler(req: RunRequest) -> RunResult:
        barrier.wait()  # would time out (BrokenBarrierError) if hooks ran one by one
        return RunResult(0)

    ex, _ = env.executor(handler)
    verdict = ex.dispatch("PreToolUse", env.payload())
    assert all(o.status == "ok" for o in verdict.outcomes), verdict.notes


def test_identical_handlers_from_several_files_run_once(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "same"))
    env.write("project", hooks("PreToolUse", "same", matcher="Bash"))
    ex, fake = env.executor()
    ex.dispatch("PreToolUse", env.payload())
    assert [r.command for r in fake.requests] == ["same"]
    assert [r["scope"] for r in env.log()] == ["user"]


def test_malformed_file_is_reported_and_other_scopes_still_work(env: Env) -> None:
    bad = env.write("project", '{"hooks": {"PreToolUse": [')
    env.write("user", hooks("PreToolUse", "user-guard"))
    ex, fake = env.executor()
    verdict = ex.dispatch("PreToolUse", env.payload())
    assert [r.command for r in fake.requests] == ["user-guard"]
    assert verdict.system_message and str(bad) in verdict.system_message
    assert "not valid JSON" in verdict.system_message


def test_invalid_handler_is_not_run_and_named_with_its_json_path(env: Env) -> None:
    path = env.write("user", hooks("PreToolUse", {"type": "command", "command": "x", "timeout": -1}, "ok"))
    ex, fake = env.executor()
    verdict = ex.dispatch("PreToolUse", env.payload())
    assert [r.command for r in fake.requests] == ["ok"]
    assert f"{path}: $.hooks.PreToolUse[0].hooks[0].timeout" in (verdict.system_message or "")
    skipped = [r for r in env.log() if r["outcome"] == "skipped"]
    assert skipped[0]["skip_reason"] == "invalid"


def test_project_hook_asking_for_host_is_a_load_error_and_never_runs(env: Env) -> None:
    env.write("project", hooks("PreToolUse", {"type": "command", "command": "evil", "sandbox": "host"}))
    ex, fake = env.executor()
    verdict = ex.dispatch("PreToolUse", env.payload())
    assert fake.requests == []
    assert "not allowed in project scope" in (verdict.system_message or "")


def test_user_host_hook_runs_on_the_host_backend(env: Env) -> None:
    env.write("user", hooks("PreToolUse", {"type": "command", "command": "h", "sandbox": "host"}, "d"))
    host, docker = FakeSandbox(), FakeSandbox()
    ex = HookExecutor(load_settings(home=env.home, managed_dir=env.managed),
                      sandboxes={"host": host, "docker": docker}, environ={})
    ex.dispatch("PreToolUse", env.payload())
    assert [r.command for r in host.requests] == ["h"]
    assert [r.command for r in docker.requests] == ["d"]


def test_unsupported_hook_type_is_skipped_and_reported(env: Env) -> None:
    env.write("user", hooks("PreToolUse", {"type": "prompt", "prompt": "judge this"}))
    ex, fake = env.executor()
    verdict = ex.dispatch("PreToolUse", env.payload())
    assert fake.requests == []
    assert "not supported" in (verdict.system_message or "")
    assert env.log()[0]["skip_reason"] == "unsupported_type"


def test_project_disable_all_cannot_switch_off_user_guards(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "user-guard"))
    env.write("project", hooks("PreToolUse", "project-hook", disableAllHooks=True))
    ex, fake = env.executor()
    ex.dispatch("PreToolUse", env.payload())
    assert [r.command for r in fake.requests] == ["user-guard"]


def test_managed_only_disables_every_other_scope(env: Env) -> None:
    env.write("managed", hooks("PreToolUse", "corp", allowManagedHooksOnly=True))
    env.write("user", hooks("PreToolUse", "mine"))
    ex, fake = env.executor()
    ex.dispatch("PreToolUse", env.payload())
    assert [r.command for r in fake.requests] == ["corp"]


def test_once_hooks_fire_once_per_session(env: Env) -> None:
    env.write("user", hooks("SessionStart", {"type": "command", "command": "hello", "once": True}))
    ex, fake = env.executor()
    for session in ("s1", "s1", "s2"):
        ex.dispatch("SessionStart", {"session_id": session, "cwd": str(env.project), "source": "startup"})
    assert len(fake.requests) == 2


def test_async_hooks_are_not_awaited(env: Env) -> None:
    env.write("user", hooks("PostToolUse", {"type": "command", "command": "slow", "async": True}, "fast"))
    release = threading.Event()
    done: list[str] = []

    def handler(req: RunRequest) -> RunResult:
        if req.command == "slow":
            release.wait(10)
        done.append(req.command)
        return RunResult(0, stdout=b'{"systemMessage": "from slow"}')

    ex, _ = env.executor(handler)
    verdict = ex.dispatch("PostToolUse", env.payload(tool_response={}))
    assert done == ["fast"]  # the verdict came back while "slow" still runs
    release.set()
    ex.close()  # waits for background hooks
    assert sorted(done) == ["fast", "slow"]
    assert [o.hook for o in verdict.outcomes] == ["fast"]


def test_deferred_async_hooks_run_when_asked(env: Env) -> None:
    env.write("user", hooks("Stop", {"type": "command", "command": "notify", "async": True}))
    ex, fake = env.executor()
    ex.dispatch("Stop", {"session_id": "s", "cwd": str(env.project)}, defer_async=True)
    assert fake.requests == []
    ex.run_deferred()
    assert [r.command for r in fake.requests] == ["notify"]


def test_sandbox_unavailable_follows_on_error(env: Env) -> None:
    env.write("user", hooks("PreToolUse",
                            {"type": "command", "command": "lenient"},
                            {"type": "command", "command": "strict", "on_error": "deny"}))

    def handler(req: RunRequest) -> RunResult:
        raise SandboxUnavailable("cannot reach the Docker engine: start Docker")

    ex, _ = env.executor(handler)
    verdict = ex.dispatch("PreToolUse", env.payload())
    assert verdict.decision == "deny"
    assert "strict" in (verdict.decision_reason or "")
    assert "start Docker" in (verdict.system_message or "")


def test_timeout_is_an_outcome_not_an_exception(env: Env) -> None:
    env.write("user", hooks("Stop", {"type": "command", "command": "slow", "timeout": 1}))
    ex, fake = env.executor(lambda req: RunResult(None, timed_out=True, duration=1.0))
    verdict = ex.dispatch("Stop", {"session_id": "s", "cwd": str(env.project)})
    assert not verdict.blocks
    assert "timed out after 1 s" in (verdict.system_message or "")
    assert fake.requests[0].timeout == 1.0
    assert env.log()[0]["timed_out"] is True


def test_backend_bug_does_not_cost_the_verdict(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "x"))

    def handler(req: RunRequest) -> RunResult:
        raise RuntimeError("boom")

    ex, _ = env.executor(handler)
    verdict = ex.dispatch("PreToolUse", env.payload())
    assert "internal error: RuntimeError: boom" in (verdict.system_message or "")


def test_request_carries_payload_env_and_profile(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKCAGE_CANARY", "secret")
    env.write("user", hooks("Stop", {"type": "command", "command": "c", "env": {"MODE": "strict"},
                                     "timeout": 5, "sandbox": {"workspace": "rw"}}))
    ex, fake = env.executor()
    ex.dispatch("Stop", {"session_id": "s", "cwd": str(env.project), "stop_hook_active": True})
    req = fake.requests[0]
    assert json.loads(req.stdin) == {"session_id": "s", "cwd": str(env.project),
                                     "stop_hook_active": True, "hook_event_name": "Stop"}
    assert req.env["CLAUDE_PROJECT_DIR"] == str(env.project.resolve())
    assert req.env["MODE"] == "strict"
    assert "HOOKCAGE_CANARY" not in req.env
    assert req.options.workspace == "rw" and req.timeout == 5
    assert req.labels["hookcage.session"] == "s"


def test_claude_project_dir_wins_over_payload_cwd(env: Env, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    env.write("project", hooks("Stop", "project-hook"))
    fake = FakeSandbox()
    ex = HookExecutor(load_settings(home=env.home, managed_dir=env.managed),
                      sandboxes={"docker": fake}, environ={"CLAUDE_PROJECT_DIR": str(env.project)})
    ex.grant([subject for _, subject in ex.pending_reviews(env.project)[0]])
    ex.dispatch("Stop", {"session_id": "s", "cwd": str(other)})
    assert [r.command for r in fake.requests] == ["project-hook"]
    # A repository's hook runs at the root its review resolved relative paths against (issue 11).
    assert fake.requests[0].cwd == str(env.project)


def test_run_log_has_one_line_per_hook_considered_with_secrets_redacted(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "deploy --token=abc123",
                            {"type": "command", "command": "off", "enabled": False}))
    ex, _ = env.executor(lambda req: RunResult(2, stderr=b"nope", duration=0.01))
    ex.dispatch("PreToolUse", env.payload())
    ran, skipped = env.log()
    assert ran["outcome"] == "ran" and ran["decision"] == "block" and ran["exit_code"] == 2
    assert ran["command"] == "deploy --token=***"
    for key in ("time", "session", "event", "hook_id", "scope", "source", "sandbox",
                "duration_ms", "timed_out", "oom_killed", "truncated", "dropped_capabilities"):
        assert key in ran
    assert skipped["outcome"] == "skipped" and skipped["skip_reason"] == "disabled"


def test_bad_payload_is_a_payload_error(env: Env) -> None:
    ex, _ = env.executor()
    with pytest.raises(PayloadError, match="missing the field 'tool_name'"):
        ex.dispatch("PreToolUse", {"session_id": "s"})
    with pytest.raises(PayloadError, match="unknown event"):
        ex.dispatch("BeforeLunch", {})


def test_inventory_says_why_a_hook_would_not_run(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "a", {"type": "http", "url": "x"}))
    ex, _ = env.executor()
    _, views = ex.inventory(env.project)
    assert [(v.to_json()["would_run"], v.to_json()["skip_reason"]) for v in views] == [
        (True, None), (False, "unsupported_type")]


def test_mount_symlinked_out_of_the_project_is_refused_before_launch(env: Env, tmp_path: Path) -> None:
    # Regression: "mounts": ["sock"] passed the pure check while sock -> /var/run/docker.sock.
    (env.project / "sock").symlink_to("/var/run/docker.sock")
    outside = tmp_path / "outside"
    outside.mkdir()
    (env.project / "secrets").symlink_to(outside)
    env.write("project", hooks("Stop",
                               {"type": "command", "command": "a", "sandbox": {"mounts": ["sock"]}},
                               {"type": "command", "command": "b", "sandbox": {"mounts": ["secrets"]}}))
    ex, fake = env.executor()
    ex.dispatch("Stop", {"session_id": "s", "cwd": str(env.project)})
    assert fake.requests == []
    reasons = [r["detail"] for r in env.log()]
    assert "resolves to the Docker socket" in reasons[0]
    assert "resolves outside the project" in reasons[1]


def test_a_disabled_copy_never_shadows_a_runnable_one(env: Env) -> None:
    env.write("managed", hooks("Stop", {"type": "command", "command": "same", "enabled": False}))
    env.write("user", hooks("Stop", "same"))
    ex, fake = env.executor()
    ex.dispatch("Stop", {"session_id": "s", "cwd": str(env.project)})
    assert [r.command for r in fake.requests] == ["same"]
