"""Issue 21, class 4: no value in a hook file crashes hookcage.

Every dialect's parser (and hookcage's own :func:`parse_hook_file`) takes any
JSON-like value, whole or put anywhere into a valid file of that agent, and
answers a :class:`HookFile`: a wrong value is a problem naming the file and the
JSON path, and only its entry is dropped. Property tests over every parser, then
the values the issue names, then the whole path from bytes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor.core.hookparse import parse_hook_file
from executor.core.hooks import HookFile, Scope
from executor.dialects import DIALECTS
from executor.hookdecode import decode

SAMPLES: dict[str, Any] = {
    "": {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "sh .hookcage/guard.sh", "timeout": 5, "on_error": "deny",
         "sandbox": {"network": "none", "mounts": ["x"], "memory": "512m", "cpus": 1, "pids": 10,
                     "env": {"A": "b"}, "home": "tmp"},
         "env": {"B": "c"}, "capabilities": ["approve"], "async": False, "once": False, "name": "n"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "echo stop"}]}]},
        "disableAllHooks": False, "allowManagedHooksOnly": False},
    "claude": {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "sh .claude/guard.sh", "timeout": 5, "statusMessage": "s"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "echo stop"}]}]}, "disableAllHooks": False},
    "codebuddy": {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "echo hi", "timeout": 5}]}]}},
    "jcode": {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "echo hi", "timeout": 5}]}]}},
    "codex": {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "echo hi", "timeout": 5, "statusMessage": "s"}]}]},
        "features": {"hooks": True}},
    "gemini": {"hooks": {"BeforeTool": [{"matcher": "run_shell_command", "sequential": False, "hooks": [
        {"type": "command", "command": "echo hi", "timeout": 5000, "name": "n", "description": "d",
         "env": {"A": "b"}}]}]},
        "hooksConfig": {"enabled": True, "disabled": ["x"]}},
    "cursor": {"version": 1, "hooks": {
        "preToolUse": [{"command": "echo hi", "matcher": "Shell", "timeout": 5, "failClosed": True}],
        "stop": [{"command": "echo b", "loop_limit": 3}]}},
    "copilot": {"version": 1, "hooks": {
        "preToolUse": [{"type": "command", "bash": "echo hi", "timeoutSec": 5, "env": {"A": "b"},
                        "cwd": ".", "comment": "c"}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo x"}]}]}},
    "grok": {"hooks": [
        {"name": "n", "type": "pre-bash", "command": "echo ${file} ${command}", "enabled": True, "timeout": 1000,
         "failOnError": True, "filePatterns": ["*.ts", "a.js"], "commandPatterns": ["git"]},
        {"name": "lint-on-edit", "enabled": True}, {"type": "pre-edit", "script": "x.js", "enabled": True}]},
    "infer": {"enabled": True, "hooks": [{"name": "a", "hook": "pre_tool", "command": "echo hi", "timeout": 5},
                                         {"name": "b", "hook": "pre_session", "command": "echo s"}]},
    "ok": {"hooks": {"PreToolUse": [{"match": "*", "command": "echo hi", "description": "d", "timeout": 6000}],
                     "Stop": [{"command": "echo s"}]}},
}
PARSERS = ["", *DIALECTS]
"""hookcage's own files ("") and every agent's."""

def _keys_of(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _keys_of(value)
    elif isinstance(node, list):
        for value in node:
            yield from _keys_of(value)


KNOWN_KEYS = sorted({k for sample in SAMPLES.values() for k in _keys_of(sample)}
                    | {"sandbox", "backend", "host", "docker", "workspace", "image", "hook", "script", "match",
                       "PreToolUse", "BeforeTool", "preToolUse", "pre-bash", "pre_tool", "version", "enabled"})
NASTY = [None, True, False, 0, -1, 1, 10**400, -(10**400), 2**63, 1e308, float("nan"), float("inf"),
         float("-inf"), "", " ", "-x", "host", "docker", "*", "(", "[", "\n", "\x00", "\u202e", "hookcage dispatch",
         "command", "pre-bash", "PreToolUse", [], {}, [[]], [{}], {"": {}}, {"hooks": []},
         {"type": "command"}, ["*"], [1], {"A": 1}, "x" * 5000]
keys = st.sampled_from(KNOWN_KEYS) | st.text(max_size=6)
leaves = (st.sampled_from(NASTY).map(copy.deepcopy) | st.none() | st.booleans() | st.integers()
          | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=20)
FAST = settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def parse(name: str, data: Any, scope: Scope = Scope.PROJECT) -> HookFile:
    source = f"/repo/{name or 'hookcage'}.json"
    if not name:
        return parse_hook_file(data, scope=scope, source=source, project_root="/repo")
    return DIALECTS[name].parse(data, scope=scope, source=source, project_root="/repo", environ={})


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _put(tree: Any, path: tuple[Any, ...], value: Any, *, new_key: str | None = None) -> Any:
    if not path:
        return value
    parent = tree
    for step in path[:-1]:
        parent = parent[step]
    if new_key is not None and isinstance(parent, dict):
        parent[new_key] = value
    else:
        parent[path[-1]] = value
    return tree


def _checked(name: str, data: Any) -> None:
    for scope in Scope:
        parsed = parse(name, data, scope)
        assert isinstance(parsed, HookFile)
        for problem in parsed.problems:  # each names the file and a JSON path
            assert problem.source == f"/repo/{name or 'hookcage'}.json" and problem.path.startswith("$")


@pytest.mark.parametrize("name", PARSERS)
def test_the_samples_are_valid_files_of_their_agent(name: str) -> None:
    parsed = parse(name, SAMPLES[name])
    assert parsed.hooks and not [p for p in parsed.problems if p.path == "$"]


@pytest.mark.parametrize("name", PARSERS)
@FAST
@given(data=values)
def test_any_value_as_a_whole_file(name: str, data: Any) -> None:
    _checked(name, data)


@pytest.mark.parametrize("name", PARSERS)
@FAST
@given(st.data())
def test_any_value_anywhere_in_a_valid_file(name: str, data: st.DataObject) -> None:
    tree = copy.deepcopy(SAMPLES[name])
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        path = data.draw(st.sampled_from(list(_paths(tree))), label="where")
        new_key = data.draw(st.none() | keys, label="new key") if data.draw(st.booleans()) else None
        tree = _put(tree, path, data.draw(values, label="value"), new_key=new_key)
    _checked(name, tree)


def _deepest() -> int:
    """How deep a JSON list nests before decode refuses it: the deepest value a parser is handed."""
    low, high = 1, 100_000
    while low < high:
        mid = (low + high + 1) // 2
        try:
            decode(b"[" * mid + b"]" * mid, "json")
            low = mid
        except ValueError:
            high = mid - 1
    return low


@pytest.mark.parametrize("name", PARSERS)
def test_every_subtree_replaced_by_the_deepest_value_decode_lets_through(name: str) -> None:
    depth = _deepest()
    assert 100 < depth < 100_000
    for deep in (decode(b"[" * depth + b"]" * depth, "json"),
                 decode(b'{"a":' * (depth - 1) + b"1" + b"}" * (depth - 1), "json")):
        for path in list(_paths(SAMPLES[name])):
            _checked(name, _put(copy.deepcopy(SAMPLES[name]), path, deep))


@pytest.mark.parametrize("name", PARSERS)
@pytest.mark.parametrize("odd", NASTY, ids=repr)
def test_each_odd_value_at_each_place(name: str, odd: Any) -> None:
    for path in list(_paths(SAMPLES[name])):
        _checked(name, _put(copy.deepcopy(SAMPLES[name]), path, copy.deepcopy(odd)))


# -- the values the issue names ---------------------------------------------------------------


@pytest.mark.parametrize("odd", [[], {}, ["pre-bash"], {"pre-bash": 1}, 7, None, True], ids=repr)
def test_a_grok_entry_of_an_odd_type_is_one_problem_and_the_rest_still_runs(odd: Any) -> None:
    data = {"hooks": [{"type": odd, "command": "curl x | sh", "enabled": True},
                      {"type": "pre-bash", "command": "echo mine", "enabled": True}]}
    parsed = parse("grok", data)
    assert [h.command for h in parsed.hooks] == ["echo mine"]
    assert [(p.path, p.severity) for p in parsed.errors] == [("$.hooks[0].type", "error")]


@pytest.mark.parametrize("name", PARSERS)
@pytest.mark.parametrize("big", [10**400, 2**1024, float("inf"), float("nan")], ids=lambda v: str(v)[:12])
def test_a_timeout_past_any_float_is_a_problem(name: str, big: Any) -> None:
    tree = copy.deepcopy(SAMPLES[name])
    for path in _paths(tree):
        if path and path[-1] in ("timeout", "timeoutSec"):
            _put(tree, path, big)
    parsed = parse(name, tree)
    assert any(p.path.endswith(("timeout", "timeoutSec")) for p in parsed.errors)


# -- from bytes: decode, then parse -----------------------------------------------------------


json_text = st.recursive(
    st.sampled_from(["null", "true", "1", "-0", "1e999", "123456789012345678901234567890", '""', '"x"', "[]", "{}"]),
    lambda inner: st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]")
    | st.dictionaries(st.sampled_from(KNOWN_KEYS), inner, max_size=3).map(
        lambda d: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in d.items()) + "}"),
    max_leaves=15)


@pytest.mark.parametrize("name", PARSERS)
@FAST
@given(text=json_text, bom=st.booleans())
def test_any_json_text_reads_as_a_hook_file_or_one_decode_error(name: str, text: str, bom: bool) -> None:
    raw = ("\ufeff" if bom else "").encode() + text.encode()
    try:
        data = decode(raw, "json", comments=name == "gemini")
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    _checked(name, data)


yaml_text = st.text(alphabet="ab:-[]{}&*!<>|#'\"\n ,?%@`\x00\ufeff\t1.~", max_size=60)


@pytest.mark.parametrize("form", ["json", "yaml", "toml"])
@FAST
@given(raw=st.binary(max_size=200) | yaml_text.map(str.encode), comments=st.booleans())
def test_any_bytes_in_any_format_decode_or_are_one_line(form: Any, raw: bytes, comments: bool) -> None:
    try:
        data = decode(raw, form, comments=comments)
    except ValueError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    json.dumps(data)  # JSON's kinds only, whatever the format
    for name in PARSERS:
        _checked(name, data)
