"""A warm spare serves every session of a project: the transcript's folder is the spare's own.

A transcript is per session (Claude Code's ``~/.claude/projects/SLUG/SESSION.jsonl``).
Bound as a file, it made each session a creation key of its own: every session's first
hook ran cold (1.1-1.5 s under gVisor, measured in a real Claude Code session) and the
spares of sessions that had ended held the pool. A spare now binds a folder of its own
over the transcript's folder, and the session's transcript is linked into it at job time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from executor.core.options import SandboxOptions
from executor.sandbox.base import Bind, RunRequest
from executor.sandbox.docker import DockerProfile, container_args
from executor.sandbox.poolkeys import pool_key, transcript_folder_target
from executor.sandbox.poolspare import SpareHandle, link_transcript


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    """Claude Code's transcripts folder for one project, with two sessions in it."""
    folder = tmp_path / "home" / ".claude" / "projects" / "-work-project"
    folder.mkdir(parents=True)
    (folder / "s1.jsonl").write_text('{"session": 1}\n')
    (folder / "s2.jsonl").write_text('{"session": 2}\n')
    return folder


def key_of(request: RunRequest, own: str = "/pool/c-1/transcript") -> str:
    folder = transcript_folder_target(request)
    if folder is not None:
        request = RunRequest(**{**request.__dict__, "transcript_folder": own})
    create, host = container_args(DockerProfile(user="1000:1000"), request, name="n", now=0.0)
    return pool_key(create, host, [], frozenset(), folder)


def test_two_sessions_of_a_project_share_a_key(project: Path, sessions: Path) -> None:
    one = RunRequest(command="c", project_dir=str(project), transcript_path=str(sessions / "s1.jsonl"))
    two = RunRequest(command="c", project_dir=str(project), transcript_path=str(sessions / "s2.jsonl"))
    assert key_of(one) == key_of(two)
    # Each spare's own folder is not part of the key either.
    assert key_of(one, "/pool/c-1/transcript") == key_of(one, "/pool/c-2/transcript")
    # Another project's transcripts folder is another key; so is no transcript.
    other = sessions.parent / "-work-other"
    other.mkdir()
    (other / "s3.jsonl").write_text("{}\n")
    three = RunRequest(command="c", project_dir=str(project), transcript_path=str(other / "s3.jsonl"))
    none = RunRequest(command="c", project_dir=str(project))
    assert len({key_of(one), key_of(three), key_of(none)}) == 3


def test_the_spare_binds_its_own_folder_read_only_over_the_transcripts(project: Path, sessions: Path) -> None:
    request = RunRequest(command="c", project_dir=str(project), transcript_path=str(sessions / "s1.jsonl"),
                         transcript_folder="/pool/c-1/transcript")
    _, host = container_args(DockerProfile(user="1000:1000"), request, name="n", now=0.0)
    by_target = {m["Target"]: m for m in host["mounts"]}
    assert by_target[str(sessions)]["Source"] == "/pool/c-1/transcript"
    assert by_target[str(sessions)]["ReadOnly"] is True
    assert str(sessions / "s1.jsonl") not in by_target  # the file itself is not bound


@pytest.mark.parametrize(
    "case",
    ["no hidden folder above", "the folder itself is the hidden one", "inside the project",
     "holds the project", "a staged file inside", "an extra mount inside", "a bind inside",
     "judged by the service", "relative", "none"],
)
def test_where_the_folder_is_not_the_spares_own(tmp_path: Path, case: str) -> None:
    project = tmp_path / "work" / ".hidden" / "project"
    project.mkdir(parents=True)
    (project / "sub").mkdir()
    plain = tmp_path / "transcripts"
    plain.mkdir()
    kwargs: dict[str, object] = {}
    transcript = str(tmp_path / "home" / ".claude" / "projects" / "p" / "t.jsonl")
    if case == "no hidden folder above":
        transcript = str(plain / "t.jsonl")
    elif case == "the folder itself is the hidden one":
        transcript = str(tmp_path / "home" / ".claude" / "t.jsonl")
    elif case == "inside the project":
        transcript = str(project / "sub" / "t.jsonl")
    elif case == "holds the project":
        transcript = str(project.parent / "t.jsonl")
    elif case == "a staged file inside":
        kwargs["overlays"] = {transcript.replace("t.jsonl", "x.sh"): str(plain / "x")}
        project = Path(transcript).parent
    elif case == "an extra mount inside":
        kwargs["options"] = SandboxOptions(mounts=(os.path.dirname(transcript),))
    elif case == "a bind inside":
        kwargs["binds"] = (Bind(source=str(plain), target=os.path.dirname(transcript) + "/b", read_only=True),)
    elif case == "judged by the service":
        kwargs["transcript_source"] = transcript
    elif case == "relative":
        transcript = "home/.claude/projects/p/t.jsonl"
    elif case == "none":
        transcript = ""
    request = RunRequest(command="c", project_dir=str(project), transcript_path=transcript or None,
                         **kwargs)  # type: ignore[arg-type]
    assert transcript_folder_target(request) is None


def test_where_it_is(tmp_path: Path, project: Path) -> None:
    for path in ("home/.claude/projects/-w-p/s.jsonl", "home/.codex/sessions/2026/11/28/rollout-1.jsonl",
                 "home/.gemini/tmp/abc/chats/session-1.json"):
        transcript = tmp_path / path
        request = RunRequest(command="c", project_dir=str(project), transcript_path=str(transcript))
        assert transcript_folder_target(request) == str(transcript.parent)


def test_the_sessions_transcript_is_linked_into_the_spares_folder(tmp_path: Path, sessions: Path) -> None:
    own = tmp_path / "spare" / "transcript"
    own.mkdir(parents=True)
    handle = SpareHandle(transcript=str(own))
    link_transcript(handle, str(sessions / "s2.jsonl"))
    assert sorted(os.listdir(own)) == ["s2.jsonl"]  # its own session only: not s1
    assert os.path.samefile(own / "s2.jsonl", sessions / "s2.jsonl")  # a link: no copy, however long
    with open(sessions / "s2.jsonl", "a") as agent:
        agent.write('{"more": true}\n')  # the agent keeps writing: the hook reads what it wrote
    assert (own / "s2.jsonl").read_text() == '{"session": 2}\n{"more": true}\n'


def test_a_missing_or_symlinked_transcript_is_not_linked(tmp_path: Path, sessions: Path) -> None:
    own = tmp_path / "spare" / "transcript"
    own.mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_text("key\n")
    (sessions / "evil.jsonl").symlink_to(secret)
    handle = SpareHandle(transcript=str(own))
    link_transcript(handle, str(sessions / "evil.jsonl"))
    link_transcript(handle, str(sessions / "missing.jsonl"))
    link_transcript(handle, None)
    assert os.listdir(own) == []  # as the cold path binds nothing for these


def test_a_spare_without_its_own_folder_links_nothing(sessions: Path) -> None:
    link_transcript(SpareHandle(), str(sessions / "s1.jsonl"))  # a spare whose key holds the transcript


def test_a_transcript_that_cannot_be_linked_sends_the_run_cold(tmp_path: Path, sessions: Path) -> None:
    own = tmp_path / "spare" / "transcript"
    own.mkdir(parents=True)
    (own / "s1.jsonl").write_text("in the way\n")  # any link failure: EXDEV, EPERM, EEXIST alike
    with pytest.raises(OSError):
        link_transcript(SpareHandle(transcript=str(own)), str(sessions / "s1.jsonl"))
