"""The keep-out of remote requests' paths (:mod:`executor.service.keepout`): the pure rules and the edge.

The HTTP side (status codes, nothing run) is in ``test_service_http.py``; a real
service run by an ordinary user in ``tests/integration/test_service_keepout.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.service.keepout import (
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    Fence,
    NoProject,
    PathRefused,
    fence_request,
    inside,
    judge_inside,
    judge_project,
    make_fence,
    payload_paths,
    well_formed,
)

# -- well-formed --------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "says"), [
    ("/a\x00b", "NUL byte"),
    ("/a\ud800b", "lone surrogate"),
    ("/a\udcffb", "lone surrogate"),
    ("/" + "a" * 5000, f"longer than {MAX_PATH_BYTES} bytes"),
    ("/" + "é" * 2100, f"longer than {MAX_PATH_BYTES} bytes"),  # 4,200 bytes in 2,101 characters
    ("/" + "a" * (MAX_NAME_BYTES + 1), f"longer than {MAX_NAME_BYTES} bytes"),
    ("relative/path", "not an absolute path"),
    ("", "not an absolute path"),
    ("/a/../b", "'..' component"),
    ("/..", "'..' component"),
    (5, "not int"),
    (None, "not NoneType"),
    (["/a"], "not list"),
    ({"a": "/"}, "not dict"),
    (True, "not bool"),
])
def test_malformed_paths_are_400_with_one_line_naming_the_field(value: Any, says: str) -> None:
    with pytest.raises(PathRefused) as caught:
        well_formed(value, "the payload's cwd")
    assert caught.value.status == 400
    message = str(caught.value)
    assert message.startswith("the payload's cwd") and says in message
    assert "\n" not in message and "\x00" not in message and len(message) < 300
    message.encode("utf-8")  # printable in any answer


@pytest.mark.parametrize("value", ["/", "/work/app", "/work/app/", "/a/./b", "/a//b", "/" + "a" * MAX_NAME_BYTES,
                                   "/work/é/app", "/a/...", "/a/..b"])
def test_well_formed_paths_pass_as_they_are(value: str) -> None:
    assert well_formed(value, "x") == value


@settings(max_examples=500)
@given(st.one_of(st.text(), st.binary().map(lambda b: b.decode("utf-8", "surrogateescape")),
                 st.integers(), st.none(), st.lists(st.text(), max_size=2)))
def test_well_formed_never_raises_anything_else(value: Any) -> None:
    try:
        well_formed(value, "p")
    except PathRefused as exc:
        assert exc.status == 400 and "\n" not in str(exc)


# -- judging ------------------------------------------------------------------------------

FENCE = Fence(keep_out=("/srv/hookcage", "/home/svc/token", "/run/docker.sock"),
              project_roots=("/work",), transcript_roots=("/agent/transcripts",))


@pytest.mark.parametrize(("project", "says"), [
    ("/", "contains /srv/hookcage"),
    ("/srv", "contains /srv/hookcage"),
    ("/srv/hookcage", "contains /srv/hookcage"),
    ("/srv/hookcage/homes/p1", "lies in /srv/hookcage"),
    ("/home/svc", "contains /home/svc/token"),
    ("/run", "contains /run/docker.sock"),
    ("/tmp/app", "outside the service's project roots (/work)"),
    ("/workshop", "outside the service's project roots"),  # a prefix of the string is not a parent
])
def test_a_project_is_403_in_or_around_the_keep_out_or_outside_the_roots(project: str, says: str) -> None:
    with pytest.raises(PathRefused) as caught:
        judge_project(project, FENCE)
    assert caught.value.status == 403 and says in str(caught.value)


def test_a_project_in_the_roots_passes() -> None:
    judge_project("/work/app", FENCE)
    judge_project("/work", FENCE)
    judge_project("/anywhere", Fence(keep_out=("/srv/hookcage",)))  # no roots: any, outside the keep-out


@pytest.mark.parametrize(("real", "transcript", "exists", "says"), [
    ("/srv/hookcage/trust.json", True, True, "keeps to itself"),
    ("/srv/hookcage/not-yet", True, False, "keeps to itself"),  # absent or not: path-based
    ("/home/svc/token", True, True, "keeps to itself"),
    ("/work/other/secret", True, True, "outside the request's project or the service's transcript roots"),
    ("/work/other/later", True, False, "outside the request's project"),  # another tenant, even absent
    ("/etc/passwd", True, True, "outside the request's project"),
    ("/etc", False, True, "outside the request's project /work/app"),
    ("/agent/transcripts", False, True, "outside the request's project"),  # a cwd may not go there
])
def test_other_paths_are_403_outside_the_project(real: str, transcript: bool, exists: bool, says: str) -> None:
    with pytest.raises(PathRefused) as caught:
        judge_inside(real, real, "the payload's transcript_path", "/work/app", FENCE,
                     transcript=transcript, exists=exists)
    assert caught.value.status == 403 and says in str(caught.value)


def test_where_a_path_really_leads_is_named() -> None:
    with pytest.raises(PathRefused, match=r"/work/app/t.jsonl \(really /home/svc/token\) lies in"):
        judge_inside("/home/svc/token", "/work/app/t.jsonl", "the payload's transcript_path", "/work/app",
                     FENCE, transcript=True, exists=True)


@pytest.mark.parametrize(("real", "transcript", "exists", "usable"), [
    ("/work/app/.t/s.jsonl", True, True, True),
    ("/work/app", False, True, True),
    ("/agent/transcripts/s.jsonl", True, True, True),
    ("/root/.claude/projects/p/s.jsonl", True, False, False),  # the agent's own: not here, text only
    ("/tmp/agent-cwd", False, False, False),
])
def test_paths_inside_or_unseen_pass(real: str, transcript: bool, exists: bool, usable: bool) -> None:
    assert judge_inside(real, real, "f", "/work/app", FENCE, transcript=transcript, exists=exists) is usable


def test_inside_is_by_component() -> None:
    assert inside("/a/b", "/a") and inside("/a", "/a") and inside("/a/b", "/")
    assert not inside("/ab", "/a") and not inside("/a", "/a/b")


def test_payload_paths_finds_every_spelling_and_skips_null_and_empty() -> None:
    payload = {"cwd": "/w", "transcript_path": None, "transcriptPath": "/t", "agent_transcript_path": "",
               "workingDirectory": "/g", "workspace_roots": ["/c", None, 5], "new_cwd": "/n",
               "tool_input": {"file_path": "/etc/passwd"}}
    assert payload_paths(payload) == [
        ("cwd", "/w", False), ("workingDirectory", "/g", False), ("new_cwd", "/n", False),
        ("transcriptPath", "/t", True), ("workspace_roots[0]", "/c", False), ("workspace_roots[2]", 5, False)]
    assert payload_paths({"workspace_roots": "/x"}) == [("workspace_roots", "/x", False)]


# -- at the edge ----------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    home = tmp_path / "svc" / "home"
    home.mkdir(parents=True)
    (home / "trust.json").write_text("{}")
    project = tmp_path / "work" / "app"
    (project / "sub").mkdir(parents=True)
    (project / "t.jsonl").write_text("{}\n")
    other = tmp_path / "work" / "other"
    other.mkdir()
    (other / "secret").write_text("x")
    return {"home": home, "project": project, "other": other, "work": tmp_path / "work", "tmp": tmp_path}


def test_fence_request_pins_the_real_project_and_the_real_transcripts(world: dict[str, Path]) -> None:
    fence = make_fence([world["home"]], [world["work"]])
    link = world["tmp"] / "link-to-app"
    link.symlink_to(world["project"])
    (world["project"] / "t-link").symlink_to(world["project"] / "t.jsonl")
    fenced = fence_request({"CLAUDE_PROJECT_DIR": str(link)},
                           [{"cwd": str(link / "sub"), "transcript_path": str(world["project"] / "t-link")}],
                           None, fence)
    assert fenced.project == os.path.realpath(world["project"])
    assert fenced.transcripts == {str(world["project"] / "t-link"): os.path.realpath(world["project"] / "t.jsonl")}


def test_the_canonical_payloads_cwd_is_the_project_when_no_variable_is_set(world: dict[str, Path]) -> None:
    # Cursor's canonical cwd is workspace_roots[0]: the executor's root, so the one judged.
    fence = make_fence([world["home"]])
    raw = {"cwd": str(world["project"]), "workspace_roots": [str(world["tmp"] / "svc")]}
    canonical = {"cwd": str(world["tmp"] / "svc")}
    with pytest.raises(PathRefused, match="contains"):
        fence_request({}, [raw, canonical], None, fence)


def test_no_project_or_one_the_service_lacks_is_409(world: dict[str, Path]) -> None:
    fence = make_fence([world["home"]])
    with pytest.raises(NoProject, match="no working directory"):
        fence_request({}, [{}], None, fence)
    with pytest.raises(NoProject, match="does not exist on the hookcage service"):
        fence_request({"CLAUDE_PROJECT_DIR": str(world["tmp"] / "nope")}, [{}], None, fence)


def test_every_project_variable_is_checked_not_only_the_first(world: dict[str, Path]) -> None:
    fence = make_fence([world["home"]])
    with pytest.raises(PathRefused) as caught:
        fence_request({"CLAUDE_PROJECT_DIR": str(world["project"]), "GEMINI_PROJECT_DIR": "/x\x00"}, [{}], None,
                      fence)
    assert caught.value.status == 400 and "GEMINI_PROJECT_DIR" in str(caught.value)


def test_a_symlink_loop_is_refused_in_one_line(world: dict[str, Path]) -> None:
    loop = world["project"] / "loop"
    loop.symlink_to(loop)
    fence = make_fence([world["home"]])
    fenced = fence_request({}, [{"cwd": str(world["project"]), "transcript_path": str(loop)}], None, fence)
    assert fenced.transcripts == {}  # realpath leaves a loop where it is: in the project, not a regular file
