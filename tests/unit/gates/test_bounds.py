"""Every gate answers in bounded time, and past a documented bound it refuses quickly (issue 11).

Timing here only proves "not catastrophic" (a generous bound on a noisy
2-core machine); timing targets belong to the benchmarks.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from executor_env import Env, hooks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor.config import load_hook_file
from executor.core.events import get_event
from executor.core.hooks import Scope
from executor.core.protocol import parse_outcome
from executor.executor import HookExecutor
from executor.gates.trust import (
    MAX_REFERENCE_DEPTH,
    MAX_WALKED_PATHS,
    UnsafeReference,
    collect_references,
)
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.service.answer import (
    MAX_PAYLOAD,
    MAX_PAYLOAD_DEPTH,
    PayloadBound,
    dispatch_bytes,
    read_payload,
)
from executor.settings import load_settings

BOUND = 2.0


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def answer(env: Env, raw: bytes, fake: FakeSandbox | None = None) -> Any:
    fake = fake or FakeSandbox()
    settings_ = load_settings(home=env.home, managed_dir=env.managed)

    def make(s: Any) -> HookExecutor:
        return HookExecutor(s, sandboxes={"docker": fake, "host": fake}, environ={})

    result, executor = dispatch_bytes("PreToolUse", raw, settings=settings_, make_executor=make)
    if executor is not None:
        executor.close()
    return result


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


# -- the payload ------------------------------------------------------------------------------


def test_a_payload_past_the_size_limit_blocks_quickly() -> None:
    with pytest.raises(PayloadBound, match="more than 256 MiB"):
        read_payload(b" " * (MAX_PAYLOAD + 1))


@pytest.mark.parametrize("depth", [MAX_PAYLOAD_DEPTH + 1, 5000, 200_000])
def test_a_payload_nested_past_the_bound_blocks_quickly(env: Env, depth: int) -> None:
    env.write("user", hooks("PreToolUse", "ls", matcher="Bash"))
    payload = env.payload(tool_input={"command": "ls", "deep": "DEEP"})
    raw = json.dumps(payload).replace('"DEEP"', "[" * depth + "]" * depth).encode()
    fake = FakeSandbox()
    started = time.monotonic()
    result = answer(env, raw, fake)
    assert time.monotonic() - started < BOUND
    assert result.exit_code == 2 and "nests deeper than 200 levels" in result.stderr  # fails closed
    assert fake.requests == []


def test_a_payload_within_the_bound_runs(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "ls", matcher="Bash"))
    payload = env.payload(tool_input={"command": "ls", "deep": nested(MAX_PAYLOAD_DEPTH - 3)})
    fake = FakeSandbox()
    result = answer(env, json.dumps(payload).encode(), fake)
    assert result.exit_code == 0 and len(fake.requests) == 1


# -- hook files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"hooks": ' + "[" * 900 + "]" * 900 + "}",
                                  '{"x": ' + "9" * 5000 + "}"])
def test_a_hostile_hook_file_is_a_one_line_problem(tmp_path: Path, text: str) -> None:
    path = tmp_path / "hooks.json"
    path.write_text(text)
    started = time.monotonic()
    loaded = load_hook_file(path, Scope.PROJECT, tmp_path)
    assert time.monotonic() - started < BOUND
    assert loaded is not None and not loaded.hooks and loaded.problems
    assert all("\n" not in str(p) and str(path) in str(p) for p in loaded.problems)


# -- a hook's answer ----------------------------------------------------------------------------


@pytest.mark.parametrize("stdout", [
    b"{" + b'"a":[' * 100_000, b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"systemMessage": "' + b"x" * 5_000_000 + b'"}', b"{" + b'"k": 1, ' * 200_000 + b'"z": 2}',
    b'{"n": ' + b"9" * 100_000 + b"}",
])
def test_huge_or_deep_hook_output_is_parsed_quickly(stdout: bytes) -> None:
    started = time.monotonic()
    outcome = parse_outcome(get_event("PreToolUse"), "h", 0, stdout, b"x" * 1_000_000)
    assert time.monotonic() - started < BOUND
    assert outcome.status in ("error", "ok") and len(outcome.system_message or "") <= 10_000


# -- the trust review's references ------------------------------------------------------------


def test_a_reference_past_the_depth_bound_is_refused_quickly(tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    path = deep
    for _ in range(MAX_REFERENCE_DEPTH + 20):
        path = path / "a"
    path.mkdir(parents=True)
    started = time.monotonic()
    with pytest.raises(UnsafeReference, match="nests deeper"):
        collect_references(["deep/"], str(tmp_path))
    with pytest.raises(UnsafeReference, match="path components"):
        collect_references(["deep/" + "a/" * 5000], str(tmp_path))
    assert time.monotonic() - started < BOUND


def test_a_reference_to_a_huge_tree_is_refused_quickly(tmp_path: Path) -> None:
    for i in range(MAX_WALKED_PATHS + 10):
        (tmp_path / "wide" / f"d{i}").mkdir(parents=True)
    started = time.monotonic()
    with pytest.raises(UnsafeReference, match=f"more than {MAX_WALKED_PATHS} paths"):
        collect_references(["wide/"], str(tmp_path))
    assert time.monotonic() - started < BOUND


# -- the whole dispatch, on random hostile input ------------------------------------------------

MATCHERS = st.sampled_from([r"(?:\w|\w|\w|\w|\w|\w)*!", r"(a+)+$", r"(.*a){12}", "Bash", r"^mcp__.*", r"(a)\1", "*"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    matcher=MATCHERS,
    name=st.text(alphabet="aA_1!", min_size=1, max_size=8).map(lambda s: s * 20_000),
    depth=st.integers(min_value=0, max_value=400),
    command_size=st.integers(min_value=0, max_value=200_000),
)
def test_dispatch_answers_within_the_bound_for_any_of_these_inputs(
    env: Env, matcher: str, name: str, depth: int, command_size: int
) -> None:
    command = "echo " + "TOKEN=a" * (command_size // 7)
    env.write("user", hooks("PreToolUse", {"type": "command", "command": command}, matcher=matcher))
    payload = env.payload(tool_name=name, tool_input={"command": "x" * command_size, "d": nested(depth)})
    started = time.monotonic()
    result = answer(env, json.dumps(payload).encode())
    assert time.monotonic() - started < BOUND * 2
    assert result.exit_code in (0, 1, 2)


# -- a caller that has gone -----------------------------------------------------------------------


def test_an_aborted_dispatch_starts_nothing_more(env: Env) -> None:
    env.write("user", hooks("PreToolUse", "sleep 1", "sleep 2", "sleep 3", matcher="Bash"))
    started: list[str] = []
    release = threading.Event()

    def handler(request: RunRequest) -> RunResult:
        started.append(request.command)
        release.wait(5)
        return RunResult(0)

    ex, _ = env.executor(handler, max_parallel=1)
    timer = threading.Timer(0.3, lambda: (ex.abort(), release.set()))
    timer.start()
    with ex:
        ex.dispatch("PreToolUse", env.payload())
    timer.join()
    assert len(started) == 1  # the two others were never started
    assert ex.cancelled.is_set()


def test_each_run_carries_its_dispatch_and_owner_labels(env: Env) -> None:
    from executor.sandbox import orphans

    env.write("user", hooks("PreToolUse", "ls"))
    ex, fake = env.executor()
    with ex:
        ex.dispatch("PreToolUse", env.payload())
    labels = fake.requests[0].labels
    assert labels[orphans.DISPATCH_LABEL] == ex.token
    assert labels[orphans.OWNER_LABEL] == orphans.owner_value()
    assert not orphans.orphaned(dict(labels))
    dead = {orphans.OWNER_LABEL: orphans.owner_value(2**22 + 7)}
    assert orphans.orphaned(dead)
    assert not orphans.orphaned({orphans.OWNER_LABEL: "another-machine/pid:[1]/2"})
