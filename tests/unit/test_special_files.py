"""One file in a cloned repository cannot freeze or slow hookcage (issue 21, class 3).

Written as the repository's author: a hook file that is a FIFO, a committed
symlink to a device (``/dev/tty``, ``/dev/ptmx``, ``/dev/zero``,
``/dev/urandom``, ``/proc/self/fd/1``), a socket, a directory; a file of 40,000
tiny handlers; a 4 MiB hook-less YAML or TOML file. Every one is named broken
in one line, without being read (special files) or before the parse that would
take seconds (size, values, depth, handlers). No test times anything: an input
that used to hang finishes at all (a thread join or a subprocess timeout is
the hang detector), and work is counted, not timed.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor import config, safeio
from executor.config import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_HANDLERS,
    MAX_REPOSITORY_HANDLERS,
    MAX_VALUES,
    load_hook_file,
    read_hook_files,
)
from executor.core.hooks import Scope
from executor.core.report import row_of
from executor.dialects import DIALECTS
from executor.dialects.base import FileFormat
from executor.gates.trust import UnsafeReference, collect_references
from executor.runlog import MAX_SKIPS_LOGGED, cap_event
from executor.settings import load_settings

HANG = 30.0
"""Seconds after which a read is taken to hang (a detector, not a timing bound)."""


def finishes(work: Callable[[], Any]) -> Any:
    """``work()``'s result; fails when it does not finish within :data:`HANG` seconds."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:  # re-raised below, in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), "it hangs"
    if errors:
        raise errors[0]
    return out[0]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".claude").mkdir()
    return tmp_path


def _socket_at(path: Path) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    yield sock
    sock.close()


SPECIAL = ["fifo", "socket", "directory", "/dev/ptmx", "/dev/zero", "/dev/urandom", "/dev/null",
           "/proc/self/fd/0", "/proc/self/fd/1", "/proc/self/fd/2"]


def plant(path: Path, what: str) -> Iterator[None]:
    """Put ``what`` at ``path`` (a FIFO, a socket, a directory, or a symlink to a device)."""
    if what == "fifo":
        os.mkfifo(path)
        yield
    elif what == "socket":
        yield from (None for _ in _socket_at(path))
    elif what == "directory":
        path.mkdir()
        yield
    else:
        path.symlink_to(what)
        yield


@pytest.mark.parametrize("what", SPECIAL)
def test_a_special_hook_file_is_named_broken_without_being_read(repo: Path, what: str) -> None:
    path = repo / ".claude" / "settings.json"
    for _ in plant(path, what):
        loaded = finishes(lambda: load_hook_file(path, Scope.PROJECT, repo, DIALECTS["claude"], "json"))
        assert loaded is not None and not loaded.hooks and len(loaded.problems) == 1
        text = str(loaded.problems[0])
        assert "\n" not in text and str(path) in text
        assert "refused" in text and ("not a regular file" in text or "out of the project" in text), text


@pytest.mark.parametrize("what", ["fifo", "/dev/zero", "/dev/urandom", "socket"])
def test_safeio_names_the_kind(tmp_path: Path, what: str) -> None:
    path = tmp_path / "f"
    for _ in plant(path, what):
        with pytest.raises(safeio.Unreadable) as caught:
            finishes(lambda: safeio.read_regular(path, 1024))
        kind = {"fifo": "a FIFO", "socket": "a socket"}.get(what, "a character device")
        assert caught.value.reason.startswith(f"is {kind}")


