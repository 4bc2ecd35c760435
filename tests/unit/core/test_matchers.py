"""Matchers: which hooks a payload selects."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor.core.events import get_event
from executor.core.hookparse import parse_hook_file
from executor.core.hooks import Scope
from executor.core.matchers import compile_matcher, event_matches
from executor.dialects import DIALECTS, tool_aliases


def fires(matcher: str | None, tool_name: str, event: str = "PreToolUse") -> bool:
    """Does ``matcher`` select a tool event for ``tool_name``?"""
    payload = {"tool_name": tool_name, "tool_input": {}}
    return event_matches(get_event(event), compile_matcher(matcher), payload, tool_aliases)


@pytest.mark.parametrize("matcher", [None, "", "*", " ", " * "])
@pytest.mark.parametrize("tool", ["Bash", "mcp__github__create_issue", "x"])
def test_match_all_matchers(matcher: str | None, tool: str) -> None:
    assert compile_matcher(matcher).matches_all
    assert fires(matcher, tool)


@pytest.mark.parametrize(
    ("matcher", "tool", "expected"),
    [
        # exact names
        ("Bash", "Bash", True),
        ("Write", "Write", True),
        ("Write", "write_file", True),  # an alias of Write (Gemini CLI's), not a prefix match
        ("Edit", "MultiEdit", False),
        ("Bash", "BashOutput", False),
        ("Notebook", "NotebookEdit", False),  # plain names are exact, never substrings
        ("Notebook", "Notebook", True),
        # lists, with | and , and spaces around
        ("Edit|Write", "Write", True),
        ("Edit|Write", "Read", False),
        ("Edit, Write", "Write", True),
        ("Edit , Write", "Edit", True),
        ("Edit | Write|Read", "Read", True),
        ("Edit,Write", "Bash", False),
        ("Bash|", "Bash", True),
        ("mcp__my-server__do_it", "mcp__my-server__do_it", True),
        # anything else: an unanchored regular expression
        ("Edit.*", "Edit", True),
        ("Edit.*", "MultiEdit", True),  # unanchored: found inside "MultiEdit"
        ("^Edit.*", "MultiEdit", False),
        ("Notebook.*", "NotebookEdit", True),
        ("^mcp__github__", "mcp__github__create_issue", True),
        ("^mcp__github__", "mcp__gitlab__create_issue", False),
        ("mcp__.*__delete", "mcp__db__delete_row", True),
        ("^(Edit|Write)$", "Edit", True),
        ("^(Edit|Write)$", "Edits", False),
        # case-sensitive
        ("bash", "Bash", False),
        ("BASH", "Bash", False),
        ("^bash$", "Bash", False),
        ("(?i)^bash$", "Bash", True),
    ],
)
def test_tool_matchers(matcher: str, tool: str, expected: bool) -> None:
    assert fires(matcher, tool) is expected


@pytest.mark.parametrize("matcher", ["Bash(", "[unclosed", "*Bash", "Bash|*", "(?P<x"])
def test_invalid_regex_never_fires_and_reports_an_error(matcher: str) -> None:
    compiled = compile_matcher(matcher)
    assert compiled.error is not None
    assert repr(matcher) in compiled.error
    assert not compiled.matches_all
    for tool in ("Bash", matcher, "anything"):
        assert not fires(matcher, tool)


# -- aliases across agents ----------------------------------------------------------


@pytest.mark.parametrize(
    "alias", ["run_shell_command", "execute_command", "shell", "exec_command", "run_terminal_cmd"]
)
def test_bash_guard_fires_for_every_agents_shell_tool(alias: str) -> None:
    assert fires("Bash", alias)
    assert fires("^Bash$", alias)
    assert fires("Edit|Bash", alias)


@pytest.mark.parametrize("matcher", ["run_shell_command", "execute_command"])
def test_alias_matchers_fire_for_the_canonical_name(matcher: str) -> None:
    assert fires(matcher, "Bash")


def test_aliases_of_one_tool_match_each_other() -> None:
    assert fires("run_shell_command", "execute_command")
    assert fires("write_file", "Write")
    assert fires("Edit", "replace")
    assert fires("Task", "Agent")


def test_aliases_do_not_leak_across_tools() -> None:
    assert not fires("Bash", "write_file")
    assert not fires("Write", "run_shell_command")
    assert not fires("^Read$", "Write")


def test_tool_aliases_list_the_name_and_its_aliases() -> None:
    assert tool_aliases("Bash")[0] == "Bash"
    assert "run_shell_command" in tool_aliases("execute_command")
    assert tool_aliases("mcp__x__y") == ("mcp__x__y",)


def test_the_aliases_come_from_the_agents_own_dialects() -> None:
    # Each agent's tool names are its dialect's (adding an agent is one file): the table is
    # their union, canonical (Claude Code's) name first; core matching knows none of them.
    for dialect in DIALECTS.values():
        for native, canonical in dialect.tool_names.items():
            assert tool_aliases(native)[0] == canonical and native in tool_aliases(canonical), dialect.name
    assert not event_matches(get_event("PreToolUse"), compile_matcher("Bash"),
                             {"tool_name": "run_shell_command", "tool_input": {}})  # nothing handed in


def test_aliases_are_case_sensitive_too() -> None:
    assert not fires("Bash", "RUN_SHELL_COMMAND")


# -- events matched on other fields ---------------------------------------------------


@pytest.mark.parametrize(
    ("event", "field", "matcher", "value", "expected"),
    [
        ("SessionStart", "source", "startup", "startup", True),
        ("SessionStart", "source", "startup|resume", "resume", True),
        ("SessionStart", "source", "startup", "clear", False),
        ("SessionEnd", "reason", "logout", "logout", True),
        ("SessionEnd", "reason", "logout", "clear", False),
        ("PreCompact", "trigger", "manual", "manual", True),
        ("PreCompact", "trigger", "manual", "auto", False),
        ("PostCompact", "trigger", "auto", "auto", True),
        ("Notification", "notification_type", "permission_prompt", "permission_prompt", True),
        ("Notification", "notification_type", "idle_.*", "idle_prompt", True),
        ("Notification", "notification_type", "permission_prompt", "idle_prompt", False),
        ("SubagentStart", "agent_type", "Explore", "Explore", True),
        ("SubagentStart", "agent_type", "Explore", "Plan", False),
        ("SubagentStop", "agent_type", "Plan", "Plan", True),
    ],
)
def test_non_tool_events_match_their_own_field(
    event: str, field: str, matcher: str, value: str, expected: bool
) -> None:
    assert event_matches(get_event(event), compile_matcher(matcher), {field: value}) is expected


@pytest.mark.parametrize(
    ("event", "field"),
    [("SessionStart", "source"), ("Notification", "notification_type"), ("SubagentStart", "agent_type")],
)
def test_non_tool_fields_get_no_alias_expansion(event: str, field: str) -> None:
    # "shell" is an alias of "Bash" for tool names only.
    assert not event_matches(get_event(event), compile_matcher("Bash"), {field: "shell"})
    assert not event_matches(get_event(event), compile_matcher("^Bash$"), {field: "run_shell_command"})


def test_a_tool_name_in_a_non_tool_payload_is_not_what_is_matched() -> None:
    payload = {"source": "startup", "tool_name": "Bash"}
    assert not event_matches(get_event("SessionStart"), compile_matcher("Bash"), payload)


@pytest.mark.parametrize("event", ["UserPromptSubmit", "Stop", "TaskCompleted"])
@pytest.mark.parametrize("matcher", ["Bash", "nothing-like-this", "Bash(", None])
def test_events_without_a_matcher_field_ignore_the_matcher(event: str, matcher: str | None) -> None:
    assert event_matches(get_event(event), compile_matcher(matcher), {"prompt": "hi"})


@pytest.mark.parametrize("value", [None, 3, ["Bash"], {"name": "Bash"}])
def test_an_absent_or_non_string_field_matches_only_match_all(value: Any) -> None:
    payload: dict[str, Any] = {} if value is None else {"tool_name": value}
    spec = get_event("PreToolUse")
    assert event_matches(spec, compile_matcher("*"), payload)
    assert event_matches(spec, compile_matcher(None), payload)
    assert not event_matches(spec, compile_matcher("Bash"), payload)
    assert not event_matches(spec, compile_matcher(".*"), payload)


def test_absent_session_start_source_matches_only_match_all() -> None:
    spec = get_event("SessionStart")
    assert event_matches(spec, compile_matcher(""), {})
    assert not event_matches(spec, compile_matcher("startup"), {})


# -- no matcher can stall a dispatch (issue 11, "No input stalls a gate") ---------------------



BOUND = 2.0
"""Seconds that prove "not catastrophic" on a noisy 2-core machine (a backtracking engine takes hours)."""

# Patterns that take exponential or polynomial time in a backtracking engine.
CATASTROPHIC = [
    r"(?:\w|\w|\w|\w|\w|\w)*!",  # the one that hung dispatch
    r"(a+)+$", r"(a|a)*$", r"(a|aa)+$", r"(.*a){20}", r"(\w+\s?)*$", r"^(a+)+b",
    r"(x+x+)+y", r"([a-zA-Z]+)*!", r"(.*)*!", r"^(\d+)*$", r"(?:a*)*b", r"(a*)*(b*)*c",
    r".*.*.*.*.*.*.*.*=", r"(?i)(?:[a-z]|[a-z]|[a-z])*!",
]
HOSTILE_NAMES = ["a" * 100_000, "a" * 50_000 + "!", "x" * 100_000 + "z", "1" * 100_000 + "x",
                 "ab " * 30_000, "\u00e9" * 50_000, "a" * 10_000 + "\ud800"]


def test_the_catastrophic_matcher_of_the_issue_answers_at_once() -> None:
    matcher = compile_matcher(r"(?:\w|\w|\w|\w|\w|\w)*!")
    assert matcher.error is None
    payload = {"tool_name": "a" * 100_000, "tool_input": {}}
    started = time.monotonic()
    assert not event_matches(get_event("PreToolUse"), matcher, payload)
    assert event_matches(get_event("PreToolUse"), matcher, {"tool_name": "ab!", "tool_input": {}})
    assert time.monotonic() - started < BOUND


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_patterns_that_backtrack_forever_elsewhere_are_linear_here(pattern: str) -> None:
    matcher = compile_matcher(pattern)
    started = time.monotonic()
    for name in HOSTILE_NAMES:
        matcher.matches(name, tool=True)
    assert time.monotonic() - started < BOUND


@pytest.mark.parametrize("pattern", [
    r"(a)\1", r"(?P<x>a)(?P=x)", r"(?=Bash)B", r"(?!Bash).*", r"(?<=mcp__)x", r"(?<!a)b",
    r"a{1001}", r"((a{100}){100}){100}", r"(?:(?:(?:(?:(?:a{50}){50}){50}){50}){50})", "Bash(",
])
def test_what_needs_backtracking_or_too_much_memory_is_an_invalid_matcher(pattern: str) -> None:
    matcher = compile_matcher(pattern)
    assert matcher.error is not None and "invalid regular expression" in matcher.error
    assert not matcher.matches("Bash", tool=True) and not matcher.matches("a" * 2000)


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=Bash)Bash", r"(?:\w|\w)*!("])
def test_an_invalid_matcher_is_reported_at_load_with_file_and_json_path(pattern: str) -> None:
    data = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "ls"}]},
                                     {"matcher": pattern, "hooks": [{"type": "command", "command": "ls"}]}]}}
    loaded = parse_hook_file(data, scope=Scope.USER, source="/home/u/hooks.json")
    problems = [p for p in loaded.problems if "invalid regular expression" in p.message]
    assert len(problems) == 1
    assert problems[0].source == "/home/u/hooks.json" and problems[0].path == "$.hooks.PreToolUse[1].matcher"
    never = [h for h in loaded.hooks if h.matcher.source == pattern]
    assert all(not h.matcher.matches("Bash", tool=True) for h in never)


def test_rejecting_an_invalid_matcher_prints_nothing_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    # RE2 logs parse errors to stderr by default; on the dispatch path stderr is a block reason.
    compile_matcher(r"(a)\1")
    compile_matcher(r"(?=x)")
    assert capfd.readouterr().err == ""


def test_lone_surrogates_in_a_name_or_pattern_are_no_error() -> None:
    assert compile_matcher("^mcp__.*").matches("mcp__\ud800x", tool=True)
    assert compile_matcher("x\ud800").error is None or not compile_matcher("x\ud800").matches("x")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    atoms=st.lists(st.sampled_from([r"\w", "a", ".", "(?:a|a)", "a*", "(a+)", r"\d", "[ab]", r"\s?", "x+"]),
                   min_size=1, max_size=8),
    star=st.sampled_from(["*", "+", "{0,30}", "?", ""]),
    tail=st.sampled_from(["!", "$", "b", "", "(?:a|aa)*$"]),
    name=st.text(alphabet="aab1 !\u00e9", min_size=0, max_size=60).map(lambda s: s * 500),
)
def test_any_matcher_answers_within_the_bound_on_a_long_name(atoms: list[str], star: str, tail: str, name: str) -> None:
    pattern = "(?:" + "|".join(atoms) + ")" + star + tail
    matcher = compile_matcher(pattern)
    started = time.monotonic()
    matcher.matches(name, tool=True)
    assert time.monotonic() - started < BOUND


# -- the events added with Claude Code's whole catalog ---------------------------------------


@pytest.mark.parametrize(
    ("event", "field", "matcher", "value", "expected"),
    [
        ("Setup", "trigger", "init", "init", True),
        ("Setup", "trigger", "init", "maintenance", False),
        ("InstructionsLoaded", "load_reason", "session_start|compact", "compact", True),
        ("InstructionsLoaded", "load_reason", "include", "nested_traversal", False),
        ("UserPromptExpansion", "command_name", "review", "review", True),
        ("UserPromptExpansion", "command_name", "review", "code-review", False),
        ("UserPromptExpansion", "command_name", "my-plugin:.*", "my-plugin:lint", True),
        ("ConfigChange", "source", "project_settings, local_settings", "local_settings", True),
        ("ConfigChange", "source", "policy_settings", "user_settings", False),
        ("DirectoryAdded", "source", "slash_command", "slash_command", True),
        ("DirectoryAdded", "source", "slash_command", "register_repo_root", False),
        ("Elicitation", "mcp_server_name", "my-mcp-server", "my-mcp-server", True),
        ("Elicitation", "mcp_server_name", "my-mcp-server", "other", False),
        ("ElicitationResult", "mcp_server_name", "^github", "github-enterprise", True),
        ("PermissionDenied", "tool_name", "Bash", "Bash", True),
        ("PermissionDenied", "tool_name", "Bash", "Edit", False),
    ],
)
def test_new_events_match_their_own_field(event: str, field: str, matcher: str, value: str, expected: bool) -> None:
    assert event_matches(get_event(event), compile_matcher(matcher), {field: value}) is expected


def test_permission_denied_matches_tool_aliases_as_the_other_tool_events() -> None:
    assert fires("Bash", "run_shell_command", event="PermissionDenied")


@pytest.mark.parametrize("event", ["UserPromptExpansion", "Elicitation", "StopFailure", "FileChanged", "Setup"])
def test_new_events_with_a_matcher_field_need_it_unless_matching_all(event: str) -> None:
    spec = get_event(event)
    assert event_matches(spec, compile_matcher("*"), {})
    assert not event_matches(spec, compile_matcher("x"), {})


@pytest.mark.parametrize("event", ["PostToolBatch", "TaskCreated", "TeammateIdle", "CwdChanged", "WorktreeCreate",
                                   "WorktreeRemove", "MessageDisplay"])
@pytest.mark.parametrize("matcher", ["Bash", "nothing-like-this", "Bash(", None])
def test_new_events_without_matcher_support_ignore_the_matcher(event: str, matcher: str | None) -> None:
    assert event_matches(get_event(event), compile_matcher(matcher), {"delta": "x"})


# StopFailure: "a narrower exact-match set of letters, digits, _, and | only. A hyphen, space, or
# comma [...] keeps it on the regular-expression path, and only | separates alternatives."
@pytest.mark.parametrize(
    ("matcher", "error", "expected"),
    [
        ("rate_limit", "rate_limit", True),
        ("rate_limit", "rate_limit_x", False),  # exact, not a prefix
        ("rate_limit|overloaded", "overloaded", True),
        ("rate_limit|overloaded", "server_error", False),
        ("rate_limit, overloaded", "overloaded", False),  # a regular expression, not a list
        ("rate_limit,overloaded", "rate_limit", False),
        ("rate", "rate_limit", False),
        ("rate.*", "rate_limit", True),
        ("^(server_error|unknown)$", "unknown", True),
        ("*", "anything", True),
    ],
)
def test_stop_failure_matches_its_error_type_by_the_narrow_rule(matcher: str, error: str, expected: bool) -> None:
    assert event_matches(get_event("StopFailure"), compile_matcher(matcher), {"error": error}) is expected


def test_the_narrow_rule_only_applies_where_the_reference_says() -> None:
    # Elsewhere "a, b" is still a list.
    assert event_matches(get_event("Notification"), compile_matcher("idle_prompt, auth_success"),
                         {"notification_type": "auth_success"})


# FileChanged: "the value is split on | and each segment is registered as a literal filename [...]
# the same value filters which hook groups run using the standard matcher rules against the
# changed file's basename."
@pytest.mark.parametrize(
    ("matcher", "path", "expected"),
    [
        (".envrc|.env", "/work/p/.envrc", True),
        (".envrc|.env", "/work/p/.env", True),
        (".envrc|.env", "/work/p/sub/.env", True),  # the basename counts, wherever the file is
        (".envrc|.env", "/work/p/README.md", False),
        (".envrc|.env", "/work/p/.env.local", True),  # ".env" is also an unanchored expression
        ("package.json", "/work/p/package.json", True),
        ("package.json", "/work/p/package.json.orig", True),
        ("^package\\.json$", "/work/p/package.json.orig", False),
        ("Makefile", "/work/p/Makefile", True),
        ("Makefile", "/work/p/GNUmakefile", False),
        ("Makefile|go_mod", "/work/p/go_mod", True),
        ("my-file.txt", "/work/p/my-file.txt", True),  # a literal name, whatever the rule says
        ("a,b", "/work/p/a", False),  # only | separates
        ("a,b", "/work/p/a,b", True),
        ("work", "/work/p/x", False),  # never the directories
        ("C:\\\\x", "C:\\x", False),
        (".env", "C:\\Users\\u\\p\\.env", True),  # Windows paths too
        (".env", "/work/p/.env/", True),
        ("*", "/work/p/anything", True),
        (None, "/work/p/anything", True),
    ],
)
def test_file_changed_matches_literal_file_names_and_the_narrow_rule_on_the_basename(
    matcher: str | None, path: str, expected: bool
) -> None:
    assert event_matches(get_event("FileChanged"), compile_matcher(matcher), {"file_path": path}) is expected


def test_file_changed_with_an_invalid_expression_never_fires() -> None:
    matcher = compile_matcher(".env|(")
    assert matcher.error is not None
    assert not event_matches(get_event("FileChanged"), matcher, {"file_path": "/p/.env"})


def test_a_matcher_compiled_some_other_way_is_used_as_it_is() -> None:
    from executor.core.matchers import Matcher

    anchored = Matcher("rate", names=frozenset({"rate"}))  # style None: an agent's own compiler
    assert not event_matches(get_event("StopFailure"), anchored, {"error": "rate_limit"})
    assert event_matches(get_event("StopFailure"), anchored, {"error": "rate"})


@pytest.mark.parametrize(("path", "name"), [("/a/b/c.txt", "c.txt"), ("c.txt", "c.txt"), ("/a/b/", "b"),
                                             ("C:\\a\\b.txt", "b.txt"), ("/", "/"), ("", "")])
def test_basename(path: str, name: str) -> None:
    from executor.core.matchers import basename

    assert basename(path) == name
