"""The real Claude Code and CodeBuddy Code CLIs, routed through hookcage (issue 12).

A repository's hooks live in the agent's own file (``.claude/settings.json``,
``.codebuddy/settings.json``), and the CLI alone runs them on the host the
moment the event fires (the baseline below). Routed, the CLI's user settings
send every event to ``hookcage dispatch --agent NAME`` and ``--setting-sources
user`` keeps the CLI from reading the repository's settings: the repository's
hook then runs only after ``hookcage trust``, and only in hookcage's container.

Each test plays a user: a repository (the ``workspace``), hookcage's isolated
home with every hook command on the allow-list (so that trust is the only gate
in play), the CLI with a throwaway home and a loopback stand-in model
(``agents.ModelStandIn``: Anthropic Messages for Claude Code, CodeBuddy's
custom model over OpenAI Chat Completions).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    ModelStandIn,
    ToolCall,
    claude_cli,
    codebuddy_cli,
    leftover_containers,
    point_codebuddy_at,
)
from support import CliUser, commands_in, hooks_run_under_gvisor

pytestmark = pytest.mark.docker

AGENTS = ("claude", "codebuddy")
HOOK_FILES = {"claude": ".claude/settings.json", "codebuddy": ".codebuddy/settings.json"}
"""Each agent's project hook file (the one the CLI alone runs)."""
CONTAINER_HOSTNAME = "hookcage"
"""The fixed hostname of hookcage's containers."""
REPLY = "stand-in model: done"


class Repo(CliUser):
    """A repository carrying agents' hook files, and a hookcage user in it."""

    def __init__(self, tmp: Path, root: Path) -> None:
        super().__init__(tmp, root, "real-agents")
        self.tmp = tmp

    def write(self, relative: str, value: dict[str, Any]) -> Path:
        """Write a hook file of the repository and put each of its commands on the allow-list."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text(json.dumps(value, indent=2))
        path.chmod(0o644)
        self.allow(*commands_in(value))
        return path

    def hooks(self, agent: str, hooks: dict[str, list[dict[str, Any]]]) -> Path:
        """``agent``'s project settings with these hook groups (Claude Code's shape)."""
        return self.write(HOOK_FILES[agent], {"hooks": hooks})

    def trust(self) -> str:
        proc = self.run("trust", "--all", "--yes")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    def log(self, session: str | None = None) -> list[dict[str, Any]]:
        """The run log's records (of one agent session)."""
        path = self.home / "runs.jsonl"
        if not path.exists():
            return []
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [r for r in records if session is None or r["session"] == session]


def group(command: str, matcher: str | None = None) -> list[dict[str, Any]]:
    """One hook group of one command hook."""
    entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
    if matcher is not None:
        entry["matcher"] = matcher
    return [entry]


