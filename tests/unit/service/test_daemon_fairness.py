"""One project cannot starve the daemon (issue 21, class 3).

A repository whose events stall (they used to: a FIFO hook file blocked the
read; now a hook that runs long does) holds at most ``MAX_PER_PROJECT`` of the
daemon's workers; its further events are refused at once (409: the caller
answers in-process), and an unrelated project's event is answered. Served by
the real app on a unix socket (uvicorn in a thread); the stall is a
``run_dispatch`` that waits for the test to let it go.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from executor import __version__
from executor.core.protocol import AgentAnswer
from executor.service import client, daemon, dispatching
from executor.service.app import MAX_IN_FLIGHT
from executor.service.daemon import MAX_PER_PROJECT, Busy, Daemon

HANG = 30.0


def body(project: Path, home: Path) -> bytes:
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "ls"}, "cwd": str(project)}
    return json.dumps({"version": __version__, "event": "PreToolUse", "agent": "claude",
                       "payload_b64": base64.b64encode(json.dumps(payload).encode()).decode(),
                       "env": {}, "home": str(home), "cwd": str(project)}).encode()


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Daemon, threading.Event, Path]]:
    import uvicorn

    home = tmp_path / "home"
    monkeypatch.setenv("HOOKCAGE_HOME", str(home))
    monkeypatch.setenv("HOOKCAGE_MANAGED_DIR", str(tmp_path / "managed"))
    release = threading.Event()
    hostile = tmp_path / "hostile"

    def run_dispatch(self: Daemon, event: Any, raw: bytes, **kwargs: Any) -> tuple[AgentAnswer, str]:
        if kwargs["environ"].get("CLAUDE_PROJECT_DIR", "").startswith(str(hostile)) or (
                str(hostile) in raw.decode()):
            release.wait(HANG)  # the hostile project's events stall
        return AgentAnswer(0, "", ""), "claude"

    monkeypatch.setattr(Daemon, "run_dispatch", run_dispatch)
    d = Daemon(home=home, sandbox_factory=lambda backend, settings: None)  # type: ignore[arg-type, return-value]
    sock = d.listen()
    server = uvicorn.Server(uvicorn.Config(d.app, log_level="warning", lifespan="off", http="h11",
                                           loop="asyncio", ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while client.health(str(d.socket_path), timeout=0.5) is None:
        time.sleep(0.05)
    yield d, release, hostile
    release.set()
    server.should_exit = True
    thread.join(HANG)
    d.close()


def post(d: Daemon, project: Path) -> int:
    status, _ = client.exchange(str(d.socket_path), "POST", "/dispatch", body(project, d.home),
                                connect_timeout=5, timeout=HANG)
    return status


def test_a_stalling_project_holds_a_few_workers_and_another_project_is_answered(
        served: tuple[Daemon, threading.Event, Path], tmp_path: Path) -> None:
    d, release, hostile = served
    hostile.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    with ThreadPoolExecutor(max_workers=50) as pool:
        flood = [pool.submit(post, d, hostile) for _ in range(48)]
        # the extra events of the stalling project are refused at once, while the first ones still stall
        deadline = time.monotonic() + HANG
        while sum(f.done() for f in flood) < 48 - MAX_PER_PROJECT and time.monotonic() < deadline:
            time.sleep(0.1)
        refused = [f.result() for f in flood if f.done()]
        assert len(refused) == 48 - MAX_PER_PROJECT and set(refused) == {409}
        assert post(d, other) == 200  # answered, while the hostile project still holds its workers
        assert client.health(str(d.socket_path), timeout=5) is not None
        release.set()
        assert {f.result(HANG) for f in flood} <= {200, 409}  # none hangs


def test_project_slots_are_counted_per_root_and_given_back(tmp_path: Path) -> None:
    d = Daemon(home=tmp_path, sandbox_factory=lambda backend, settings: None)  # type: ignore[arg-type, return-value]
    with contextlib_exit_stack() as stack:
        for _ in range(3):
            stack.enter_context(d.project_slot(tmp_path / "a", 3))
        with pytest.raises(Busy, match=r"3 events of the project .*/a are in flight already \(at most 3"):
            stack.enter_context(d.project_slot(tmp_path / "a", 3))
        stack.enter_context(d.project_slot(tmp_path / "b", 3))  # another project is not counted with it
    with d.project_slot(tmp_path / "a", 1):  # all given back
        pass
    assert d._projects == {}


def contextlib_exit_stack() -> Any:
    import contextlib

    return contextlib.ExitStack()


def test_the_global_cap_is_below_the_worker_threads() -> None:
    import anyio.to_thread

    async def tokens() -> float:
        return anyio.to_thread.current_default_thread_limiter().total_tokens

    assert anyio.run(tokens) > MAX_IN_FLIGHT
    assert MAX_PER_PROJECT < MAX_IN_FLIGHT and daemon.REMOTE_PER_PROJECT >= 1


def test_on_tcp_a_project_past_its_share_is_503_and_another_project_still_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_service_http import RELEASE, Service, wait_for

    RELEASE.clear()
    service = Service(tmp_path, monkeypatch)
    try:
        service.user_hooks(UserPromptSubmit=["wait-for-release"])
        service.start(max_concurrent=8, max_queue=8)
        other = tmp_path / "other"
        other.mkdir()
        results: list[tuple[int, Any]] = []

        def send(project: Path) -> None:
            results.append(service.dispatch(service.prompt(cwd=str(project))))

        threads = [threading.Thread(target=send, args=(service.project,)) for _ in range(daemon.REMOTE_PER_PROJECT)]
        for thread in threads:
            thread.start()
        wait_for(lambda: len(service.sandbox.requests) == daemon.REMOTE_PER_PROJECT)
        status, answer = service.dispatch(service.prompt())  # one more of the same project
        assert status == 503 and "in flight already" in answer["detail"] and "\n" not in answer["detail"]
        late = threading.Thread(target=send, args=(other,))
        late.start()
        wait_for(lambda: len(service.sandbox.requests) == daemon.REMOTE_PER_PROJECT + 1)  # another project runs
        RELEASE.set()
        for thread in [*threads, late]:
            thread.join(HANG)
        assert [s for s, _ in results] == [200] * (daemon.REMOTE_PER_PROJECT + 1)
    finally:
        RELEASE.set()
        service.stop()


def test_a_request_that_finds_no_worker_thread_is_refused_and_never_runs_later(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import anyio
    import anyio.to_thread

    monkeypatch.setattr(dispatching, "START_WAIT", 0.3)
    ran: list[int] = []

    class Caller:
        async def is_disconnected(self) -> bool:
            return False

    async def main() -> int:
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = 1
        release = threading.Event()
        blocker = asyncio.ensure_future(anyio.to_thread.run_sync(release.wait, HANG))  # the only thread
        await asyncio.sleep(0.1)
        reply = await dispatching.answer_watching(lambda watch: (ran.append(1), (AgentAnswer(0, "", ""), "claude"))[1],
                                             Caller())  # type: ignore[arg-type]
        release.set()
        await blocker
        await asyncio.sleep(0.3)  # the refused request gets the thread now: it must run nothing
        return reply.status_code

    assert anyio.run(main) == 409
    assert ran == []
