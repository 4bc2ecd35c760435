"""The trust hash (collect_references, TrustSubject) and the trust store, on real files."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import pickle
import stat
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from executor.core.files import FileState
from executor.errors import TrustStoreError
from executor.gates.trust import (
    MAX_REFERENCED_FILE,
    MAX_REFERENCED_FILES,
    TRUST_FORMAT,
    TrustRecord,
    TrustStore,
    TrustSubject,
    UnsafeReference,
    collect_references,
)

pytestmark = pytest.mark.spawns

GUARD = b"#!/bin/sh\necho guarded\n"
PROFILE: dict[str, Any] = {
    "image": "sha256:" + "1" * 64,
    "workspace": "ro",
    "network": "none",
    "mounts": [],
    "env": {"LANG": "C.UTF-8", "MODE": "strict"},
    "memory": "512m",
    "cpus": 1.0,
    "pids": 256,
    "timeout": 60.0,
}
NOW = "2025-01-02T03:04:05Z"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A project with a guard script, a helper directory, and a secret next door."""
    proj = tmp_path / "proj"
    (proj / ".hookcage" / "lib").mkdir(parents=True)
    (proj / ".hookcage" / "guard.sh").write_bytes(GUARD)
    (proj / ".hookcage" / "lib" / "util.sh").write_bytes(b"util\n")
    (proj / ".hookcage" / "lib" / "deep").mkdir()
    (proj / ".hookcage" / "lib" / "deep" / "z.py").write_bytes(b"z\n")
    (proj / "guard.sh").write_bytes(GUARD)
    (proj / "src").mkdir()
    (proj / "src" / "app.py").write_bytes(b"app\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.sh").write_bytes(b"secret\n")
    (outside / "dir").mkdir()
    (outside / "dir" / "x.sh").write_bytes(b"x\n")
    return proj


def refs(root: Path, *words: str) -> tuple[FileState, ...]:
    return collect_references(words, str(root))


def states(root: Path, *words: str) -> dict[str, tuple[str, str | None, str | None]]:
    """path -> (kind, sha256, link) of what the words reference."""
    return {f.path: (f.kind, f.sha256, f.link) for f in refs(root, *words)}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def subject(root: Path | str, *words: str, **changes: Any) -> TrustSubject:
    command = changes.pop("command", " ".join(words) or "true")
    base = TrustSubject(
        root=str(root),
        source=f"{root}/.hookcage/hooks.json",
        event="PreToolUse",
        matcher="Bash",
        type="command",
        command=command,
        files=collect_references(words, str(root)) if words else (),
        profile=PROFILE,
        capabilities=(),
    )
    return replace(base, **changes)


