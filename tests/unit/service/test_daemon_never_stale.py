"""The daemon keeps parsed files between events (issue 23), and never answers from a stale one.

A real daemon app on a unix socket (uvicorn in a thread, a fake sandbox that
prints the reviewed bytes it was given) answers one event; the test changes
one file; the next event's answer must say what the new file says. Every
kind of file the daemon keeps: hookcage's hook files of each scope, Claude
Code's settings files (user and project), the user and managed
``config.toml`` (the allow-list), the trust store, ``HOOKCAGE_TRUST_FILE``
and a hook's referenced script. Every way of changing it: an edit, an edit
of the same size within one mtime tick (``os.utime`` puts the old mtime
back), a rename over it, a delete, a symlink swap.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import allow

from executor import __version__, filecache
from executor.dialects import DIALECTS
from executor.executor import HookExecutor
from executor.gates.trust import TrustStore
from executor.sandbox.base import RunRequest, RunResult
from executor.sandbox.fake import FakeSandbox
from executor.service import client
from executor.service.daemon import Daemon
from executor.settings import load_settings


def printed(request: RunRequest) -> RunResult:
    """The fake engine: ``echo WORD`` prints out-WORD; ``sh SCRIPT`` prints the staged script's bytes."""
    words = request.command.split()
    if words[0] == "sh":
        staged = next(iter(request.overlays.values()))
        return RunResult(0, stdout=Path(staged).read_bytes())
    return RunResult(0, stdout=f"out-{words[-1]}\n".encode())