def output(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def ran(records: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == event and r["outcome"] == "ran"]


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def binaries() -> dict[str, Path]:
    return {"claude": claude_cli(), "codebuddy": codebuddy_cli()}


@pytest.fixture
def repo(tmp_path: Path, workspace: Path, runner_image: str) -> Repo:
    return Repo(tmp_path, workspace)


@pytest.fixture
def model() -> Iterator[ModelStandIn]:
    with ModelStandIn(reply=REPLY) as stand_in:
        yield stand_in


@pytest.fixture(params=AGENTS)
def agent(request: pytest.FixtureRequest, binaries: dict[str, Path], repo: Repo, model: ModelStandIn,
          docker_api: Any) -> Iterator[Agent]:
    """The agent's CLI (a throwaway home, the stand-in model), not yet routed.

    Its sessions' hook containers are checked after the test: Claude Code's
    session ids are UUIDs, which the conftest cannot tell apart from another
    session's, so they are looked up here by id.
    """
    name = request.param
    cli = Agent(name, binaries[name], repo.tmp / f"{name}-home", repo.env, model=model)
    if name == "codebuddy":
        point_codebuddy_at(cli, model)
    yield cli
    left = leftover_containers(docker_api, cli.sessions)
    if left:
        pytest.fail(f"hook containers of {name}'s sessions left behind: {', '.join(left)}")


def run(agent: Agent, repo: Repo, prompt: str = "hello", *, routed: bool = True, tools: bool = False
        ) -> tuple[subprocess.CompletedProcess[str], str]:
    """``agent -p PROMPT`` in the repository; the process and its session id."""
    args = ["--allowedTools", "Bash"] if tools else []
    proc = agent.run(prompt, repo.root, routed=routed, args=args)
    return proc, agent.sessions[-1]


# --------------------------------------------------------------------------
# The threat, and how the CLI is kept from running the repository's hooks
# --------------------------------------------------------------------------


def test_alone_the_cli_runs_the_repository_hook_on_the_host(agent: Agent, repo: Repo) -> None:
    marker = repo.tmp / "host-marker"
    repo.hooks(agent.name, {"SessionStart": group(f"touch {marker}")})
    proc, _ = run(agent, repo, routed=False)
    assert proc.returncode == 0, output(proc)
    assert marker.exists(), "the CLI alone did not run the repository's SessionStart hook"
    assert REPLY in proc.stdout


def test_setting_sources_user_reads_only_the_user_settings(agent: Agent, repo: Repo) -> None:
    """What ``--setting-sources user`` loads: the user's file (and ``--settings``), never
    the repository's project or local settings."""
    def touch(tag: str) -> dict[str, Any]:
        return {"hooks": {"SessionStart": group(f"touch {repo.tmp / ('marker-' + tag)}")}}

    folder = Path(HOOK_FILES[agent.name]).parent
    repo.write(str(folder / "settings.json"), touch("project"))
    repo.write(str(folder / "settings.local.json"), touch("local"))
    agent.user_settings.write_text(json.dumps(touch("user")))
    extra = repo.tmp / "extra-settings.json"
    extra.write_text(json.dumps(touch("flag")))
    proc, _ = run(agent, repo, routed=True)
    assert proc.returncode == 0, output(proc)
    markers = sorted(p.name for p in repo.tmp.glob("marker-*"))
    assert markers == ["marker-user"]
    proc = agent.run("hello", repo.root, routed=True, args=["--settings", str(extra)])
    assert proc.returncode == 0, output(proc)
    markers = sorted(p.name for p in repo.tmp.glob("marker-*"))
    assert markers == ["marker-flag", "marker-user"]


# --------------------------------------------------------------------------
# Routed: untrusted hooks do not run; trusted ones run in the container
# --------------------------------------------------------------------------


def test_routed_an_untrusted_repository_hook_does_not_run(agent: Agent, repo: Repo, model: ModelStandIn) -> None:
    marker = repo.tmp / "host-marker"
    hook_file = repo.hooks(agent.name, {
        "SessionStart": group(f"touch {marker}"),
        "UserPromptSubmit": group('echo "blocked in $(hostname)" >&2; exit 2'),
    })
    agent.route_to_hookcage()
    proc, session = run(agent, repo, "what is in this repository?")
    assert proc.returncode == 0, output(proc)
    assert not marker.exists(), "the repository's SessionStart hook ran on the host"
    assert REPLY in proc.stdout, "the agent did not answer"
    assert "blocked in" not in output(proc)
    assert model.saw("what is in this repository?")
    records = repo.log(session)
    assert {(r["event"], r["outcome"], r["skip_reason"]) for r in records} == {
        ("SessionStart", "skipped", "untrusted"), ("UserPromptSubmit", "skipped", "untrusted")}
    assert {r["source"] for r in records} == {str(hook_file)}


def test_routed_a_trusted_repository_hook_runs_in_the_container(
    agent: Agent, repo: Repo, model: ModelStandIn, docker_api: Any
) -> None:
    listener = Listener()
    gateway = bridge_gateway(docker_api)
    marker = repo.tmp / "host-marker"
    probe = (
        'if touch "$CLAUDE_PROJECT_DIR/pwned" 2>/dev/null; then w=workspace-written; else w=workspace-read-only; fi; '
        f"if python3 -c \"import socket; socket.create_connection(('{gateway}', {listener.port}), 3)\" 2>/dev/null; "
        "then n=network; else n=no-network; fi; "
        'echo "blocked in $(hostname): $w, $n" >&2; exit 2'
    )
    repo.hooks(agent.name, {"SessionStart": group(f"touch {marker}"), "UserPromptSubmit": group(probe)})
    repo.trust()
    agent.route_to_hookcage()
    try:
        proc, session = run(agent, repo, "summarise the repository")
    finally:
        listener.close()
    assert f"blocked in {CONTAINER_HOSTNAME}: workspace-read-only, no-network" in output(proc)
    assert not (repo.root / "pwned").exists()
    assert not marker.exists(), "the SessionStart hook wrote on the host"
    assert listener.connections == 0
    assert not model.saw("summarise the repository"), "a blocked prompt reached the model"
    records = repo.log(session)
    assert all(r["outcome"] == "ran" and r["sandbox"].startswith("docker(") for r in records), records
    (start,) = ran(records, "SessionStart")
    if not hooks_run_under_gvisor(docker_api):  # under gVisor the touch lands in the sandbox's tmpfs
        assert start["exit_code"] != 0 and "touch" in (start["error"] or "")
    (prompt,) = ran(records, "UserPromptSubmit")
    assert (prompt["exit_code"], prompt["decision"]) == (2, "block")


def test_a_trusted_hook_s_context_reaches_the_model(agent: Agent, repo: Repo, model: ModelStandIn) -> None:
    repo.hooks(agent.name, {"UserPromptSubmit": group('echo "context from $(hostname)"')})
    agent.route_to_hookcage()
    proc, _ = run(agent, repo, "first")
    assert REPLY in proc.stdout, output(proc)
    assert not model.saw(f"context from {CONTAINER_HOSTNAME}")
    repo.trust()
    proc, session = run(agent, repo, "second")
    assert REPLY in proc.stdout, output(proc)
    assert model.saw(f"context from {CONTAINER_HOSTNAME}")
    assert [r["outcome"] for r in repo.log(session)] == ["ran"]


# --------------------------------------------------------------------------
# Tool calls: a trusted PreToolUse hook decides; an untrusted one is not run
# --------------------------------------------------------------------------


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted"])
def test_a_repository_pretooluse_hook_denies_the_tool_only_when_trusted(
    agent: Agent, repo: Repo, model: ModelStandIn, trusted: bool
) -> None:
    tool_marker = repo.root / "tool-marker"
    model.tool_call = ToolCall("Bash", {"command": "touch tool-marker", "description": "Create a file"})
    repo.hooks(agent.name, {"PreToolUse": group('echo "no tools in this repository" >&2; exit 2', "Bash")})
    if trusted:
        repo.trust()
    agent.route_to_hookcage()
    proc, session = run(agent, repo, "create the file", tools=True)
    assert proc.returncode == 0, output(proc)
    assert REPLY in proc.stdout
    (pre,) = [r for r in repo.log(session) if r["event"] == "PreToolUse"]
    if trusted:
        assert not tool_marker.exists(), "the tool ran although the trusted hook denied it"
        assert model.saw("no tools in this repository"), "the deny's reason did not reach the model"
        assert (pre["outcome"], pre["exit_code"]) == ("ran", 2)
        assert pre["sandbox"].startswith("docker(")
    else:
        assert tool_marker.exists(), "the tool did not run (the untrusted hook must not decide)"
        assert (pre["outcome"], pre["skip_reason"]) == ("skipped", "untrusted")


def test_routed_every_event_the_cli_fires_is_answered(agent: Agent, repo: Repo, model: ModelStandIn) -> None:
    """A blanket route sends hookcage every event the CLI fires during a tool turn:
    hookcage must answer each (exit 0 with nothing to say), never fail it."""
    model.tool_call = ToolCall("Bash", {"command": "true", "description": "Nothing"})
    agent.route_to_hookcage()
    debug = agent.home / "debug.log"
    args = ["--allowedTools", "Bash"]
    args += ["--debug-file", str(debug)] if agent.name == "claude" else ["--debug", "hooks"]
    proc = agent.run("run a tool", repo.root, routed=True, args=args)
    assert REPLY in proc.stdout, output(proc)
    if agent.name == "codebuddy":
        (debug,) = (agent.config_dir / "debug").glob(f"{agent.sessions[-1]}*")
    text = debug.read_text(errors="replace")
    routes = [line for line in text.splitlines() if "dispatch --agent" in line]
    assert routes, "no route to hookcage ran"
    if agent.name == "claude":
        failed = [line for line in text.splitlines() if re.search(r"Hook \w+ \(\w+\) error", line)]
    else:
        failed = [line for line in routes if re.search(r"Hook exited with code [1-9]", line)]
    assert not failed, "\n".join(line[:300] for line in failed)


# --------------------------------------------------------------------------
# A repository with every agent's files: a session runs its own agent's hooks
# --------------------------------------------------------------------------


def test_a_session_runs_exactly_its_own_agent_s_hooks(agent: Agent, repo: Repo, model: ModelStandIn) -> None:
    def context(tag: str) -> str:
        return f"echo context-from-{tag}"

    for name in AGENTS:
        repo.hooks(name, {"SessionStart": group(context(f"{name}-start"), "*"),
                          "UserPromptSubmit": group(context(f"{name}-prompt"))})
    repo.write(".cursor/hooks.json", {"version": 1, "hooks": {
        "sessionStart": [{"command": context("cursor-start")}],
        "beforeSubmitPrompt": [{"command": context("cursor-prompt")}]}})
    repo.write(".gemini/settings.json", {"hooks": {
        "SessionStart": group(context("gemini-start"), "*"),
        "BeforeAgent": group(context("gemini-prompt"), "*")}})
    repo.trust()
    agent.route_to_hookcage()
    proc, session = run(agent, repo, "hello")
    assert REPLY in proc.stdout, output(proc)
    records = repo.log(session)
    assert {(r["event"], r["command"]) for r in records if r["outcome"] == "ran"} == {
        ("SessionStart", context(f"{agent.name}-start")),
        ("UserPromptSubmit", context(f"{agent.name}-prompt")),
    }
    assert {r["source"] for r in records} == {str(repo.root / HOOK_FILES[agent.name])}
    assert model.saw(f"context-from-{agent.name}-prompt")
    for other in ("cursor", "gemini", *(a for a in AGENTS if a != agent.name)):
        assert not model.saw(f"context-from-{other}"), other


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


class Listener:
    """A TCP listener on every host address: counts who reached it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("0.0.0.0", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def bridge_gateway(client: Any) -> str:
    """The host's address on the engine's default bridge (what a container with a network reaches)."""
    try:
        config = client.inspect_network("bridge")["IPAM"]["Config"]
        return str(config[0]["Gateway"])
    except Exception:
        return "172.17.0.1"
