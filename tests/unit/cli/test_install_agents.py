"""``hookcage install`` for Codex, jcode, ok, and the refusals (Copilot CLI, Gemini CLI, Cursor,
the TypeScript agent, infer): the files written, checked against the agents' own docs and source."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

from executor.core.hooks import Scope
from executor.core.install import NotInstallable, Plan
from executor.dialects import DIALECTS
from executor.dialects.base import Where

HOOKCAGE = "/opt/hc/bin/hookcage"
HOME = "/home/u"
W = Where(None, HOME, {})


def plan(agent: str, mode: str = "user", files: dict[str, bytes] | None = None, where: Where = W) -> Plan:
    return DIALECTS[agent].install(mode, where, (files or {}).get, HOOKCAGE)  # type: ignore[arg-type]


def content(p: Plan) -> dict[str, bytes]:
    out = {}
    for e in p.edits:
        assert e.content is not None
        out[e.path] = e.content
    return out


def handler(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, **extra}


def assert_idempotent(agent: str, mode: str, files: dict[str, bytes]) -> None:
    first = content(plan(agent, mode, files))
    again = content(plan(agent, mode, {**files, **first}))
    assert again == first


# -- Codex -----------------------------------------------------------------------------------

CODEX_CMD = f"{HOOKCAGE} dispatch --agent codex"
CODEX_EVENTS = ["PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact", "PostCompact", "SessionStart",
                "UserPromptSubmit", "Stop", "SubagentStart", "SubagentStop", "SessionEnd", "StopFailure",
                "Interrupt"]
# Where Codex reads a matcher (developers.openai.com/codex/hooks "Matchers"); "*" matches all
# (codex-rs hooks/src/events/common.rs matches_matcher).
CODEX_MATCHED = {"PreToolUse", "PermissionRequest", "PostToolUse", "SessionStart", "PreCompact", "PostCompact",
                 "SubagentStart", "SubagentStop"}


def codex_group(event: str) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": [handler(CODEX_CMD)]}
    return {"matcher": "*", **group} if event in CODEX_MATCHED else group


REQUIREMENTS = b'''# Acme's Codex policy (keep this comment)
allowed_sandbox_modes = ["read-only", "workspace-write"]  # and this one

[hooks]
managed_dir = "/enterprise/hooks"

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "/enterprise/hooks/audit.sh"
'''


def test_codex_managed_writes_the_documented_requirements_shape() -> None:
    # developers.openai.com/codex/hooks "Managed hooks" and openai/codex docs/config.md: top-level
    # allow_managed_hooks_only = true (only in requirements.toml); [hooks] with managed_dir and
    # [[hooks.<Event>]] groups of [[hooks.<Event>.hooks]] handlers.
    p = plan("codex", "managed")
    [(path, raw)] = content(p).items()
    assert path == "/etc/codex/requirements.toml"
    data = tomllib.loads(raw.decode())
    assert data["allow_managed_hooks_only"] is True
    # codex-rs hooks/src/engine/discovery.rs managed_hooks_source_path: no existing absolute
    # managed_dir, no managed hooks; hookcage's own directory exists.
    assert data["hooks"]["managed_dir"] == "/opt/hc/bin"
    assert data["hooks"] == {"managed_dir": "/opt/hc/bin", **{e: [codex_group(e)] for e in CODEX_EVENTS}}
    assert "[[hooks.PreToolUse.hooks]]" in raw.decode()
    assert any("restart" in n for n in p.notes)


def test_codex_managed_keeps_comments_other_tables_and_the_admins_hooks() -> None:
    raw = content(plan("codex", "managed", {"/etc/codex/requirements.toml": REQUIREMENTS}))[
        "/etc/codex/requirements.toml"].decode()
    assert raw.startswith("# Acme's Codex policy (keep this comment)\n")
    assert '["read-only", "workspace-write"]  # and this one' in raw
    data = tomllib.loads(raw)
    assert data["hooks"]["managed_dir"] == "/enterprise/hooks"  # an existing one is kept
    assert data["hooks"]["Stop"] == [{"hooks": [handler("/enterprise/hooks/audit.sh")]}, codex_group("Stop")]
    assert data["allow_managed_hooks_only"] is True


def test_codex_managed_is_idempotent_and_turns_a_false_switch_on() -> None:
    assert_idempotent("codex", "managed", {})
    assert_idempotent("codex", "managed", {"/etc/codex/requirements.toml": REQUIREMENTS})
    off = b"allow_managed_hooks_only = false\n"
    p = plan("codex", "managed", {"/etc/codex/requirements.toml": off})
    assert tomllib.loads(content(p)["/etc/codex/requirements.toml"].decode())["allow_managed_hooks_only"] is True
    assert any("was False" in n for n in p.notes)


def test_codex_refuses_a_requirements_file_it_cannot_merge() -> None:
    with pytest.raises(NotInstallable, match="not valid TOML"):
        plan("codex", "managed", {"/etc/codex/requirements.toml": b"[hooks\n"})
    with pytest.raises(NotInstallable, match="inline table"):
        plan("codex", "managed", {"/etc/codex/requirements.toml": b"hooks = {}\n"})


def test_codex_user_routes_go_to_hooks_json_and_say_what_still_runs() -> None:
    # ~/.codex/hooks.json, $CODEX_HOME replacing ~/.codex (developers.openai.com/codex/hooks);
    # the file's root is HooksFile {hooks} (codex-rs config/src/hook_config.rs).
    p = plan("codex")
    assert json.loads(content(p)[f"{HOME}/.codex/hooks.json"]) == {
        "hooks": {e: [codex_group(e)] for e in CODEX_EVENTS}}
    notes = " ".join(p.notes)
    assert "/hooks" in notes and "trust" in notes and ".codex hooks" in notes
    moved = plan("codex", where=Where(None, HOME, {"CODEX_HOME": "/srv/codex"}))
    assert [e.path for e in moved.edits] == ["/srv/codex/hooks.json"]


def test_codex_user_keeps_the_users_hooks() -> None:
    mine = {"description": "mine", "hooks": {"Stop": [{"hooks": [handler("say done")]}]}}
    files = {f"{HOME}/.codex/hooks.json": json.dumps(mine).encode()}
    data = json.loads(content(plan("codex", files=files))[f"{HOME}/.codex/hooks.json"])
    assert data["description"] == "mine"
    assert data["hooks"]["Stop"] == [mine["hooks"]["Stop"][0], codex_group("Stop")]
    assert_idempotent("codex", "user", files)


# -- jcode -----------------------------------------------------------------------------------

JCODE_CMD = f"{HOOKCAGE} dispatch --agent jcode"


def test_jcode_user_routes_every_event() -> None:
    # cnjack/jcode internal/hooks/types.go: Claude Code's shape, timeout in seconds; its eight
    # events; match.go matchesTool: "*" matches everything.
    p = plan("jcode")
    data = json.loads(content(p)[f"{HOME}/.jcode/hooks.json"])
    route = handler(JCODE_CMD, timeout=600)
    assert data == {"hooks": {
        "SessionStart": [{"matcher": "*", "hooks": [route]}],
        "UserPromptSubmit": [{"hooks": [route]}],
        "PreToolUse": [{"matcher": "*", "hooks": [route]}],
        "PostToolUse": [{"matcher": "*", "hooks": [route]}],
        "PostToolUseFailure": [{"matcher": "*", "hooks": [route]}],
        "PreCompact": [{"matcher": "*", "hooks": [route]}],
        "PostCompact": [{"matcher": "*", "hooks": [route]}],
        "Stop": [{"hooks": [route]}],
    }}
    assert any("JCODE_HOOKS_TRUST_PROJECT" in n for n in p.notes)
    assert_idempotent("jcode", "user", {})


def test_jcode_has_no_managed_file() -> None:
    with pytest.raises(NotInstallable) as err:
        plan("jcode", "managed")
    assert "JCODE_HOOKS_TRUST_PROJECT=1" in err.value.explanation
    assert err.value.offer is not None and err.value.offer.edits[0].path == f"{HOME}/.jcode/hooks.json"


# -- ok --------------------------------------------------------------------------------------

OK_CMD = f"{HOOKCAGE} dispatch --agent ok"


def test_ok_user_routes_in_oks_flat_shape() -> None:
    # NB-Agent/ok internal/hook/hook.go: HookConfig {match, command, description, timeout (ms), cwd};
    # compileMatch: "" or "*" = every tool; timeout() clamps to 60 s (PreToolUse,
    # UserPromptSubmit) and 300 s (the others).
    existing = {"theme": "dark", "hooks": {"PreToolUse": [{"match": "bash", "command": "./guard.sh"}]}}
    files = {f"{HOME}/.ok/settings.json": json.dumps(existing).encode()}
    p = plan("ok", files=files)
    data = json.loads(content(p)[f"{HOME}/.ok/settings.json"])
    assert data == {"theme": "dark", "hooks": {
        "PreToolUse": [{"match": "bash", "command": "./guard.sh"},
                       {"match": "*", "command": OK_CMD, "description": "hookcage", "timeout": 60000}],
        "PostToolUse": [{"match": "*", "command": OK_CMD, "description": "hookcage", "timeout": 300000}],
        "UserPromptSubmit": [{"command": OK_CMD, "description": "hookcage", "timeout": 60000}],
        "Stop": [{"command": OK_CMD, "description": "hookcage", "timeout": 300000}],
    }}
    assert any("trust.json" in n and "never" in n for n in p.notes)
    assert all("trust.json" not in e.path for e in p.edits)
    assert_idempotent("ok", "user", files)


def test_ok_has_no_managed_file() -> None:
    with pytest.raises(NotInstallable) as err:
        plan("ok", "managed")
    assert "~/.ok/trust.json" in err.value.explanation


def test_a_file_already_routed_keeps_its_own_bytes() -> None:
    mine = json.dumps(json.loads(content(plan("ok"))[f"{HOME}/.ok/settings.json"]), indent=4).encode()
    assert content(plan("ok", files={f"{HOME}/.ok/settings.json": mine}))[f"{HOME}/.ok/settings.json"] == mine


# -- every plan: hookcage reads its own routes as routes -----------------------------------------


def offered(agent: str, mode: str = "user") -> Plan:
    try:
        return plan(agent, mode)
    except NotInstallable as err:
        assert err.offer is not None
        return err.offer


@pytest.mark.parametrize(("agent", "mode"), [("codex", "user"), ("codex", "managed"), ("jcode", "user"),
                                             ("ok", "user"), ("copilot", "user"), ("gemini", "user"),
                                             ("cursor", "user")])
def test_hookcage_reads_every_route_it_writes_as_its_own(agent: str, mode: str) -> None:
    for path, raw in content(offered(agent, mode)).items():
        data = tomllib.loads(raw.decode()) if path.endswith(".toml") else json.loads(raw)
        parsed = DIALECTS[agent].parse(data, scope=Scope.USER, source=path, project_root=None)
        assert parsed.hooks == () and parsed.routes and parsed.problems == ()


# -- the refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(("agent", "still_runs", "offer_path"), [
    ("copilot", ".github/hooks", f"{HOME}/.copilot/hooks/hookcage.json"),
    ("gemini", ".gemini/settings.json", f"{HOME}/.gemini/settings.json"),
    ("cursor", ".cursor/hooks.json", f"{HOME}/.cursor/hooks.json"),
    ("grok", ".codebuddy/hooks.json", None),
    ("infer", ".infer/hooks.yaml", None),
])
@pytest.mark.parametrize("mode", ["user", "managed"])
def test_agents_that_cannot_be_taken_over_say_what_still_runs(agent: str, still_runs: str,
                                                             offer_path: str | None, mode: str) -> None:
    with pytest.raises(NotInstallable) as err:
        plan(agent, mode)
    explanation = err.value.explanation
    assert still_runs in explanation and "outside hookcage" in explanation
    assert "\n" not in explanation  # one paragraph
    if offer_path is None:
        assert err.value.offer is None and "No routing can be added" in explanation
    else:
        assert err.value.offer is not None and [e.path for e in err.value.offer.edits] == [offer_path]


def test_copilot_offer_is_its_documented_user_hook_file() -> None:
    # docs.github.com/en/copilot/reference/hooks-reference: ~/.copilot/hooks/*.json
    # ($COPILOT_HOME/hooks/), {"version": 1, "hooks": {camelCaseEvent: [{type, bash, timeoutSec}]}}.
    data = json.loads(content(offered("copilot"))[f"{HOME}/.copilot/hooks/hookcage.json"])
    cmd = f"{HOOKCAGE} dispatch --agent copilot"
    assert data["version"] == 1
    assert data["hooks"]["preToolUse"] == [{"type": "command", "bash": cmd, "timeoutSec": 600}]
    assert set(data["hooks"]) == {"sessionStart", "sessionEnd", "userPromptSubmitted", "preToolUse", "postToolUse",
                                  "postToolUseFailure", "agentStop", "subagentStart", "subagentStop", "preCompact",
                                  "permissionRequest", "notification", "errorOccurred"}
    moved = offered_with("copilot", {"COPILOT_HOME": "/srv/cp"})
    assert [e.path for e in moved.edits] == ["/srv/cp/hooks/hookcage.json"]


def offered_with(agent: str, environ: dict[str, str]) -> Plan:
    with pytest.raises(NotInstallable) as err:
        plan(agent, where=Where(None, HOME, environ))
    assert err.value.offer is not None
    return err.value.offer


def test_gemini_offer_uses_geminis_event_names() -> None:
    # google-gemini/gemini-cli hooks/types.ts HookEventName; migrate.ts EVENT_MAPPING (the twins).
    cmd = f"{HOOKCAGE} dispatch --agent gemini"
    data = json.loads(content(offered("gemini"))[f"{HOME}/.gemini/settings.json"])
    assert set(data["hooks"]) == {"BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent", "PreCompress",
                                  "SessionStart", "SessionEnd", "Notification"}
    assert data["hooks"]["BeforeTool"] == [{"matcher": "*", "hooks": [handler(cmd)]}]
    assert data["hooks"]["BeforeAgent"] == [{"hooks": [handler(cmd)]}]
    moved = offered_with("gemini", {"GEMINI_CLI_HOME": "/srv/g"})
    assert [e.path for e in moved.edits] == ["/srv/g/.gemini/settings.json"]


def test_cursor_offer_routes_each_twin_once() -> None:
    cmd = f"{HOOKCAGE} dispatch --agent cursor"
    existing = {"version": 1, "hooks": {"afterFileEdit": [{"command": "./fmt.sh"}]}}
    files = {f"{HOME}/.cursor/hooks.json": json.dumps(existing).encode()}
    with pytest.raises(NotInstallable) as err:
        plan("cursor", files=files)
    assert err.value.offer is not None
    data = json.loads(content(err.value.offer)[f"{HOME}/.cursor/hooks.json"])
    assert data["hooks"]["afterFileEdit"] == [{"command": "./fmt.sh"}]
    assert data["hooks"]["preToolUse"] == [{"command": cmd}]
    assert "beforeShellExecution" not in data["hooks"]  # preToolUse covers it: hookcage would run twice