def test_a_fifo_is_refused_even_when_swapped_in_after_the_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path checked and the file opened differ: the open does not block, the fstat refuses."""
    path = tmp_path / "f"
    path.write_text("{}")
    real_stat = os.stat

    def swap(target: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        result = real_stat(target, *args, **kwargs)
        if str(target) == str(path):
            path.unlink()
            os.mkfifo(path)
        return result

    monkeypatch.setattr(safeio.os, "stat", swap)
    with pytest.raises(safeio.Unreadable, match="FIFO"):
        finishes(lambda: safeio.read_regular(path, 1024))


def test_a_symlink_out_of_the_repository_is_refused_and_one_within_is_read(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text(json.dumps({"hooks": {}}))
    path = repo / ".claude" / "settings.json"
    path.symlink_to(outside)
    loaded = load_hook_file(path, Scope.PROJECT, repo, DIALECTS["claude"], "json")
    assert loaded is not None and "leads out of the project" in str(loaded.problems[0])
    path.unlink()
    (repo / "shared.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": "true"}]}]}}))
    path.symlink_to("../shared.json")
    loaded = load_hook_file(path, Scope.PROJECT, repo, DIALECTS["claude"], "json")
    assert loaded is not None and len(loaded.hooks) == 1 and not loaded.problems


def test_a_users_own_file_may_be_a_symlink_anywhere(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles.json"
    target.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "true"}]}]}}))
    path = tmp_path / "hooks.json"
    path.symlink_to(target)
    loaded = load_hook_file(path, Scope.USER, None)
    assert loaded is not None and len(loaded.hooks) == 1


def test_a_missing_file_is_no_file(repo: Path) -> None:
    assert load_hook_file(repo / ".claude" / "settings.json", Scope.PROJECT, repo, DIALECTS["claude"]) is None
    assert load_hook_file(repo / "nodir" / "x.json", Scope.PROJECT, repo) is None


# -- work bounds ------------------------------------------------------------------------------


def handlers(count: int, event: str = "PreToolUse") -> dict[str, Any]:
    return {"hooks": {event: [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"echo {i}"} for i in range(count)]}]}}


def test_forty_thousand_handlers_are_refused_before_the_agents_parser(repo: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = repo / ".claude" / "settings.json"
    path.write_text(json.dumps(handlers(40_000)))
    parsed: list[object] = []
    real = DIALECTS["claude"].parse
    monkeypatch.setattr(type(DIALECTS["claude"]), "parse", lambda self, *a, **k: parsed.append(1) or real(*a, **k))
    loaded = load_hook_file(path, Scope.PROJECT, repo, DIALECTS["claude"], "json")
    assert loaded is not None and not loaded.hooks and parsed == []  # no per-handler work at all
    assert f"more than {MAX_VALUES:,} values" in str(loaded.problems[0])


def test_a_file_past_the_handler_limit_is_broken_and_one_at_it_runs(repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    path.write_text(json.dumps(handlers(MAX_HANDLERS + 1)))
    loaded = load_hook_file(path, Scope.PROJECT, repo, DIALECTS["claude"], "json")
    assert loaded is not None and not loaded.hooks
    assert f"holds {MAX_HANDLERS + 1:,} handlers, more than the {MAX_HANDLERS:,}" in str(loaded.problems[0])
    path.write_text(json.dumps(handlers(MAX_HANDLERS)))
    loaded = load_hook_file(path, Scope.PROJECT, repo, DIALECTS["claude"], "json")
    assert loaded is not None and len(loaded.hooks) == MAX_HANDLERS


def test_a_repositorys_files_together_hold_a_bounded_number_of_handlers(
        repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """.github/hooks may hold 64 files: each within the per-file limit, together past the repository's."""
    folder = repo / ".github" / "hooks"
    folder.mkdir(parents=True)
    per_file = MAX_REPOSITORY_HANDLERS // 3
    for i in range(5):
        folder.joinpath(f"h{i}.json").write_text(json.dumps({"version": 1, "hooks": {"preToolUse": [
            {"type": "command", "bash": f"echo {i}-{j}"} for j in range(per_file)]}}))
    outside = tmp_path_factory.mktemp("outside")  # hookcage's own directories, never inside the project
    settings_ = load_settings(home=outside / "home", managed_dir=outside / "managed")
    files = read_hook_files(settings_, repo, [DIALECTS["copilot"]], environ={"HOME": str(outside / "user")})
    ran = [f for f in files if f.hooks]
    broken = [f for f in files if not f.hooks and f.problems]
    assert sum(len(f.hooks) for f in ran) <= MAX_REPOSITORY_HANDLERS and len(ran) == 3
    assert len(broken) == 2 and all("a repository's files may hold together" in str(f.problems[0]) for f in broken)


def test_a_user_file_is_not_counted_against_the_repository(tmp_path: Path) -> None:
    budget = config.RepositoryBudget(used=MAX_REPOSITORY_HANDLERS)
    user = config.HookFile("u", Scope.USER, hooks=())
    assert budget.take(user) is user


