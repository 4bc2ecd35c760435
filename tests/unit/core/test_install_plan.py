"""The pure pieces of ``hookcage install``: route entries, merging them into an agent's settings, taking them out."""

from __future__ import annotations

import json

import pytest

from executor.core.install import (
    NEVER_ROUTED,
    NotInstallable,
    dispatch_command,
    json_bytes,
    merge_routes,
    read_json,
    routes,
    unroute,
)

CMD = dispatch_command("/home/u/.local/bin/hookcage", "claude")


def test_routes_skip_the_routing_traps_and_give_matcher_events_a_star() -> None:
    r = routes(["PreToolUse", "Stop", *NEVER_ROUTED], CMD, matcher_events=["PreToolUse"])
    assert r == {"hooks": {
        "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": CMD}]}],
        "Stop": [{"hooks": [{"type": "command", "command": CMD}]}],
    }}


def test_the_command_is_quoted_when_the_path_needs_it() -> None:
    assert dispatch_command("/opt/my tools/hookcage", "codex") == "'/opt/my tools/hookcage' dispatch --agent codex"


def test_merge_keeps_everything_else_and_is_idempotent() -> None:
    mine = {"model": "opus", "permissions": {"allow": ["Bash(ls)"]},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}
    new = routes(["Stop", "PreToolUse"], CMD, matcher_events=["PreToolUse"])
    once = merge_routes(mine, new)
    assert once["model"] == "opus" and once["permissions"] == mine["permissions"]
    assert once["hooks"]["Stop"][0] == mine["hooks"]["Stop"][0] and len(once["hooks"]["Stop"]) == 2
    assert merge_routes(once, new) == once
    assert unroute(once, CMD) == mine


def test_unroute_drops_what_it_leaves_empty() -> None:
    assert unroute(merge_routes({}, routes(["Stop"], CMD)), CMD) == {}


def test_files_are_written_with_two_spaces_and_a_newline() -> None:
    assert json_bytes({"a": [1]}) == b'{\n  "a": [\n    1\n  ]\n}\n'


@pytest.mark.parametrize("raw", [b"{", b"[1]", b'"x"'])
def test_a_file_install_cannot_merge_is_refused(raw: bytes) -> None:
    with pytest.raises(NotInstallable, match="install never overwrites a file it cannot merge"):
        read_json(lambda path: raw, "/home/u/.claude/settings.json")


def test_an_absent_or_empty_file_reads_as_empty() -> None:
    assert read_json(lambda path: None, "/x") == {} and read_json(lambda path: b"  \n", "/x") == {}
    assert json.loads(json_bytes(read_json(lambda path: b'{"k": 1}', "/x"))) == {"k": 1}