@dataclass
class World:
    home: Path
    managed: Path
    project: Path
    user_home: Path
    daemon: Daemon
    env: dict[str, str]

    def ask(self) -> str:
        """One UserPromptSubmit through the daemon: its answer's stdout (hooks' output is context)."""
        payload = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi",
                   "cwd": str(self.project), "transcript_path": str(self.project / "t.jsonl")}
        body = json.dumps({"version": __version__, "event": "UserPromptSubmit", "agent": "claude",
                           "payload_b64": base64.b64encode(json.dumps(payload).encode()).decode(),
                           "env": self.env, "home": str(self.home), "cwd": str(self.project)}).encode()
        status, answer = client.exchange(str(self.daemon.socket_path), "POST", "/dispatch", body,
                                         connect_timeout=5, timeout=60)
        assert status == 200, answer
        return str(json.loads(answer)["stdout"])

    def trust_all(self) -> None:
        with HookExecutor(load_settings(), sandboxes={"docker": FakeSandbox(printed)},
                          environ={"CLAUDE_PROJECT_DIR": str(self.project)}) as executor:
            pending, refused = executor.pending_reviews(self.project, agents=[DIALECTS["claude"]])
            assert not refused
            executor.grant([subject for _, subject in pending])


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    import uvicorn

    home, managed, project, user_home = (tmp_path / name for name in ("home", "managed", "project", "user"))
    for folder in (home, managed, project / ".hookcage", project / ".claude", user_home / ".claude"):
        folder.mkdir(parents=True)
    for name in list(os.environ):
        if name.startswith("HOOKCAGE_") or name.startswith("CLAUDE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOOKCAGE_HOME", str(home))
    monkeypatch.setenv("HOOKCAGE_MANAGED_DIR", str(managed))
    monkeypatch.setenv("HOME", str(user_home))
    filecache.clear_all()
    fake = FakeSandbox(printed)
    daemon = Daemon(home=home, sandbox_factory=lambda backend, settings: fake)
    sock = daemon.listen()
    server = uvicorn.Server(uvicorn.Config(daemon.app, log_level="warning", lifespan="off", http="h11",
                                           loop="asyncio", ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while client.health(str(daemon.socket_path), timeout=0.5) is None:
        time.sleep(0.05)
    env = {"HOOKCAGE_HOME": str(home), "HOOKCAGE_MANAGED_DIR": str(managed), "CLAUDE_PROJECT_DIR": str(project)}
    yield World(home, managed, project, user_home, daemon, env)
    server.should_exit = True
    thread.join(30)
    daemon.close()
    filecache.clear_all()


def hooks(command: str) -> str:
    return json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": command}]}]}})


ALLOWED = ["echo ma", "echo mb", "echo ua", "echo ub", "echo pa", "echo pb", "echo la", "echo lb",
           "echo ca", "echo cb", "echo sa", "echo sb", "sh .hookcage/p.sh"]


# -- how a file is changed -------------------------------------------------------------


def edit(path: Path, text: str) -> None:
    """An ordinary edit (its size differs: the new text is one line longer)."""
    path.write_text(text + "\n")


def same_tick(path: Path, text: str) -> None:
    """The same size, and the old mtime put back: only ctime (and the bytes) tell."""
    before = os.stat(path)
    assert len(text.encode()) == before.st_size, "the two versions must have the same size"
    with open(path, "r+b") as handle:
        handle.write(text.encode())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


def rename_over(path: Path, text: str) -> None:
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    os.replace(fresh, path)


def symlink_swap(path: Path, text: str) -> None:
    """``path`` is a symlink (made so by :func:`start`); it is swapped for one to a new file."""
    assert path.is_symlink()
    target = path.with_name(path.name + ".b")
    target.write_text(text)
    link = path.with_name(path.name + ".link")
    link.symlink_to(target.name)
    os.replace(link, path)


CHANGES: dict[str, Callable[[Path, str], None]] = {
    "edit": edit, "same_tick": same_tick, "rename_over": rename_over, "symlink_swap": symlink_swap,
}


def start(path: Path, text: str, change: str) -> None:
    """Write the first version (behind a symlink for a symlink swap)."""
    if change == "symlink_swap":
        target = path.with_name(path.name + ".a")
        target.write_text(text)
        path.symlink_to(target.name)
    else:
        path.write_text(text)


# -- every kind of file ------------------------------------------------------------------


@dataclass
class Kind:
    """A kind of file: where it is, its two versions, and what each answer (or none) says."""

    path: Callable[[World], Path]
    first: str
    second: str
    prepare: Callable[[World], None] = lambda world: None
    before: str = ""
    after: str = ""
    gone: str = ""
    """What the answer holds once the file is deleted (``""``: only that ``before`` is gone)."""


def _trust_both(world: World, path: Path, first: str, second: str) -> None:
    """Trust the repository's hooks in both versions of ``path`` (a review of each)."""
    for text in (second, first):
        path.write_text(text)
        world.trust_all()
    path.unlink()


def _script(world: World) -> None:
    (world.project / ".hookcage" / "hooks.json").write_text(hooks("sh .hookcage/p.sh"))


def _trusted_project(world: World) -> None:
    (world.project / ".hookcage" / "hooks.json").write_text(hooks("echo pa"))
    world.trust_all()


def _store_text(world: World) -> tuple[str, str]:
    """The trust store trusting the project hook, and the same bytes trusting nothing (each
    digest reversed: same size, still a valid store)."""
    text = (world.home / "trust.json").read_text()
    digests = [record.digest for record in TrustStore(world.home / "trust.json").records()]
    other = text
    for digest in digests:
        other = other.replace(digest, digest[::-1])
    return text, other


KINDS: dict[str, Kind] = {
    "managed hooks.json": Kind(lambda w: w.managed / "hooks.json", hooks("echo ma"), hooks("echo mb"),
                               before="out-ma", after="out-mb"),
    "user hooks.json": Kind(lambda w: w.home / "hooks.json", hooks("echo ua"), hooks("echo ub"),
                            before="out-ua", after="out-ub"),
    "project hooks.json": Kind(
        lambda w: w.project / ".hookcage" / "hooks.json", hooks("echo pa"), hooks("echo pb"),
        prepare=lambda w: _trust_both(w, w.project / ".hookcage" / "hooks.json", hooks("echo pa"), hooks("echo pb")),
        before="out-pa", after="out-pb"),
    "local hooks.local.json": Kind(
        lambda w: w.project / ".hookcage" / "hooks.local.json", hooks("echo la"), hooks("echo lb"),
        prepare=lambda w: _trust_both(w, w.project / ".hookcage" / "hooks.local.json", hooks("echo la"),
                                      hooks("echo lb")),
        before="out-la", after="out-lb"),
    "claude user settings.json": Kind(lambda w: w.user_home / ".claude" / "settings.json", hooks("echo ca"),
                                      hooks("echo cb"), before="out-ca", after="out-cb"),
    "claude project settings.json": Kind(
        lambda w: w.project / ".claude" / "settings.json", hooks("echo ca"), hooks("echo cb"),
        prepare=lambda w: _trust_both(w, w.project / ".claude" / "settings.json", hooks("echo ca"), hooks("echo cb")),
        before="out-ca", after="out-cb"),
    "referenced script": Kind(lambda w: w.project / ".hookcage" / "p.sh", "echo sa\n", "echo sb\n", prepare=_script,
                              before="echo sa", after="not trusted yet", gone="not trusted yet"),
}


def _config_kind(where: Callable[[World], Path]) -> Kind:
    def prepare(world: World) -> None:
        (world.home / "hooks.json").write_text(hooks("echo ua"))

    # The first version allows the user's hook; the second (same size) allows another command.
    return Kind(where, '[allowlist]\nallow = ["echo ua"]\n', '[allowlist]\nallow = ["echo ux"]\n', prepare=prepare,
                before="out-ua", after="not on the allow-list", gone="not on the allow-list")


KINDS["user config.toml"] = _config_kind(lambda w: w.home / "config.toml")
KINDS["managed config.toml"] = _config_kind(lambda w: w.managed / "config.toml")


@pytest.mark.parametrize("change", [*CHANGES, "delete"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_of_file_changed_every_way_is_seen_by_the_next_event(world: World, kind: str, change: str) -> None:
    spec = KINDS[kind]
    config_kind = kind.endswith("config.toml")
    if not config_kind:
        allow(world.home, ALLOWED)
    spec.prepare(world)
    path = spec.path(world)
    start(path, spec.first, change)
    if kind == "referenced script":
        world.trust_all()  # the first version only (as it is: a file, or a symlink): the second is unreviewed
    assert spec.before in world.ask()
    parsed = filecache.FILES.parsed
    assert spec.before in world.ask()  # from the cache now (checked by its bytes: written just now)
    assert filecache.FILES.parsed == parsed
    if change == "delete":
        path.unlink()
        answer = world.ask()
        assert spec.before not in answer
        assert spec.gone in answer
        return
    CHANGES[change](path, spec.second)
    answer = world.ask()
    assert spec.after in answer and spec.before not in answer, answer


def _prepare_trusted(world: World, *, trust_file: bool) -> tuple[Path, str, str]:
    allow(world.home, ALLOWED)
    _trusted_project(world)
    text, untrusting = _store_text(world)
    if not trust_file:
        (world.home / "trust.json").unlink()
        return world.home / "trust.json", text, untrusting
    exported = world.project.parent / "exported-trust.json"
    world.env["HOOKCAGE_TRUST_FILE"] = str(exported)
    store = TrustStore(world.home / "trust.json")
    exported_text = store.export()
    store.revoke_all()  # only the trust file trusts now
    other = exported_text
    for record in TrustStore(world.home / "trust.json", extra=[]).records():
        other = other.replace(record.digest, record.digest[::-1])
    for digest in json.loads(exported_text)["records"]:
        other = other.replace(digest, digest[::-1])
    return exported, exported_text, other


@pytest.mark.parametrize("change", [*CHANGES, "delete"])
@pytest.mark.parametrize("trust_file", [False, True], ids=["trust store", "HOOKCAGE_TRUST_FILE"])
def test_the_trust_store_and_the_trust_file_changed_every_way_are_seen_by_the_next_event(
        world: World, trust_file: bool, change: str) -> None:
    path, trusting, untrusting = _prepare_trusted(world, trust_file=trust_file)
    start(path, trusting, change)
    assert "out-pa" in world.ask()
    assert "out-pa" in world.ask()
    if change == "delete":
        path.unlink()
    else:
        CHANGES[change](path, untrusting)
    answer = world.ask()
    assert "out-pa" not in answer
    assert "not trusted yet" in answer or "cannot be read" in answer, answer


def test_a_file_rewritten_within_one_tick_is_compared_by_its_bytes(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The racy rule: a file system whose timestamps did not move (a coarse clock) still shows
    the edit, because an entry read less than RACY_NS after the file's change is checked by bytes."""
    cache = filecache.FileCache()
    path = tmp_path / "f"
    path.write_bytes(b"one")
    monkeypatch.setattr(filecache, "identity_of", lambda info: (1, 2, 3, 4, 5))  # nothing ever moves
    assert cache.load(path, "k", path.read_bytes, bytes.decode) == "one"
    path.write_bytes(b"two")
    assert cache.load(path, "k", path.read_bytes, bytes.decode) == "two"
    assert cache.parsed == 2


def test_a_settled_file_is_known_by_its_identity_and_a_network_one_by_its_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = filecache.FileCache()
    path = tmp_path / "f"
    path.write_bytes(b"one")
    old = time.time_ns() - 10 * filecache.RACY_NS
    os.utime(path, ns=(old, old))
    reads: list[int] = []

    def read() -> bytes:
        reads.append(1)
        return path.read_bytes()

    monkeypatch.setattr(filecache, "_settled", lambda info, read_ns: True)  # as if read long after its change
    cache.load(path, "k", read, bytes.decode)
    assert cache.load(path, "k", read, bytes.decode) == "one"
    assert (len(reads), cache.hits) == (1, 1)  # known by its identity: not read again
    monkeypatch.setattr(filecache, "local_device", lambda dev: False)  # NFS, FUSE...: bytes every time
    monkeypatch.setattr(filecache, "identity_of", lambda info: (1, 2, 3, 4, 5))
    cache.clear()
    cache.load(path, "k", read, bytes.decode)
    path.write_bytes(b"two")
    assert cache.load(path, "k", read, bytes.decode) == "two"


def test_the_local_file_systems_are_told_by_the_mount_table(tmp_path: Path) -> None:
    assert filecache.local_device(os.stat(tmp_path).st_dev) in (True, False)  # answers, never raises
    assert not filecache.local_device(-1)  # a device in no mount table: compared by bytes


FORMATS = {
    "claude (JSON)": ("claude", "json", hooks("echo xa")),
    "gemini (JSON with comments)": (
        "gemini", "json",
        '// comment\n{"hooks": {"BeforeTool": [{"matcher": "x", "hooks": [{"type": "command", "command": "echo xa"}]}]}}\n'),
    "codex (TOML)": ("codex", "toml", '[features]\nhooks = true\n\n[[hooks.PreToolUse]]\nmatcher = "^Bash$"\n\n'
                     '[[hooks.PreToolUse.hooks]]\ntype = "command"\ncommand = "echo xa"\n'),
    "infer (YAML)": ("infer", "yaml", 'enabled: true\nhooks:\n  - name: x\n    hook: post_session\n    command: "echo xa"\n'),
    "hookcage (JSON)": ("", "json", hooks("echo xa")),
}


@pytest.mark.parametrize("change", [*CHANGES, "delete"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_hook_file_of_every_dialect_and_format_changed_every_way_is_read_afresh(
        tmp_path: Path, fmt: str, change: str) -> None:
    """What the daemon's reads go through (config.load_hook_file), for each agent's file format;
    the daemon test above covers the scopes through a served daemon."""
    from executor.config import load_hook_file
    from executor.core.hooks import Scope

    agent, form, first = FORMATS[fmt]
    dialect = DIALECTS[agent] if agent else None
    path = tmp_path / f"hooks.{form}"

    def commands() -> list[str | None]:
        loaded = load_hook_file(path, Scope.USER, None, dialect, form, {})  # type: ignore[arg-type]
        return [hook.command for hook in loaded.hooks] if loaded is not None else []

    filecache.clear_all()
    start(path, first, change)
    assert commands() == ["echo xa"]
    parsed = filecache.FILES.parsed
    assert commands() == ["echo xa"]
    assert filecache.FILES.parsed == parsed  # kept, not parsed again
    if change == "delete":
        path.unlink()
        assert commands() == []
    else:
        CHANGES[change](path, first.replace("echo xa", "echo xb"))
        assert commands() == ["echo xb"]


def test_runs_of_the_same_reviewed_bytes_share_one_staged_tree_and_a_changed_one_is_written_anew(
        world: World) -> None:
    allow(world.home, ALLOWED)
    _script(world)
    script = world.project / ".hookcage" / "p.sh"
    script.write_text("echo sa\n")
    world.trust_all()
    assert "echo sa" in world.ask()
    assert "echo sa" in world.ask()
    trees = world.daemon._trees
    assert trees.reused >= 1
    staged = [path for path in (world.home / "staging").glob("run-*/tree/.hookcage/p.sh")]
    assert len(staged) == 1
    # Someone changes the staged copy (the user's own host hook could): it is never lent again.
    staged[0].chmod(0o644)
    staged[0].write_text("echo XX\n")
    answer = world.ask()
    assert "echo sa" in answer and "XX" not in answer
    world.daemon.close()  # stops: its trees go with it
    assert not list((world.home / "staging").glob("run-*"))


def test_resolve_answers_what_realpath_answers(tmp_path: Path) -> None:
    """filecache.resolve (the kernel's walk) against os.path.realpath, on symlinks of every kind."""
    root = tmp_path / "r"
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "f.json").write_text("{}")
    (root / "file").write_text("x")
    (root / "to_d").symlink_to("d")
    (root / "abs_to_e").symlink_to(root / "d" / "e")
    (root / "dangling").symlink_to("nowhere/else")
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    (root / "d" / "up").symlink_to("..")
    names = ["d", "d/e/f.json", "to_d/e/f.json", "abs_to_e/f.json", "d/up/to_d/e", "dangling", "dangling/x",
             "loop_a", "loop_a/x", "missing", "missing/deeper/x.json", "file/x", "to_d/missing.json",
             "d/e/../e/f.json", "d/./e", "d/e/", ""]
    for name in names:
        path = f"{root}/{name}" if name else str(root)
        assert filecache.resolve(path) == os.path.realpath(path), name
    assert filecache.resolve("relative/x") == os.path.realpath("relative/x")
    assert filecache.resolve("//" + str(root).lstrip("/")) == os.path.realpath("//" + str(root).lstrip("/"))