@pytest.fixture
def no_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record every file opened while the test runs; the test asserts there were none."""
    opened: list[str] = []
    real_open = os.open

    def spy(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    yield opened


# -- what counts as a reference ---------------------------------------------------


def test_a_script_is_referenced_by_absolute_relative_and_bare_paths(root: Path) -> None:
    for word in (f"{root}/guard.sh", "./guard.sh", "guard.sh", f"{root}//./guard.sh"):
        assert states(root, "sh", word) == {"guard.sh": ("file", sha(GUARD), None)}, word
    found = refs(root, "sh", ".hookcage/guard.sh", "--fast")
    assert [(f.path, f.kind, f.data) for f in found] == [(".hookcage/guard.sh", "file", GUARD)]


def test_paths_are_deduplicated_and_sorted(root: Path) -> None:
    found = refs(root, "src/app.py", "./guard.sh", "guard.sh", f"{root}/guard.sh", ".hookcage/guard.sh")
    assert [f.path for f in found] == [".hookcage/guard.sh", "guard.sh", "src/app.py"]


@pytest.mark.parametrize("word", [
    "/usr/bin/jq", "/dev/null", "/etc/passwd", "sh", "-la", "--fast", "npm", "test",
    "https://example.com/a/b", "src",  # a bare directory name is an argument, not a script
    ".", "./", "src/..",  # the root itself is the workspace
])
def test_words_that_are_not_references(root: Path, word: str) -> None:
    (root / "test").mkdir()
    assert refs(root, word) == ()


def test_the_root_itself_is_not_a_reference(root: Path) -> None:
    assert refs(root, "cd", str(root), "&&", "npm", "test") == ()


def test_a_missing_path_is_recorded_as_missing(root: Path) -> None:
    assert states(root, "./new.sh", f"{root}/later/run.py", "tools/x.sh") == {
        "new.sh": ("missing", None, None),
        "later/run.py": ("missing", None, None),
        "tools/x.sh": ("missing", None, None),
    }
    assert refs(root, "./new.sh")[0].data is None


def test_the_value_of_an_option_or_assignment_is_a_reference(root: Path) -> None:
    (root / "conf.toml").write_bytes(b"x = 1\n")
    assert set(states(root, "lint", "--config=./conf.toml", "GUARD=guard.sh")) == {"conf.toml", "guard.sh"}


def test_a_directory_is_expanded_to_every_file_under_it(root: Path) -> None:
    found = refs(root, "run-parts", ".hookcage/")
    assert [f.path for f in found] == [
        ".hookcage/guard.sh", ".hookcage/lib/deep/z.py", ".hookcage/lib/util.sh",
    ]
    assert [f.data for f in found] == [GUARD, b"z\n", b"util\n"]


def test_a_symlink_inside_the_project_records_its_text_and_its_targets_content(root: Path) -> None:
    (root / "run.sh").symlink_to(".hookcage/guard.sh")
    (found,) = refs(root, "./run.sh")
    assert (found.path, found.kind, found.sha256, found.link, found.data) == (
        "run.sh", "symlink", sha(GUARD), ".hookcage/guard.sh", GUARD,
    )


def test_a_symlinked_directory_on_the_way_is_recorded_too(root: Path) -> None:
    (root / "tools").symlink_to(".hookcage/lib")
    assert states(root, "tools/util.sh") == {
        "tools": ("symlink", None, ".hookcage/lib"),
        "tools/util.sh": ("file", sha(b"util\n"), None),
    }


def test_a_symlink_chain_inside_the_project_records_every_link(root: Path) -> None:
    (root / "b").symlink_to("guard.sh")
    (root / "a").symlink_to(f"{root}/b")
    assert states(root, "./a") == {
        "a": ("symlink", sha(GUARD), f"{root}/b"),
        "b": ("symlink", sha(GUARD), "guard.sh"),
    }


def test_a_dangling_symlink_inside_the_project_is_recorded(root: Path) -> None:
    (root / "later.sh").symlink_to("not-yet.sh")
    assert states(root, "./later.sh") == {"later.sh": ("symlink", None, "not-yet.sh")}


def test_a_symlink_loop_in_a_directory_ends(root: Path) -> None:
    (root / ".hookcage" / "lib" / "again").symlink_to("..")
    (root / "self").symlink_to("self")
    found = states(root, "./.hookcage")
    assert found[".hookcage/lib/again"] == ("symlink", None, "..")
    assert len(found) == 4
    with pytest.raises(UnsafeReference, match="too many levels"):
        refs(root, "./self")


def test_a_root_given_through_a_symlink_is_resolved(root: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    assert states(alias, f"{alias}/guard.sh", f"{root}/src/app.py") == {
        "guard.sh": ("file", sha(GUARD), None),
        "src/app.py": ("file", sha(b"app\n"), None),
    }


# -- refused before anything is read ----------------------------------------------


def test_a_relative_path_out_of_the_project_is_refused_unread(root: Path, no_reads: list[str]) -> None:
    for word in ("../outside/secret.sh", "src/../../outside/secret.sh", ".."):
        with pytest.raises(UnsafeReference, match="leaves the project") as caught:
            refs(root, "sh", "guard.sh", word)
        assert "\n" not in str(caught.value)
    assert no_reads == []


def test_an_absolute_path_that_only_looks_inside_is_refused_unread(root: Path, no_reads: list[str]) -> None:
    with pytest.raises(UnsafeReference, match="leaves the project"):
        refs(root, "cat", f"{root}/../outside/secret.sh")
    with pytest.raises(UnsafeReference, match="outside the project"):
        refs(root, "cat", f"{root.parent}/outside/../proj/guard.sh")
    assert no_reads == []


@pytest.mark.parametrize("make, word", [
    (lambda r: (r / "s.sh").symlink_to(r.parent / "outside" / "secret.sh"), "./s.sh"),
    (lambda r: (r / "s.sh").symlink_to("../outside/secret.sh"), "./s.sh"),
    (lambda r: (r / "s.sh").symlink_to("../outside/secret.sh"), "s.sh"),
    (lambda r: (r / "s.sh").symlink_to("/etc/passwd"), "s.sh"),
    (lambda r: (r / "out").symlink_to(r.parent / "outside" / "dir"), "out/x.sh"),
    (lambda r: (r / "out").symlink_to("../outside/dir"), "./out"),
    (lambda r: (r / ".hookcage" / "lib" / "leak").symlink_to("../../../outside/secret.sh"), ".hookcage/"),
    (lambda r: (r / "dangling").symlink_to("../outside/not-there.sh"), "./dangling"),
], ids=["absolute", "relative", "bare-word", "system-file", "dir-on-the-way", "dir", "inside-a-dir",
        "dangling"])
def test_a_symlink_out_of_the_project_is_refused_unread(
    root: Path, make: Any, word: str, no_reads: list[str]
) -> None:
    make(root)
    with pytest.raises(UnsafeReference, match="outside the project"):
        refs(root, "sh", "guard.sh", word)
    assert no_reads == []


def test_a_symlink_chain_ending_outside_is_refused(root: Path, no_reads: list[str]) -> None:
    (root / "c").symlink_to("../outside/secret.sh")
    (root / "b").symlink_to("c")
    (root / "a").symlink_to("b")
    with pytest.raises(UnsafeReference, match=r"c is a symlink to \.\./outside/secret\.sh"):
        refs(root, "./a")
    assert no_reads == []


def test_dotdot_after_a_symlink_is_refused(root: Path) -> None:
    (root / "tools").symlink_to(".hookcage/lib")
    # The kernel reads tools/.. as .hookcage, a reviewer reads it as the root.
    with pytest.raises(UnsafeReference, match="after the symlink tools"):
        refs(root, "tools/../guard.sh")


def test_a_file_larger_than_the_cap_is_refused_unread(root: Path, no_reads: list[str]) -> None:
    with open(root / "big.bin", "wb") as big:
        big.truncate(MAX_REFERENCED_FILE + 1)
    with pytest.raises(UnsafeReference, match="larger than 8 MiB"):
        refs(root, "guard.sh", "./big.bin")
    assert no_reads == []


def test_a_file_at_the_cap_is_read(root: Path) -> None:
    with open(root / "big.bin", "wb") as big:
        big.truncate(MAX_REFERENCED_FILE)
    (found,) = refs(root, "./big.bin")
    assert found.data is not None and len(found.data) == MAX_REFERENCED_FILE


def test_a_directory_with_too_many_files_is_refused(root: Path) -> None:
    many = root / "many"
    many.mkdir()
    for i in range(MAX_REFERENCED_FILES + 1):
        (many / f"f{i}").write_bytes(b"")
    with pytest.raises(UnsafeReference, match="more than 1000 files"):
        refs(root, "./many")


def test_something_other_than_a_file_is_refused(root: Path) -> None:
    os.mkfifo(root / "pipe")
    with pytest.raises(UnsafeReference, match="not a regular file"):
        refs(root, "cat", "./pipe")


# -- the trust hash -----------------------------------------------------------------


def test_the_digest_is_sha256_of_canonical_json(root: Path) -> None:
    s = subject(root, "sh", ".hookcage/guard.sh")
    doc = json.loads(s.canonical())
    assert doc["format"] == TRUST_FORMAT
    assert doc["files"] == [[".hookcage/guard.sh", "file", sha(GUARD), None]]
    assert s.canonical() == json.dumps(doc, sort_keys=True, separators=(",", ":"))
    assert s.digest() == sha(s.canonical().encode())


def test_the_digest_of_a_fixed_subject_never_changes() -> None:
    # Every trusted hook of every user depends on this value: changing the canonical
    # form means raising TRUST_FORMAT.
    fixed = TrustSubject(
        root="/work/proj", source="/work/proj/.hookcage/hooks.json", event="PreToolUse",
        matcher="Bash", type="command", command="sh .hookcage/guard.sh",
        files=(FileState(".hookcage/guard.sh", "file", sha(GUARD)),
               FileState("run.sh", "symlink", sha(GUARD), ".hookcage/guard.sh")),
        profile=PROFILE, capabilities=("updatedInput", "allow"),
    )
    assert fixed.digest() == "582872a36a3c1e439d3449b9607634c59a13500f73b624b2656d85ef150b600e"


def test_the_digest_is_stable_across_runs_and_orderings(root: Path) -> None:
    first = subject(root, "sh", ".hookcage/", "guard.sh", capabilities=("b", "a"))
    shuffled = dict(reversed(list(PROFILE.items())))
    shuffled["env"] = {"MODE": "strict", "LANG": "C.UTF-8"}
    again = subject(root, "guard.sh", "sh", ".hookcage/", profile=shuffled,
                    capabilities=("a", "b", "a"), command=first.command)
    assert again.digest() == first.digest()
    assert replace(again, files=tuple(reversed(again.files))).digest() == first.digest()


def test_editing_the_command_untrusts(root: Path) -> None:
    assert subject(root, "sh", "guard.sh").digest() != subject(root, "sh", "guard.sh", "-x").digest()


def test_editing_a_referenced_script_untrusts(root: Path) -> None:
    before = subject(root, "sh", ".hookcage/").digest()
    (root / ".hookcage" / "lib" / "deep" / "z.py").write_bytes(b"z = 2\n")
    assert subject(root, "sh", ".hookcage/").digest() != before


def test_adding_a_referenced_file_untrusts(root: Path) -> None:
    before = subject(root, "sh", "./later.sh").digest()
    (root / "later.sh").write_bytes(b"")
    assert subject(root, "sh", "./later.sh").digest() != before
    before = subject(root, "sh", "./.hookcage").digest()
    (root / ".hookcage" / "new.sh").write_bytes(b"")
    assert subject(root, "sh", "./.hookcage").digest() != before


def test_swapping_a_file_for_a_symlink_to_the_same_bytes_untrusts(root: Path) -> None:
    before = subject(root, "sh", "./guard.sh").digest()
    (root / "guard.sh").unlink()
    (root / "guard.sh").symlink_to(".hookcage/guard.sh")  # identical content, inside
    assert subject(root, "sh", "./guard.sh").digest() != before


def test_swapping_a_directory_for_a_symlink_to_the_same_files_untrusts(root: Path) -> None:
    (root / "copy").mkdir()
    (root / "copy" / "util.sh").write_bytes(b"util\n")
    before = subject(root, "sh", "copy/util.sh").digest()
    (root / "copy" / "util.sh").unlink()
    (root / "copy").rmdir()
    (root / "copy").symlink_to(".hookcage/lib")
    assert subject(root, "sh", "copy/util.sh").digest() != before


@pytest.mark.parametrize("key, value", [
    ("image", "sha256:" + "2" * 64), ("network", "bridge"), ("workspace", "rw"),
    ("mounts", ["/work/proj/data"]), ("env", {"LANG": "C.UTF-8", "MODE": "lax"}),
    ("memory", "1g"), ("cpus", 2.0), ("pids", 512), ("timeout", 61.0),
])
def test_widening_the_sandbox_untrusts(root: Path, key: str, value: Any) -> None:
    before = subject(root, "guard.sh")
    after = replace(before, profile={**PROFILE, key: value})
    assert after.digest() != before.digest()


@pytest.mark.parametrize("change", [
    {"capabilities": ("updatedInput",)}, {"root": "/elsewhere"}, {"source": "/x/hooks.local.json"},
    {"event": "PostToolUse"}, {"matcher": None}, {"matcher": "Bash|Write"}, {"type": "prompt"},
])
def test_other_parts_of_the_subject_untrust(root: Path, change: dict[str, Any]) -> None:
    before = subject(root, "guard.sh")
    assert replace(before, **change).digest() != before.digest()


# -- trust records ----------------------------------------------------------------


def test_a_record_keeps_what_was_reviewed(root: Path) -> None:
    (root / "bin.dat").write_bytes(b"\xff\xfe" + b"a" * (300 * 1024))
    s = subject(root, "sh", "guard.sh", "./bin.dat", "./gone.sh", capabilities=("b", "a"))
    record = TrustRecord.of(s, NOW)
    assert record.digest == s.digest() and record.id == s.digest()[:12]
    assert record.files == (("bin.dat", "file", sha((root / "bin.dat").read_bytes())),
                            ("gone.sh", "missing", None), ("guard.sh", "file", sha(GUARD)))
    assert record.file_text["guard.sh"] == GUARD.decode()
    assert record.file_text["bin.dat"].startswith("\udcff\udcfeaaa")  # the bytes, kept exactly
    assert len(record.file_text["bin.dat"]) == 256 * 1024
    assert "gone.sh" not in record.file_text
    assert record.capabilities == ("a", "b")
    assert TrustRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


@pytest.mark.parametrize("damage", [
    {"digest": "abc"}, {"files": [["a", "file"]]}, {"files": [["a", "weird", None]]},
    {"matcher": 3}, {"profile": []}, {"capabilities": [1]}, {"file_text": {"a": 1}},
    {"trusted_at": None},
])
def test_a_record_of_the_wrong_shape_is_refused(root: Path, damage: dict[str, Any]) -> None:
    data = {**TrustRecord.of(subject(root, "guard.sh"), NOW).to_json(), **damage}
    with pytest.raises(TrustStoreError):
        TrustRecord.from_json(data)


# -- the store ----------------------------------------------------------------------


def fake_record(name: str, **fields: Any) -> TrustRecord:
    """A record with a made-up digest, for store tests."""
    base = {
        "digest": sha(name.encode()), "root": "/work/proj", "source": "/work/proj/.hookcage/hooks.json",
        "event": "PreToolUse", "matcher": "Bash", "command": f"echo {name}", "files": (),
        "file_text": {}, "profile": PROFILE, "capabilities": (), "trusted_at": NOW,
    }
    return TrustRecord(**{**base, **fields})


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "trust.json"


def test_add_trust_find_and_revoke(store_path: Path) -> None:
    store = TrustStore(store_path)
    assert store.records() == [] and not store.is_trusted(sha(b"a"))
    a, b, c = fake_record("a"), fake_record("b"), fake_record("c")
    store.add([a, b])
    store.add([c])
    assert all(TrustStore(store_path).is_trusted(r.digest) for r in (a, b, c))
    assert store.find(a.id) == a
    assert store.find(b.digest[:6].upper()) == b
    assert store.find(b.digest[:5]) is None  # too short to name one
    assert store.find("0" * 12) is None
    assert store.revoke([a.id, "nothing", "abc"]) == 1
    assert not store.is_trusted(a.digest)
    assert store.revoke([b.digest]) == 1
    assert store.revoke([b.digest]) == 0
    assert [r.digest for r in store.records()] == [c.digest]
    assert store.revoke_all() == 1 and store.records() == []


def test_prune_keeps_what_keep_says(store_path: Path) -> None:
    store = TrustStore(store_path)
    store.add([fake_record("a", root="/gone"), fake_record("b"), fake_record("c", root="/gone")])
    assert store.prune(lambda r: r.root != "/gone") == 2
    assert [r.command for r in store.records()] == ["echo b"]


def test_the_store_is_private(store_path: Path) -> None:
    TrustStore(store_path).add([fake_record("a")])
    assert stat.S_IMODE(store_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store_path.parent.stat().st_mode) & 0o077 == 0
    assert json.loads(store_path.read_text())["format"] == TRUST_FORMAT


def test_an_export_is_trusted_by_a_fresh_store_that_never_writes_it(tmp_path: Path, store_path: Path) -> None:
    store = TrustStore(store_path)
    store.add([fake_record("a"), fake_record("b")])
    exported = tmp_path / "ci-trust.json"
    exported.write_text(store.export())
    before = exported.read_bytes()

    fresh = TrustStore(tmp_path / "other" / "trust.json", extra=[exported])
    assert fresh.is_trusted(fake_record("a").digest) and fresh.is_trusted(fake_record("b").digest)
    assert fresh.records() == store.records()
    fresh.add([fake_record("c")])
    assert fresh.revoke([fake_record("a").id]) == 0  # extra files are read-only
    assert fresh.revoke_all() == 1
    assert fresh.is_trusted(fake_record("a").digest)
    assert exported.read_bytes() == before
    assert {r.command for r in TrustStore(tmp_path / "x.json", extra=[exported]).records()} == {"echo a", "echo b"}
    assert json.loads(fresh.export())["records"].keys() == {fake_record(n).digest for n in "ab"}


def test_records_list_the_store_first(tmp_path: Path, store_path: Path) -> None:
    extra = tmp_path / "extra.json"
    extra_store = TrustStore(extra)
    extra_store.add([fake_record("x", trusted_at="2000-01-01T00:00:00Z"), fake_record("a")])
    store = TrustStore(store_path, extra=[extra])
    store.add([fake_record("a", trusted_at="2030-01-01T00:00:00Z"), fake_record("b")])
    assert [(r.command, r.trusted_at[:4]) for r in store.records()] == [
        ("echo b", "2025"), ("echo a", "2030"), ("echo x", "2000"),
    ]


TRUNCATED = json.dumps({"format": 1, "records": {fake_record("a").digest: fake_record("a").to_json()}})[:150]


@pytest.mark.parametrize("content, detail", [
    (b"not json at all", "Expecting value at line 1"),
    (TRUNCATED.encode(), "at line 1"),
    (b'{"format": 2, "records": {}}', "format 2, from a newer hookcage"),
    (b'{"format": "1", "records": {}}', 'format "1", expected 1'),
    (b'{"records": {}}', "no format number"),
    (b'[]', "not a JSON object"),
    (b'{"format": 1, "records": []}', "'records' must be an object"),
    (b'{"format": 1, "records": {"a": {"digest": "zz"}}}', "is not a sha256 hex digest"),
    (json.dumps({"format": 1, "records": {sha(b"b"): fake_record("a").to_json()}}).encode(), "holds digest"),
    (b"\xff\xfe{}", "not UTF-8"),
], ids=["garbage", "truncated", "newer-format", "string-format", "no-format", "array", "records-list",
        "bad-record", "wrong-key", "not-utf8"])
def test_a_corrupt_store_says_how_to_repair_and_is_never_written_over(
    store_path: Path, content: bytes, detail: str
) -> None:
    store_path.parent.mkdir()
    store_path.write_bytes(content)
    store = TrustStore(store_path)
    for attempt in (lambda: store.is_trusted(sha(b"a")), store.records, lambda: store.add([fake_record("b")]),
                    lambda: store.revoke(["a" * 12]), store.revoke_all, store.export):
        with pytest.raises(TrustStoreError) as caught:
            attempt()
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith(f"trust store {store_path} ")
        assert detail in message
        assert f"mv {store_path} {store_path}.bad" in message and "hookcage trust" in message
    assert store_path.read_bytes() == content


def test_an_unreadable_store_is_an_error(store_path: Path) -> None:
    store_path.mkdir(parents=True)  # a directory where the file should be
    with pytest.raises(TrustStoreError, match="cannot be read"):
        TrustStore(store_path).is_trusted(sha(b"a"))


@pytest.mark.parametrize("content", [None, b"{", b'{"format": 1}'])
def test_a_missing_or_corrupt_extra_file_is_an_error_naming_it(
    tmp_path: Path, store_path: Path, content: bytes | None
) -> None:
    extra = tmp_path / "ci-trust.json"
    if content is not None:
        extra.write_bytes(content)
    store = TrustStore(store_path, extra=[extra])
    with pytest.raises(TrustStoreError, match=f"trust file {extra} ") as caught:
        store.is_trusted(sha(b"a"))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_a_failed_write_leaves_the_previous_store(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    store = TrustStore(store_path)
    store.add([fake_record("a")])
    before = store_path.read_bytes()

    def fail(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(TrustStoreError, match=r"No space left on device.*left as it was"):
        store.add([fake_record("b")])
    monkeypatch.undo()
    assert store_path.read_bytes() == before
    assert sorted(p.name for p in store_path.parent.iterdir()) == ["trust.json", "trust.json.lock"]


def _crash_while_renaming(path: str) -> None:
    os.replace = lambda *args: os._exit(3)  # dies after the temp file is complete
    TrustStore(Path(path)).add([fake_record("b")])


def test_a_crash_mid_write_leaves_the_previous_store(store_path: Path) -> None:
    TrustStore(store_path).add([fake_record("a")])
    before = store_path.read_bytes()
    child = _context().Process(target=_crash_while_renaming, args=(str(store_path),))
    child.start()
    child.join(30)
    assert child.exitcode == 3
    assert store_path.read_bytes() == before
    assert [r.command for r in TrustStore(store_path).records()] == ["echo a"]


WORKERS = 8
PER_WORKER = 20


def _trust_and_revoke(path: str, worker: int) -> None:
    store = TrustStore(Path(path))
    for i in range(PER_WORKER):
        store.add([fake_record(f"{worker}-{i}")])
        if i % 2:
            assert store.revoke([fake_record(f"{worker}-{i - 1}").id]) == 1


def _context() -> Any:
    return multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")


def test_concurrent_processes_lose_nothing(store_path: Path) -> None:
    context = _context()
    workers = [context.Process(target=_trust_and_revoke, args=(str(store_path), w)) for w in range(WORKERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0] * WORKERS
    kept = {r.command for r in TrustStore(store_path).records()}
    assert kept == {f"echo {w}-{i}" for w in range(WORKERS) for i in range(1, PER_WORKER, 2)}


def test_previous_finds_the_last_review_of_the_same_hook(store_path: Path, root: Path) -> None:
    now = subject(root, "sh", "guard.sh")
    same_hook = {"root": now.root, "source": now.source, "event": now.event, "matcher": now.matcher}
    older = fake_record("older", **same_hook, command=now.command, trusted_at="2024-01-01T00:00:00Z")
    newer_command = fake_record("cmd", **same_hook, command="sh other.sh", trusted_at="2026-01-01T00:00:00Z")
    other_event = fake_record("evt", **{**same_hook, "event": "Stop"}, command=now.command,
                              trusted_at="2027-01-01T00:00:00Z")
    store = TrustStore(store_path)
    assert store.previous(now) is None
    store.add([newer_command, other_event])
    assert store.previous(now) == newer_command  # the command changed: the latest of this hook
    store.add([older])
    assert store.previous(now) == older  # the same command is a closer match
    store.add([TrustRecord.of(now, "2028-01-01T00:00:00Z")])
    assert store.previous(now) == older  # never the subject itself


def test_unsafe_reference_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(UnsafeReference("../x", "leaves the project /p")))
    assert str(error) == "../x: leaves the project /p"


# -- the execute bit (issue 10: `./hook.sh` runs only if it is executable) -----------


def test_the_execute_bit_is_read_with_the_bytes(root: Path) -> None:
    script = root / ".hookcage" / "guard.sh"
    assert refs(root, ".hookcage/guard.sh")[0].executable is False
    script.chmod(0o755)
    (state,) = refs(root, ".hookcage/guard.sh")
    assert state.executable is True and state.mode == 0o555
    assert state.data == GUARD


def test_a_chmod_after_review_changes_the_trust_hash(root: Path) -> None:
    before = subject(root, ".hookcage/guard.sh").digest()
    (root / ".hookcage" / "guard.sh").chmod(0o744)
    after = subject(root, ".hookcage/guard.sh").digest()
    (root / ".hookcage" / "guard.sh").chmod(0o644)
    assert before != after
    assert subject(root, ".hookcage/guard.sh").digest() == before


def test_a_symlink_takes_the_execute_bit_of_the_file_it_leads_to(root: Path) -> None:
    (root / "run.sh").symlink_to(".hookcage/guard.sh")
    (root / ".hookcage" / "guard.sh").chmod(0o755)
    by_path = {f.path: f for f in refs(root, "run.sh")}
    assert by_path["run.sh"].executable is True


def test_a_hash_without_execute_bits_is_what_it_was_before_they_were_covered(root: Path) -> None:
    # Records made before the bit was hashed stay valid for files that carry none.
    s = subject(root, ".hookcage/guard.sh")
    legacy = json.loads(s.canonical())
    assert legacy["files"] == [[".hookcage/guard.sh", "file", sha(GUARD), None]]


def test_a_record_keeps_which_files_were_executable(root: Path, tmp_path: Path) -> None:
    (root / ".hookcage" / "guard.sh").chmod(0o755)
    record = TrustRecord.of(subject(root, ".hookcage/guard.sh"), NOW)
    assert record.executable == (".hookcage/guard.sh",)
    again = TrustRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again.executable == (".hookcage/guard.sh",)
    old_shape = record.to_json()
    del old_shape["executable"]
    assert TrustRecord.from_json(old_shape).executable == ()
