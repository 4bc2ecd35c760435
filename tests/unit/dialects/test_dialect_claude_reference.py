"""Goldens for Claude Code's current "Exit code output" rules (issue 22): payload + the hook's exit
code and output + hookcage's answer (no Docker).

R: code.claude.com/docs/en/hooks, "Exit code output" as worded since 2026-08-31 (the page diff in
gabriel-dehan/claude_hooks issue #63; quoted verbatim in later copies), "Other exit codes (including
exit 1)": "With a parsed object that passes schema validation, for events that use the standard
decision model, Claude Code ignores the exit code and the JSON alone decides the outcome"; "Exit
code 2": "Claude Code still reads any valid JSON output on stdout ... The blocking message is the
reason from your JSON's blocking decision when it makes one, and your stderr text otherwise";
"Starts with { but doesn't end with }: Claude Code treats it as plain text".
"""

from __future__ import annotations

import json
from typing import Any

from executor.core.events import EVENTS
from executor.core.protocol import HookOutcome, fold
from executor.dialects.claude import DIALECT as CLAUDE
from executor.dialects.codebuddy import DIALECT as CODEBUDDY

PRE = EVENTS["PreToolUse"]
DENY = json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                          "permissionDecisionReason": "no force pushes"}}).encode()


def read(code: int, stdout: bytes, stderr: bytes = b"", event: str = "PreToolUse", dialect: Any = CLAUDE) -> HookOutcome:
    return dialect.read_answer(EVENTS[event], "guard.py", code, stdout, stderr)


def answer(outcome: HookOutcome) -> Any:
    out = CLAUDE.render(PRE, fold(PRE, [outcome]))
    return out.exit_code, json.loads(out.stdout) if out.exit_code == 0 else out.stderr


def test_exit_1_with_a_deny_in_json_denies() -> None:
    # A guard that prints its deny and exits 1 (sys.exit(1) after print): "the JSON alone decides".
    o = read(1, DENY, b"Traceback ...\n")
    assert (o.status, o.decision, o.reason) == ("ok", "deny", "no force pushes")
    code, out = answer(o)
    assert code == 0 and out["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_exit_1_without_json_stays_a_non_blocking_error() -> None:
    # "With stdout that Claude Code treats as plain text, or with empty stdout, it's a non-blocking error".
    assert read(1, b"", b"boom\n").status == "error"
    assert read(1, b"blocked!\n").status == "error"
    # "a parsed object that fails schema validation ... the same non-blocking error as on exit 0".
    assert read(1, b'{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "maybe"}}') \
        .status == "error"
    assert read(3, b'{"decision": ').status == "error"


def test_exit_2_reads_the_json_too_and_its_reason_wins() -> None:
    o = read(2, DENY, b"stderr reason\n")
    assert (o.status, o.reason) == ("block", "no force pushes")
    ctx = read(2, b'{"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "see SECURITY.md"}}',
               b"blocked by policy\n")
    assert (ctx.status, ctx.reason, ctx.additional_context) == ("block", "blocked by policy", "see SECURITY.md")
    # "even a JSON permissionDecision of 'allow' can't override it".
    allow = read(2, b'{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", '
                    b'"updatedInput": {"command": "ls"}}}', b"no\n")
    assert (allow.status, allow.decision, allow.updated_input) == ("block", None, None)
    # "A hook that exits 2 while printing JSON that fails schema validation still blocks" (on stderr).
    bad = read(2, b'{"hookSpecificOutput": {"hookEventName": "Stop"}}', b"still no\n")
    assert (bad.status, bad.reason) == ("block", "still no")


def test_braces_that_do_not_close_are_plain_text() -> None:
    # "Starts with { but doesn't end with }: Claude Code treats it as plain text" (context on UserPromptSubmit).
    o = read(0, b"{branch} is protected\nwork on a copy\n", event="UserPromptSubmit")
    assert (o.status, o.additional_context) == ("ok", "{branch} is protected\nwork on a copy")


def test_codebuddy_keeps_the_earlier_rule() -> None:
    assert read(1, DENY, dialect=CODEBUDDY).status == "error"


def test_a_json_answer_cut_at_hookcages_cap_is_a_cut_answer_not_plain_text() -> None:
    # The agent would have read the whole document (a decision may sit at its end): hookcage cut
    # it, so "doesn't end with }" says nothing about the hook; the user is told, as before.
    cut = b'{"a": "' + b"x" * 1000
    o = CLAUDE.read_answer(PRE, "guard.py", 0, cut, b"", stdout_truncated=True)
    assert o.status == "error" and "not valid JSON" in (o.error or "")
    plain = read(0, cut)  # the same bytes, as the hook printed them whole: plain text
    assert plain.status != "error"
