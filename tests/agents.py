"""Real agents for the tests: the Claude Code and CodeBuddy Code CLIs, and a stand-in model.

- :func:`claude_cli` / :func:`codebuddy_cli`: the CLI binary, taken from its
  PyPI wheel (pinned below) with ``pip download`` and cached under
  ``~/.cache/hookcage-tests/agents/<package>-<version>/``; the test is
  skipped, with the reason, only when the wheel cannot be had.
- :class:`ModelStandIn`: a loopback model on 127.0.0.1 that speaks the
  Anthropic Messages API (Claude Code) and OpenAI Chat Completions
  (CodeBuddy's custom models), both streamed, scripted per test (first turn:
  call a tool; the turn after the tool's result: a text answer), and records
  every request so a test can assert what reached the model.
- :class:`Agent`: one CLI, with a throwaway home, that runs ``-p PROMPT`` in a
  repository, either as it comes (the repository's own hook files run on the
  host) or routed: its user settings send every event to ``hookcage dispatch
  --agent NAME`` and ``--setting-sources user`` keeps the CLI from reading the
  repository's settings at all.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------
# The CLIs, from their wheels
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Wheel:
    """Where an agent's CLI comes from: a PyPI wheel and the binary's path in it."""

    package: str
    version: str
    member: str


CLAUDE_WHEEL = Wheel("claude-agent-sdk", "0.2.187", "claude_agent_sdk/_bundled/claude")
"""Claude Code 2.1.330."""
CODEBUDDY_WHEEL = Wheel("codebuddy-agent-sdk", "0.3.274", "codebuddy_agent_sdk/bin/codebuddy-headless")
"""CodeBuddy Code 2.163.0."""

CACHE = Path(os.environ.get("HOOKCAGE_TEST_CACHE") or Path.home() / ".cache" / "hookcage-tests") / "agents"
"""Where the binaries are kept between runs (``$HOOKCAGE_TEST_CACHE/agents`` when set)."""
DOWNLOAD_TIMEOUT = 900
NETWORK_TROUBLE = re.compile(
    r"NewConnectionError|Name or service not known|Temporary failure in name resolution|Network is unreachable"
    r"|ConnectTimeout|Read timed out|ProxyError|SSLError|Connection refused|Could not fetch URL")
"""pip's words for "PyPI cannot be reached": the only reason to skip."""


