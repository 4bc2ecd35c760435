"""Text hygiene: sanitize, cap, first line, redact."""

from __future__ import annotations

import pytest

from executor.text import (
    MESSAGE_CAP,
    TRUNCATION_MARK,
    cap_text,
    decode,
    first_line,
    redact,
    sanitize,
)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        # CSI: colours, cursor movement, screen clearing, private modes
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[1;32;40mbold\x1b[m", "bold"),
        ("a\x1b[2Jb\x1b[H", "ab"),
        ("\x1b[?25lhidden cursor\x1b[?25h", "hidden cursor"),
        ("up\x1b[1Aover", "upover"),
        # OSC terminated by BEL and by ST (ESC \), e.g. window titles and hyperlinks
        ("\x1b]0;pwned title\x07text", "text"),
        ("\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "click"),
        ("\x1b]52;c;ZXZpbA==\x07after", "after"),  # clipboard write
        # 8-bit CSI and OSC
        ("\x9b31mred\x9b0m", "red"),
        ("\x9d0;title\x07x", "x"),
        # DCS string
        ("\x1bPq#0;2;0;0;0\x1b\\ok", "ok"),
        # lone ESC, and two-byte escapes
        ("a\x1bb", "a"),
        ("end\x1b", "end"),
        ("\x1bcreset", "reset"),
        # NUL, DEL, other C0 and C1 controls
        ("a\x00b\x7fc", "abc"),
        ("bell\x07 back\x08space", "bell backspace"),
        ("c1\x85\x90\x9f", "c1"),
        # CR LF becomes LF; a lone CR (which would overwrite the line) goes
        ("one\r\ntwo\r\n", "one\ntwo\n"),
        ("safe\rEVIL", "safeEVIL"),
        # tabs and newlines are kept
        ("a\tb\nc", "a\tb\nc"),
        ("plain text, ünïcödé ✓", "plain text, ünïcödé ✓"),
    ],
)
def test_sanitize(raw: str, clean: str) -> None:
    assert sanitize(raw) == clean


def test_sanitize_leaves_no_escape_or_control_character() -> None:
    nasty = "".join(chr(c) for c in range(0x00, 0xA0)) + "\x1b[31m\x1b]0;t\x07\x9b1m"
    out = sanitize(nasty)
    assert not any(ord(c) < 0x20 and c not in "\t\n" for c in out)
    assert not any(0x7F <= ord(c) <= 0x9F for c in out)


def test_removing_one_escape_does_not_assemble_another() -> None:
    # ESC NUL [31m: dropping the NUL must not leave "ESC [31m" behind.
    out = sanitize("\x1b\x00[31mx")
    assert "\x1b" not in out
    assert out.endswith("x")


def test_unterminated_osc_swallows_only_up_to_the_next_escape() -> None:
    assert sanitize("\x1b]0;title\x1b[31mred") == "red"


def test_sanitize_caps_after_stripping() -> None:
    text = "\x1b[31m" * 5000 + "x" * 10
    assert sanitize(text) == "x" * 10


def test_sanitize_caps_at_the_message_cap_by_default() -> None:
    out = sanitize("y" * (MESSAGE_CAP * 3))
    assert len(out) == MESSAGE_CAP
    assert out.endswith(TRUNCATION_MARK)


# -- cap_text --------------------------------------------------------------------------


def test_cap_text_keeps_short_text() -> None:
    assert cap_text("abc", 3) == "abc"
    assert cap_text("", 0) == ""


def test_cap_text_cuts_and_marks() -> None:
    out = cap_text("a" * 100, 50)
    assert len(out) == 50
    assert out == "a" * (50 - len(TRUNCATION_MARK)) + TRUNCATION_MARK


@pytest.mark.parametrize("cap", [0, 1, 5, len(TRUNCATION_MARK), len(TRUNCATION_MARK) + 1])
def test_cap_text_never_exceeds_a_tiny_cap(cap: int) -> None:
    assert len(cap_text("z" * 100, cap)) == cap


def test_cap_text_default_is_ten_thousand() -> None:
    assert MESSAGE_CAP == 10_000
    assert len(cap_text("q" * 20_000)) == 10_000
    assert cap_text("q" * 10_000) == "q" * 10_000


# -- first_line and decode ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("error: boom\nmore\n", "error: boom"),
        ("\n\n   \n  second  \nthird", "second"),
        ("", ""),
        ("\n \t\n", ""),
        ("only", "only"),
    ],
)
def test_first_line(text: str, line: str) -> None:
    assert first_line(text) == line


def test_decode_replaces_invalid_utf8() -> None:
    assert decode(b"ok \xff\xfe \xc3") == "ok \ufffd\ufffd \ufffd"
    assert decode("héllo".encode()) == "héllo"


# -- redact --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "redacted"),
    [
        ("GITHUB_TOKEN=abc123 gh pr list", "GITHUB_TOKEN=*** gh pr list"),
        ("export API_KEY='a b c'; run", "export API_KEY=***; run"),
        ('DB_PASSWORD="hunter 2" psql', "DB_PASSWORD=*** psql"),
        ("aws_secret_access_key=xyz", "aws_secret_access_key=***"),
        ("mysql --password=hunter2 db", "mysql --password=*** db"),
        ("mysql --password hunter2 db", "mysql --password *** db"),
        ("tool --api-key abc123", "tool --api-key ***"),
        ("tool --token=abc && next", "tool --token=*** && next"),
        ("curl -H 'Authorization: Bearer abc.def.ghi' x", "curl -H 'Authorization: Bearer ***' x"),
        ("curl -H 'authorization: basic dXNlcjpwYXNz' x", "curl -H 'authorization: basic ***' x"),
        ("git clone https://user:s3cret@github.com/o/r", "git clone https://user:***@github.com/o/r"),
        ("psql postgres://admin:pw@db:5432/x", "psql postgres://admin:***@db:5432/x"),
        ("echo ghp_" + "A" * 36, "echo ***"),
        ("echo github_pat_" + "B1" * 20, "echo ***"),
        ("OPENAI=sk-" + "x" * 40 + " run", "OPENAI=*** run"),
        ("echo sk-proj-" + "Ab1_" * 8, "echo ***"),
        ("aws configure set key AKIAIOSFODNN7EXAMPLE", "aws configure set key ***"),
        ("curl -d token=xoxb-1234567890-abc", "curl -d token=***"),
    ],
)
def test_redact(command: str, redacted: str) -> None:
    assert redact(command) == redacted


def test_redact_url_password_with_empty_user() -> None:
    # Regression: "https://:secret@host" (token as password, no user name) leaked
    # into the run log: the user part had to be non-empty.
    assert redact("git clone https://:s3cret@example.com/r.git") == "git clone https://:***@example.com/r.git"


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "echo $GITHUB_TOKEN",
        'echo "${API_KEY:-unset}"',
        "git status --porcelain",
        "npm test -- --watch=false",
        "curl https://example.com:8443/path?q=1",
        "python3 -c 'print(1)'",
        "jq -r .tool_input.command",
        "task-runner --verbose",
        "grep -r secret_sauce src/",
    ],
)
def test_redact_leaves_ordinary_commands_alone(command: str) -> None:
    assert redact(command) == command


def test_redact_every_secret_in_one_line() -> None:
    line = "A_TOKEN=1 B_SECRET=2 curl https://u:p@h -H 'Authorization: Bearer q'"
    out = redact(line)
    for secret in ("=1", "=2", ":p@", "Bearer q"):
        assert secret not in out