def test_nesting_past_the_limit_is_broken(repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    value: Any = {}
    for _ in range(MAX_DEPTH):
        value = {"a": value}
    path.write_text(json.dumps(value))
    loaded = load_hook_file(path, Scope.PROJECT, repo, DIALECTS["claude"], "json")
    assert loaded is not None and f"nests deeper than {MAX_DEPTH} levels" in str(loaded.problems[0])


@pytest.mark.parametrize(("form", "where", "agent"), [
    ("yaml", ".infer/hooks.yaml", "infer"), ("toml", ".codex/config.toml", "codex"),
])
def test_a_four_mib_hookless_file_is_refused_by_its_size(repo: Path, form: FileFormat, where: str,
                                                        agent: str) -> None:
    path = repo / where
    path.parent.mkdir(parents=True, exist_ok=True)
    line = "k{}: " + "x" * 60 + "\n" if form == "yaml" else 'k{} = "' + "x" * 60 + '"\n'
    text = "".join(line.format(i) for i in range(4 * 1024 * 1024 // 70))
    path.write_text(text)
    decoded: list[object] = []
    real = config.decode
    try:
        config.decode = lambda raw, f: decoded.append(1) or real(raw, f)  # type: ignore[assignment]
        loaded = load_hook_file(path, Scope.PROJECT, repo, DIALECTS[agent], form)
    finally:
        config.decode = real  # type: ignore[assignment]
    assert decoded == []  # refused by its size, never parsed
    assert loaded is not None and not loaded.hooks
    limit = safeio.size_text(MAX_FILE_BYTES[form])
    assert f"is larger than {limit}, the limit of a {form.upper()} hook file ({len(text)} bytes)" in str(
        loaded.problems[0])


def test_a_file_at_its_formats_limit_is_read(repo: Path) -> None:
    path = repo / ".infer" / "hooks.yaml"
    path.parent.mkdir()
    body = "hooks: {}\n"
    path.write_text(body + "#" * (MAX_FILE_BYTES["yaml"] - len(body) - 1) + "\n")
    loaded = load_hook_file(path, Scope.PROJECT, repo, DIALECTS["infer"], "yaml")
    assert loaded is None or not any("larger" in str(p) for p in loaded.problems)


def test_problems_are_capped_with_a_count(repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    path.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "timeout": "x"}
                                                                     for _ in range(500)]}]}}))
    loaded = load_hook_file(path, Scope.PROJECT, repo, DIALECTS["claude"], "json")
    assert loaded is not None and len(loaded.problems) <= config.MAX_PROBLEMS
    assert "more problems not shown" in str(loaded.problems[-1])


# -- the run log ------------------------------------------------------------------------------


def test_the_run_log_of_one_event_is_capped_and_counts_the_rest() -> None:
    skipped = [{"time": "2026-11-27T13:00:00+00:00", "event": "PreToolUse", "hook_id": f"h{i}",
                "outcome": "skipped", "skip_reason": "not_allowlisted", "detail": "x"} for i in range(5000)]
    ran = [{"hook_id": "r", "outcome": "ran"}]
    out = cap_event([*ran, *skipped])
    assert len(out) == 1 + MAX_SKIPS_LOGGED + 1
    assert out[0]["outcome"] == "ran"
    assert out[-1]["omitted"] == 5000 - MAX_SKIPS_LOGGED and "not logged one by one" in out[-1]["detail"]
    row = row_of(out[-1])  # hookcage report reads the count as one skipped row
    assert row is not None and row.outcome == "off-list"
    few = skipped[:MAX_SKIPS_LOGGED]
    assert cap_event(few) == few


# -- the trust review's scripts -------------------------------------------------------------


@pytest.mark.parametrize("what", ["fifo", "/dev/tty", "/dev/zero", "socket"])
def test_a_special_script_is_refused_at_review_without_being_read(tmp_path: Path, what: str) -> None:
    hooks = tmp_path / ".claude" / "hooks"
    hooks.mkdir(parents=True)
    for _ in plant(hooks / "x.sh", what):
        with pytest.raises(UnsafeReference) as caught:
            finishes(lambda: collect_references(["bash", ".claude/hooks/x.sh"], str(tmp_path)))
        assert "\n" not in str(caught.value)
        assert "not a regular file" in caught.value.reason or "outside the project" in caught.value.reason


# -- properties -------------------------------------------------------------------------------

FORMS: list[tuple[str, FileFormat]] = [(name, source.format) for name, d in DIALECTS.items()
                                       for source in d.sources(config.where(Path("/r"), {"HOME": "/h"}))[:1]]


KEYS = st.sampled_from(["hooks", "PreToolUse", "pre_tool", "type", "command", "matcher", "version", "timeout",
                        "x", "features", "codex_hooks", "enabled"])