def agent_binary(wheel: Wheel, cache: Path = CACHE) -> Path:
    """The wheel's binary, executable, downloaded and extracted the first time.

    Concurrent sessions wait for each other on a lock file; the binary appears
    under its final name only once whole.
    """
    folder = cache / f"{wheel.package}-{wheel.version}"
    target = folder / Path(wheel.member).name
    if target.is_file() and os.access(target, os.X_OK):
        return target
    import pytest  # here, so that benchmarks/agent_sessions.py can import this module without pytest
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file() and os.access(target, os.X_OK):
            return target
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--retries", "2",
                   "--timeout", "30", "--disable-pip-version-check", f"{wheel.package}=={wheel.version}", "-d", tmp]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT)
            except subprocess.TimeoutExpired:
                pytest.skip(f"PyPI too slow: pip download {wheel.package}=={wheel.version} "
                            f"took over {DOWNLOAD_TIMEOUT} s")
            wheels = sorted(Path(tmp).glob("*.whl"))
            if proc.returncode != 0 or not wheels:
                output = proc.stderr + proc.stdout
                trouble = [line.strip() for line in output.splitlines() if NETWORK_TROUBLE.search(line)]
                if trouble:
                    pytest.skip(f"PyPI cannot be reached to download {wheel.package}=={wheel.version} "
                                f"(the wheel that carries the agent's CLI): {trouble[-1][:300]}")
                pytest.fail(f"pip download {wheel.package}=={wheel.version} failed:\n{output}")
            with zipfile.ZipFile(wheels[0]) as zf:
                try:
                    info = zf.getinfo(wheel.member)
                except KeyError:
                    raise AssertionError(f"{wheels[0].name} has no {wheel.member}") from None
                partial = folder / f".{target.name}.partial"
                with zf.open(info) as src, open(partial, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
            partial.chmod(0o755)
            partial.replace(target)
    return target


def claude_cli() -> Path:
    """The Claude Code CLI (``claude``) of :data:`CLAUDE_WHEEL`."""
    return agent_binary(CLAUDE_WHEEL)


def codebuddy_cli() -> Path:
    """The CodeBuddy Code CLI (``codebuddy-headless``) of :data:`CODEBUDDY_WHEEL`."""
    return agent_binary(CODEBUDDY_WHEEL)


# --------------------------------------------------------------------------
# A stand-in model on the loopback
# --------------------------------------------------------------------------


@dataclass
class ToolCall:
    """What the stand-in model asks for on a turn that is not answering a tool result."""

    name: str
    input: dict[str, Any]


@dataclass
class Request:
    """One request that reached the stand-in."""

    method: str
    path: str
    body: Any

    @property
    def text(self) -> str:
        return json.dumps(self.body)


@dataclass
class ModelStandIn:
    """A loopback model: Anthropic Messages (``POST /v1/messages``) and OpenAI Chat
    Completions (``POST .../chat/completions``), streamed or not.

    A conversation turn that does not answer a tool result gets ``tool_call``
    (when set and the request offers that tool); so does a turn that answers
    fewer than ``calls`` tool results in a row (:meth:`next_tool` says which
    call, a subclass may vary it); every other turn gets ``reply`` as text and
    ``end_turn``. ``count_tokens`` and anything else the
    CLIs ask at start get a harmless answer. Every request is kept in
    ``requests``.
    """

    tool_call: ToolCall | None = None
    reply: str = "stand-in model: done"
    requests: list[Request] = field(default_factory=list)
    calls: int = 1
    """How many tool calls in a row before the text answer."""

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()
        self._ids = 0

    # -- lifecycle -----------------------------------------------------------

    def __enter__(self) -> ModelStandIn:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stand_in._record(self, None)
                _send_json(self, {"data": [], "object": "list"})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                stand_in._record(self, body)
                path = self.path.split("?", 1)[0]
                if path.endswith("/count_tokens"):
                    _send_json(self, {"input_tokens": 12})
                elif path.endswith("/messages") and isinstance(body, dict):
                    stand_in._messages(self, body)
                elif path.endswith("/chat/completions") and isinstance(body, dict):
                    stand_in._chat(self, body)
                else:
                    _send_json(self, {})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="model-stand-in", daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (Claude Code's ``ANTHROPIC_BASE_URL``)."""
        assert self._server is not None, "the stand-in is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- what reached it -----------------------------------------------------

    def conversation(self) -> list[Request]:
        """The model turns (Messages or Chat Completions requests)."""
        return [r for r in self.requests if r.method == "POST" and isinstance(r.body, dict)
                and ("messages" in r.body) and not r.path.split("?")[0].endswith("/count_tokens")]

    def saw(self, text: str) -> bool:
        """Whether ``text`` appears in any model turn's request body."""
        return any(text in r.text for r in self.conversation())

    # -- answers ---------------------------------------------------------------

    def _record(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        with self._lock:
            self.requests.append(Request(handler.command, handler.path, body))

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}{self._ids:04d}{uuid.uuid4().hex[:16]}"

    def next_tool(self, answered: int) -> ToolCall | None:
        """The tool call to ask for after ``answered`` tool results in a row (None: answer in text)."""
        return self.tool_call if answered < self.calls else None

    def _wanted_tool(self, tools: list[Any], answered: int) -> ToolCall | None:
        call = self.next_tool(answered)
        return call if call is not None and call.name in tools else None

    def _messages(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        messages = body.get("messages") or [{}]
        answered = 0  # tool results since the last prompt
        for message in reversed(messages):
            content = message.get("content") if isinstance(message, dict) else None
            if not isinstance(message, dict) or message.get("role") != "user":
                continue
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
                if isinstance(content, list) else []
            if not results:
                break
            answered += len(results)
        tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        model = body.get("model", "claude-stand-in")
        call = self._wanted_tool(tools, answered)
        if call is not None:
            block: dict[str, Any] = {"type": "tool_use", "id": self._next_id("toolu_"),
                                     "name": call.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(call.input)}
            full = {**block, "input": call.input}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": self.reply}
            full = {"type": "text", "text": self.reply}
            stop = "end_turn"
        msg_id = self._next_id("msg_")
        usage = {"input_tokens": 12, "output_tokens": 6, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if not body.get("stream"):
            message = {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                       "content": [full], "stop_reason": stop, "stop_sequence": None, "usage": usage}
            _send_json(h, message)
            return
        events = [
            ("message_start", {"type": "message_start", "message": {
                "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 6}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        self._stream(h, (f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events))

    def _chat(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        messages = body.get("messages") or [{}]
        answered = 0  # tool results since the last prompt
        for entry in reversed(messages):
            role = entry.get("role") if isinstance(entry, dict) else None
            if role == "tool":
                answered += 1
            elif role == "user":
                break
        tools = [((t.get("function") or {}).get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]
        model = body.get("model", "stand-in")
        chunk_id = self._next_id("chatcmpl-")
        wanted = self._wanted_tool(tools, answered)
        if wanted is not None:
            call = {"index": 0, "id": self._next_id("call_"), "type": "function",
                    "function": {"name": wanted.name, "arguments": json.dumps(wanted.input)}}
            delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": self.reply}
            message = {"role": "assistant", "content": self.reply}
            finish = "stop"
        usage = {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}
        base = {"id": chunk_id, "created": 1, "model": model}
        if not body.get("stream"):
            _send_json(h, {**base, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "message": message, "finish_reason": finish}]})
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        chunks = [
            {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**chunk, "choices": [], "usage": usage},
        ]
        self._stream(h, [*(f"data: {json.dumps(c)}\n\n" for c in chunks), "data: [DONE]\n\n"])

    @staticmethod
    def _stream(h: BaseHTTPRequestHandler, frames: Any) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "close")
        h.end_headers()
        for frame in frames:
            h.wfile.write(frame.encode())
            h.wfile.flush()
        h.close_connection = True


def _send_json(handler: BaseHTTPRequestHandler, value: Any) -> None:
    data = json.dumps(value).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


# --------------------------------------------------------------------------
# The agents, as a user runs them
# --------------------------------------------------------------------------

CLAUDE_EVENTS = (
    "SessionStart", "Setup", "InstructionsLoaded", "UserPromptSubmit", "UserPromptExpansion",
    "PreToolUse", "PermissionRequest", "PermissionDenied", "PostToolUse", "PostToolUseFailure",
    "PostToolBatch", "Notification", "SubagentStart", "SubagentStop", "TaskCreated", "TaskCompleted",
    "Stop", "StopFailure", "TeammateIdle", "ConfigChange", "CwdChanged", "DirectoryAdded",
    "WorktreeRemove", "PreCompact", "PostCompact", "SessionEnd", "Elicitation", "ElicitationResult",
)
"""Claude Code's events a blanket route may take: all 31 but WorktreeCreate (its hook
replaces worktree creation), FileChanged (its matcher is the watch list) and
MessageDisplay (fires per streamed chunk)."""
CODEBUDDY_EVENTS = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Notification",
    "SubagentStop", "Stop", "PreCompact", "SessionEnd",
)
"""CodeBuddy Code's events (Claude Code's names)."""
MATCHER_EVENTS = frozenset({
    "SessionStart", "Setup", "InstructionsLoaded", "UserPromptExpansion", "PreToolUse",
    "PermissionRequest", "PermissionDenied", "PostToolUse", "PostToolUseFailure", "Notification",
    "SubagentStart", "SubagentStop", "StopFailure", "ConfigChange", "DirectoryAdded", "PreCompact",
    "PostCompact", "SessionEnd", "Elicitation", "ElicitationResult",
})
"""Events whose groups carry a matcher (the route's is ``*``)."""


def hookcage_script() -> str:
    """The absolute path of the installed ``hookcage`` console script (not a pyenv shim)."""
    beside = Path(sys.executable).parent / "hookcage"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("hookcage")
    assert found is not None, "the hookcage console script is not installed"
    return os.path.realpath(found)


def hookcage_routes(agent: str, events: Sequence[str] | None = None) -> dict[str, Any]:
    """Settings (``{"hooks": ...}``) that send every event of ``agent`` to ``hookcage dispatch``."""
    if events is None:
        events = CLAUDE_EVENTS if agent == "claude" else CODEBUDDY_EVENTS
    command = f"{hookcage_script()} dispatch --agent {agent}"
    hooks: dict[str, Any] = {}
    for event in events:
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
        if event in MATCHER_EVENTS:
            group = {"matcher": "*", **group}
        hooks[event] = [group]
    return {"hooks": hooks}


SCRUBBED_PREFIXES = ("ANTHROPIC_", "CLAUDE", "CODEBUDDY_", "WORKBUDDY_", "OPENAI_")
"""The test runner's variables that would reach the CLI (keys, endpoints, config dirs)."""


@dataclass
class Agent:
    """One agent CLI with a throwaway home, run as a user would in a repository.

    ``env`` is the base environment (the hookcage user's: ``HOOKCAGE_HOME``...).
    """

    name: str
    binary: Path
    home: Path
    env: dict[str, str]
    model: ModelStandIn | None = None
    sessions: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.config_dir.mkdir(parents=True, exist_ok=True)

    @property
    def config_dir(self) -> Path:
        """The CLI's user-level folder (``CLAUDE_CONFIG_DIR`` / ``CODEBUDDY_CONFIG_DIR``)."""
        return self.home / (".claude" if self.name == "claude" else ".codebuddy")

    @property
    def user_settings(self) -> Path:
        return self.config_dir / "settings.json"

    def route_to_hookcage(self, events: Sequence[str] | None = None) -> Path:
        """Write the CLI's user settings with hookcage's routes (replacing what was there)."""
        self.user_settings.write_text(json.dumps(hookcage_routes(self.name, events), indent=2))
        return self.user_settings

    def session_id(self) -> str:
        """A fresh session id the CLI accepts (a UUID for Claude Code; CodeBuddy's
        carries the test session as its prefix, as ``support.agent_session`` does)."""
        if self.name == "claude":
            sid = str(uuid.uuid4())
        else:
            from support import agent_session

            sid = agent_session("codebuddy")
        self.sessions.append(sid)
        return sid

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in self.env.items()
               if not k.startswith(SCRUBBED_PREFIXES) and k != "HOOKCAGE_SOCKET"}
        env["HOME"] = str(self.home)
        if self.name == "claude":
            env.update(CLAUDE_CONFIG_DIR=str(self.config_dir), ANTHROPIC_API_KEY="sk-ant-test-not-a-key",
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
                       ANTHROPIC_BASE_URL=self.model.url if self.model else "http://127.0.0.1:9")
        else:
            env.update(CODEBUDDY_CONFIG_DIR=str(self.config_dir), CODEBUDDY_API_KEY="cb-test-not-a-key")
        return env

    def run(self, prompt: str, cwd: Path, *, routed: bool, args: Sequence[str] = (),
            timeout: float = 240) -> subprocess.CompletedProcess[str]:
        """``CLI -p PROMPT`` in ``cwd``; ``routed``: with ``--setting-sources user``."""
        argv = [str(self.binary), "-p", prompt, "--session-id", self.session_id()]
        if routed:
            argv += ["--setting-sources", "user"]
        if self.name == "codebuddy" and self.model is not None:
            argv += ["--model", STAND_IN_MODEL]
        argv += list(args)
        return subprocess.run(argv, cwd=cwd, env=self.environment(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)


STAND_IN_MODEL = "hookcage-stand-in"
"""The custom model id CodeBuddy is pointed at (its user ``models.json``)."""


def point_codebuddy_at(agent: Agent, model: ModelStandIn) -> None:
    """CodeBuddy's user ``models.json``: one custom model served by ``model``."""
    agent.model = model
    (agent.config_dir / "models.json").write_text(json.dumps({
        "models": [{"id": STAND_IN_MODEL, "name": "hookcage stand-in", "vendor": "OpenAI",
                    "apiKey": "sk-test-not-a-key", "url": f"{model.url}/v1/chat/completions",
                    "maxInputTokens": 200000, "maxOutputTokens": 8192, "supportsToolCall": True,
                    "supportsImages": False}],
        "availableModels": [STAND_IN_MODEL],
    }, indent=2))


@contextlib.contextmanager
def stand_in(tool_call: ToolCall | None = None, reply: str = "stand-in model: done") -> Iterator[ModelStandIn]:
    """A started :class:`ModelStandIn`, stopped on exit."""
    model = ModelStandIn(tool_call=tool_call, reply=reply)
    with model:
        yield model


def leftover_containers(client: Any, sessions: Sequence[str]) -> list[str]:
    """Remove the hookcage-managed containers of these agent sessions; their names.

    Claude Code's session ids are UUIDs, so its hook runs cannot carry the test
    session's prefix: the tests check them by session id instead.
    """
    import docker.errors  # type: ignore[import-untyped, unused-ignore]

    names = []
    for sid in sessions:
        found = client.containers(all=True, filters={"label": ["hookcage.managed=true",
                                                               f"hookcage.session={sid}"]})
        for entry in found:
            names.append(f"{entry['Names'][0].lstrip('/')} ({entry['State']})")
            with contextlib.suppress(docker.errors.NotFound):
                client.remove_container(entry["Id"], force=True, v=True)
    return names
