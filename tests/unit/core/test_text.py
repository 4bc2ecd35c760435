"""Text hygiene: sanitize (escape, never interpret, never drop), cap, first line, redact."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.core.text import (
    MESSAGE_CAP,
    TRUNCATION_MARK,
    cap_text,
    count_escapes,
    decode,
    first_line,
    needs_escape,
    one_line,
    redact,
    sanitize,
)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # CSI: colours, cursor movement, screen clearing, private modes
        ("\x1b[31mred\x1b[0m", r"\x1b[31mred\x1b[0m"),
        ("a\x1b[2Jb\x1b[H", r"a\x1b[2Jb\x1b[H"),
        ("\x1b[?25lhidden cursor\x1b[?25h", r"\x1b[?25lhidden cursor\x1b[?25h"),
        # OSC terminated by BEL and by ST (ESC \\): titles, hyperlinks, OSC 52 clipboard writes
        ("\x1b]0;pwned title\x07text", r"\x1b]0;pwned title\x07text"),
        ("\x1b]8;;https://evil.example\x1b\\click", r"\x1b]8;;https://evil.example\x1b\click"),
        ("\x1b]52;c;ZXZpbA==\x07after", r"\x1b]52;c;ZXZpbA==\x07after"),
        ("\x1b]52;c;ZXZpbA==\x1b\\after", r"\x1b]52;c;ZXZpbA==\x1b\after"),
        # 8-bit C1 forms: CSI, OSC, ST, DCS, NEL
        ("\x9b31mred", r"\u009b31mred"),
        ("\x9d0;title\x9cx", r"\u009d0;title\u009cx"),
        ("\x90q#0\x9c", r"\u0090q#0\u009c"),
        ("one\x85two", r"one\u0085two"),
        # DCS, SOS, PM, APC strings with a 7-bit ST
        ("\x1bPq#0;2;0;0;0\x1b\\ok", r"\x1bPq#0;2;0;0;0\x1b\ok"),
        ("\x1b_apc\x1b\\", r"\x1b_apc\x1b" + "\\"),
        # lone ESC, two-byte escapes (full reset)
        ("end\x1b", r"end\x1b"),
        ("\x1bcreset", r"\x1bcreset"),
        # NUL, DEL, BEL, backspace
        ("a\x00b\x7fc", r"a\x00b\x7fc"),
        ("bell\x07 back\x08space", r"bell\x07 back\x08space"),
        # CR LF becomes LF; a lone CR (which would overwrite the line) is shown
        ("one\r\ntwo\r\n", "one\ntwo\n"),
        ("safe\rEVIL", r"safe\rEVIL"),
        # bidi overrides, embeddings, isolates and marks
        ("ok\u202eexe.txt", r"ok\u202eexe.txt"),
        ("\u202a\u202b\u202c\u202d", r"\u202a\u202b\u202c\u202d"),
        ("\u2066x\u2067y\u2068z\u2069", r"\u2066x\u2067y\u2068z\u2069"),
        ("\u200e\u200f\u061c", r"\u200e\u200f\u061c"),
        # zero-width and other invisible format characters
        ("rm\u200b -rf", r"rm\u200b -rf"),
        ("a\u200cb\u200dc\ufeffd\u2060e\u2064", r"a\u200cb\u200dc\ufeffd\u2060e\u2064"),
        ("soft\xadhyphen", r"soft\u00adhyphen"),
        # tag characters (invisible ASCII), variation selectors, Hangul filler
        ("hi\U000e0069\U000e0067\U000e006e", r"hi\U000e0069\U000e0067\U000e006e"),
        ("x\ufe0f\U000e0100", r"x\ufe0f\U000e0100"),
        ("\u3164", r"\u3164"),
        # line and paragraph separators, exotic spaces (not a word break in a shell)
        ("a\u2028b\u2029c", r"a\u2028b\u2029c"),
        ("no\xa0break", r"no\u00a0break"),
        # lone surrogates (from JSON escapes)
        ("x\ud800y", r"x\ud800y"),
        # tabs and newlines are kept; ordinary Unicode is untouched
        ("a\tb\nc", "a\tb\nc"),
        ("plain text, ünïcödé ✓ 日本語 😀", "plain text, ünïcödé ✓ 日本語 😀"),
        # backslashes already in the text read as written
        (r"printf '\x1b[2J\n'", r"printf '\x1b[2J\n'"),
    ],
)
def test_sanitize_shows_every_escape(raw: str, shown: str) -> None:
    assert sanitize(raw) == shown


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"ok \xff\xfe \xc3(", r"ok \xff\xfe \xc3("),
        (b"\xed\xa0\x80", r"\xed\xa0\x80"),  # an encoded surrogate is not UTF-8
        (b"\xc0\xaf", r"\xc0\xaf"),  # an overlong slash
        ("h\u00e9llo \u202e".encode(), r"héllo \u202e"),
        (b"\x1b[2J\x9b", r"\x1b[2J\x9b"),  # a raw 0x9b byte is not UTF-8: a byte escape
        ("\x9b".encode(), r"\u009b"),  # the character U+009B, encoded: a character escape
    ],
)
def test_bytes_that_are_not_utf8_are_shown_as_byte_escapes(raw: bytes, shown: str) -> None:
    assert sanitize(raw) == shown


def test_one_line_escapes_newlines_too() -> None:
    assert one_line("sh x.sh\n    capabilities asked for: none") == r"sh x.sh\n    capabilities asked for: none"
    assert one_line("a\r\nb\tc") == "a\\r\\nb\tc"
    assert "\n" not in one_line("".join(chr(c) for c in range(0x2100)))


def test_the_table_is_the_whole_rule() -> None:
    # Every control, format, separator and unassigned character of this
    # Python's Unicode, and every default-ignorable one, is escaped.
    for code in range(0x110000):
        char = chr(code)
        category = unicodedata.category(char)
        if char in "\n\t":
            continue
        if category[0] in "CZ" and char != " ":
            assert needs_escape(char), f"U+{code:04X} {category}"
    for char in "\u034f\u115f\u1160\u17b4\u180b\u180e\ufe00\ufe0f\uffa0\U000e0100\U000e01ef":
        assert needs_escape(char), f"U+{ord(char):04X}"
    for char in "aZ~ é✓日😀\u0301":  # printable text, and a combining accent, stay
        assert not needs_escape(char)


def test_removing_nothing_assembles_nothing() -> None:
    # ESC NUL [31m: each character is escaped where it stands.
    assert sanitize("\x1b\x00[31mx") == r"\x1b\x00[31mx"


def test_sanitize_is_its_own_fixed_point() -> None:
    once = sanitize("\x1b[31m\u202e\xff\r\n" + "é" * 10)
    assert sanitize(once) == once
    assert one_line(one_line("a\nb")) == one_line("a\nb")


def test_sanitize_caps_after_escaping_and_never_splits_an_escape() -> None:
    out = sanitize("\x1b" * 5000)
    assert len(out) <= MESSAGE_CAP and out.endswith(TRUNCATION_MARK)
    body = out[: -len(TRUNCATION_MARK)]
    assert re.fullmatch(r"(?:\\x1b)*", body)
    assert sanitize("é" * 5 + "\U000e0041" + "x" * 40, cap=len(TRUNCATION_MARK) + 8) == "é" * 5 + TRUNCATION_MARK


def test_sanitize_caps_at_the_message_cap_by_default() -> None:
    out = sanitize("y" * (MESSAGE_CAP * 3))
    assert len(out) == MESSAGE_CAP
    assert out.endswith(TRUNCATION_MARK)
    assert len(sanitize(b"\xff" * (MESSAGE_CAP * 3))) <= MESSAGE_CAP
    assert sanitize("z" * (MESSAGE_CAP * 3), cap=None) == "z" * (MESSAGE_CAP * 3)


def test_count_escapes() -> None:
    assert count_escapes("plain\ntext\t") == 0
    assert count_escapes("\x1b[2J\u202e\r\n") == 3
    assert count_escapes(b"\xff\xfe ok") == 2
    assert count_escapes(r"printf '\x1b'") == 0


# -- the property: nothing invisible or interpreted survives, nothing is lost -------------

_ESCAPE = re.compile(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8})|(n)|(r))")


def _unescape(shown: str) -> str:
    """Read a rendering back (for text without backslashes of its own)."""

    def one(m: re.Match[str]) -> str:
        if m.group(4):
            return "\n"
        if m.group(5):
            return "\r"
        code = int(m.group(1) or m.group(2) or m.group(3), 16)
        return chr(0xDC00 + code) if m.group(1) and code >= 0x80 else chr(code)

    return _ESCAPE.sub(one, shown)


def _shows_nothing_hidden(shown: str, *, newlines: bool) -> None:
    for char in shown:
        if char == "\n":
            assert newlines
        elif char != "\t":
            assert not needs_escape(char), f"U+{ord(char):04X} survived"
            assert char.isprintable()


_ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_characters="\\"), max_size=300)
_NASTY = st.text(
    alphabet=st.sampled_from(
        [chr(c) for c in range(0x20)] + [chr(c) for c in range(0x7F, 0xA0)]
        + list("\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
               "\u061c\ufeff\u2060\u2064\u00ad\u2028\u2029\ufe0f\ud800\udfff\U000e0001\U000e0041\U000e007f")
        + list("[]0;PX^_\x07abc é✓")
    ),
    max_size=300,
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_ANY_TEXT, _NASTY))
def test_no_control_or_format_character_survives_and_every_one_is_visible(text: str) -> None:
    shown = sanitize(text, cap=None)
    _shows_nothing_hidden(shown, newlines=True)
    assert _unescape(shown) == text.replace("\r\n", "\n")  # faithful: read back exactly
    line = one_line(text)
    _shows_nothing_hidden(line, newlines=False)
    assert _unescape(line) == text


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_shown_faithfully(data: bytes) -> None:
    shown = one_line(data)
    _shows_nothing_hidden(shown, newlines=False)
    if b"\\" not in data:
        assert _unescape(shown).encode("utf-8", "surrogateescape") == data


@settings(max_examples=200, deadline=None)
@given(st.one_of(_ANY_TEXT, _NASTY), st.integers(min_value=0, max_value=120))
def test_a_capped_rendering_stays_within_the_cap_and_clean(text: str, cap: int) -> None:
    shown = sanitize(text, cap=cap)
    assert len(shown) <= cap
    _shows_nothing_hidden(shown, newlines=True)
    assert sanitize(shown, cap=cap) == shown


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