_SCALARS = st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=20)
TOML_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
                           max_leaves=40)


def _toml(value: dict[str, Any]) -> bytes:
    import tomlkit

    return tomlkit.dumps(value).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.one_of(st.binary(max_size=4096), st.dictionaries(KEYS, TOML_VALUES, max_size=4).map(_toml),
                     st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                                  lambda inner: st.lists(inner, max_size=5)
                                  | st.dictionaries(st.sampled_from(["hooks", "PreToolUse", "type", "command",
                                                                     "matcher", "version", "x"]), inner, max_size=5),
                                  max_leaves=60).map(lambda v: json.dumps(v).encode())),
       pick=st.integers(min_value=0, max_value=len(FORMS)))
def test_any_bytes_are_decoded_or_named_broken_in_one_line(tmp_path: Path, raw: bytes, pick: int) -> None:
    path = tmp_path / "hooks.any"
    path.write_bytes(raw)
    if pick == len(FORMS):
        loaded = load_hook_file(path, Scope.PROJECT, tmp_path)
    else:
        name, form = FORMS[pick]
        loaded = load_hook_file(path, Scope.PROJECT, tmp_path, DIALECTS[name], form)
    assert loaded is not None
    for problem in loaded.problems:
        assert "\n" not in str(problem) and str(path) in str(problem)


@settings(max_examples=60, deadline=None)
@given(size=st.integers(min_value=0, max_value=3 * MAX_FILE_BYTES["yaml"]),
       form=st.sampled_from(["json", "yaml", "toml"]))
def test_any_size_is_read_or_refused_by_its_limit(tmp_path_factory: pytest.TempPathFactory, size: int,
                                                  form: FileFormat) -> None:
    path = tmp_path_factory.mktemp("size") / "f"
    path.write_bytes(b"#" * size)
    raw, broken = config.read_hook_bytes(path, Scope.PROJECT, "", form)
    if size <= MAX_FILE_BYTES[form]:
        assert raw is not None and len(raw) == size and broken is None
    else:
        assert raw is None and broken is not None and "is larger than" in str(broken.problems[0])


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["fifo", "dir", "file"]), size=st.integers(min_value=0, max_value=5000),
       limit=st.integers(min_value=0, max_value=5000))
def test_safeio_reads_only_regular_files_within_the_limit(tmp_path_factory: pytest.TempPathFactory, kind: str,
                                                         size: int, limit: int) -> None:
    path = tmp_path_factory.mktemp("k") / "f"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    else:
        path.write_bytes(b"a" * size)
    try:
        data = finishes(lambda: safeio.read_regular(path, limit))
    except safeio.Unreadable as exc:
        assert "\n" not in exc.reason
        assert kind != "file" or size > limit
    else:
        assert kind == "file" and size <= limit and len(data) == size
    assert stat.S_ISFIFO(os.lstat(path).st_mode) == (kind == "fifo")


# -- install ----------------------------------------------------------------------------------


@pytest.mark.parametrize("what", ["fifo", "/dev/zero"])
def test_install_refuses_a_special_agent_file_without_blocking(tmp_path: Path, what: str) -> None:
    from executor.errors import HookcageError
    from executor.installer import read_current

    path = tmp_path / "settings.json"
    for _ in plant(path, what):
        with pytest.raises(HookcageError, match="not a regular file"):
            finishes(lambda: read_current(str(path)))


@settings(max_examples=25, deadline=None)
@given(count=st.integers(min_value=0, max_value=3 * MAX_HANDLERS), agent=st.sampled_from(["claude", "codebuddy", "gemini"]))
def test_any_number_of_handlers_is_loaded_or_named_with_its_limit(tmp_path_factory: pytest.TempPathFactory,
                                                                  count: int, agent: str) -> None:
    root = tmp_path_factory.mktemp("n")
    path = root / "settings.json"
    event = "BeforeTool" if agent == "gemini" else "PreToolUse"
    path.write_text(json.dumps(handlers(count, event)))
    loaded = load_hook_file(path, Scope.PROJECT, root, DIALECTS[agent], "json")
    if count == 0:
        assert loaded is not None and not loaded.hooks
    elif count <= MAX_HANDLERS:
        assert loaded is not None and len(loaded.hooks) == count
    else:
        assert loaded is not None and not loaded.hooks and len(loaded.problems) == 1
        assert f"more than the {MAX_HANDLERS:,}" in str(loaded.problems[0]) or "values" in str(loaded.problems[0])
