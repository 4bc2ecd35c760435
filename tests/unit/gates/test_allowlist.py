"""The bash allow-list gate: what a hostile hook author tries, and what a user needs to pass."""

from __future__ import annotations

import shlex
from concurrent.futures import ThreadPoolExecutor

import pytest

from executor.gates.allowlist import (
    AllowCheck,
    AllowList,
    check_command,
    literal_words,
)

ROOT = "/home/dev/proj"

# SECURITY-CASES "Allow-list": allowed `ls`, `echo *`, `npm test`, `git status`.
# `ls -la` must pass, and entry `ls` alone allows only a bare `ls`, so the
# suite's `ls` is the entry `ls *`.
CASES = AllowList(allow=("ls *", "echo *", "npm test", "git status"))
GUARD = "$CLAUDE_PROJECT_DIR/.hookcage/check.sh *"


def check(command: str, allowlist: AllowList = CASES) -> AllowCheck:
    return check_command(command, allowlist, ROOT)


def allowed(command: str, allowlist: AllowList = CASES) -> bool:
    return check(command, allowlist).allowed


def entry_of(suggestion: str) -> str:
    """The entry a ``hookcage allow '...'`` line adds, read back the way a shell would."""
    words = shlex.split(suggestion)
    assert words[:2] == ["hookcage", "allow"] and len(words) == 3, suggestion
    return words[2]


def assert_denied(result: AllowCheck) -> None:
    assert not result.allowed
    assert result.reason.strip()
    assert "\n" not in result.reason and "\r" not in result.reason


# --- SECURITY-CASES.md, "Allow-list" --------------------------------------------------------

SECURITY_DENIED = [
    "ls; rm x",
    "ls && rm x",
    "ls || rm x",
    "ls | sh",
    "ls |& sh",
    "ls & rm x",
    "ls\nrm x",
    "# first comment\n# second comment\nls\nrm x",
    "echo $(rm x)",
    "echo `rm x`",
    'echo "$(rm x)"',
    "cat <(curl x)",
    "echo <(curl x)",
    "ls <(curl x)",
    "FOO=$(rm x) ls",
    "bash -c 'rm x'",
    "sh -c",
    "sh -c 'rm x'",
    "bash -lc 'rm x'",
    "bash -lc",
    'eval "rm x"',
    "timeout 5 rm x",
    "env rm x",
    "xargs rm",
    "sudo rm x",
    "exec rm x",
    "(rm x)",
    "{ rm x; }",
    "f(){ rm x; }; f",
    "if true; then rm x; fi",
    "cat <<EOF\n$(id)\nEOF",
    "echo <<EOF\n$(id)\nEOF",
    "echo ${x:-$(id)}",
    "echo $((1+$(id)))",
    "\\rm x",
    "r\\m x",
    '"r""m" x',
    "$CMD x",
    "ls${IFS}-la",
    "/tmp/ls",
    "./ls",
    "ls > /etc/x",
    "ls &&",
    # alias tricks
    "alias ls='rm x'",
    "alias ls='rm x'; ls",
    "shopt -s expand_aliases; alias ls='rm x'\nls",
    "unalias ls",
    "git -c core.pager='sh -c id' status",
]


@pytest.mark.parametrize("command", SECURITY_DENIED)
def test_security_cases_are_denied(command: str) -> None:
    assert_denied(check(command))


@pytest.mark.parametrize("command", ["echo 'a;b'", "npm test", "git status", "ls -la", "ls", "echo", "echo *"])
def test_security_cases_allowed(command: str) -> None:
    assert check(command) == AllowCheck(allowed=True)


@pytest.mark.parametrize(
    "command",
    [
        "$CLAUDE_PROJECT_DIR/.hookcage/check.sh",
        '"$CLAUDE_PROJECT_DIR"/.hookcage/check.sh --fast',
        "${CLAUDE_PROJECT_DIR}/.hookcage/check.sh",
        '"${CLAUDE_PROJECT_DIR}/.hookcage/check.sh" --fast 2>&1',
        "$HOOKCAGE_PROJECT_DIR/.hookcage/check.sh",
        '"$CODEBUDDY_PROJECT_DIR/.hookcage/check.sh" a b c',
        "/home/dev/proj/.hookcage/check.sh",  # the root written out is the same program
    ],
)
def test_project_dir_paths_allowed_when_the_entry_names_them(command: str) -> None:
    assert allowed(command, AllowList(allow=(GUARD,)))


@pytest.mark.parametrize(
    "command",
    [
        "/tmp/.hookcage/check.sh",
        ".hookcage/check.sh",
        "./.hookcage/check.sh",
        "$HOME/.hookcage/check.sh",
        "$CLAUDE_PROJECT_DIRX/.hookcage/check.sh",
        "${CLAUDE_PROJECT_DIR:-/tmp}/.hookcage/check.sh",
        "'$CLAUDE_PROJECT_DIR'/.hookcage/check.sh",  # single quotes: a literal `$`
        "$CLAUDE_PROJECT_DIR/.hookcage/check.sh.bak",
        "$CLAUDE_PROJECT_DIR/../proj/.hookcage/check.sh",
        "$CLAUDE_PROJECT_DIR/.hookcage/check.sh; rm x",
        "$CLAUDE_PROJECT_DIR/.hookcage/check.sh $(id)",
    ],
)
def test_project_dir_paths_denied_elsewhere(command: str) -> None:
    assert_denied(check(command, AllowList(allow=(GUARD,))))


# --- hostile commands beyond the cases ------------------------------------------------------

HOSTILE = [
    # separators without spaces, CRLF, comments that are not comments
    "ls;rm x",
    "ls&&rm x",
    "ls||rm x",
    "ls|sh",
    "ls\r\nrm x",
    "ls\rrm x",
    "ls#;rm x",
    "echo a#;rm x",
    "ls # ok\nrm x",
    "ls\n\n\nrm x",
    "ls &\nrm x",
    # line continuations and escapes that tree-sitter and bash read differently
    "r\\\nm x",
    "l\\\ns; r\\\nm x",
    "ls \\ x",
    "ls\\\n;rm x",
    # characters that hide or split words
    "ls\x0brm x",
    "ls\x0crm x",
    "ls\x00; rm x",
    "l\u200bs",
    "ls\u00a0-la",
    "ls \u2028rm x",
    "ls\u202e",
    "\u217cs",  # SMALL ROMAN NUMERAL FIFTY, looks like `l`
    "\uff4c\uff53",  # FULLWIDTH LATIN SMALL LETTER L, S
    "ls \ud800",  # a lone surrogate cannot even be encoded
    # quoting games
    "ls $'\\x72m'",
    "$'\\x6cs'",
    'echo $"x"',
    "echo a$'b'",
    "ls \"$(rm x)\"",
    "ls '$(rm x)'; rm x",
    "echo \"${x:-$(id)}\"",
    "echo \"`id`\"",
    "echo ${CLAUDE_PROJECT_DIR:-$(id)}",
    "echo ${CLAUDE_PROJECT_DIR/proj/$(id)}",
    "echo ${#CLAUDE_PROJECT_DIR}",
    "echo ${!CLAUDE_PROJECT_DIR}",
    "echo $CLAUDE_PROJECT_DIR$x",
    "echo $@ $* $0 $$ $? $1",
    "echo $((1+2))",
    "echo $[1+2]",
    "echo {a,b}",
    "echo {1..3}",
    "ech{o,} x",
    "{rm,x}",
    "~'/bin/ls'",
    "echo '~'/x",
    # globs in the command name
    "l? -la",
    "l* -la",
    "[l]s",
    "*",
    "/bin/l?",
    # herestrings and heredocs with expansions, input redirects
    "ls <<< $(id)",
    "ls <<< \"$HOME\"",
    "ls <<< `id`",
    "echo <<EOF\n$HOME\nEOF",
    "echo <<EOF\n`id`\nEOF",
    "echo <<-EOF\n\t${x}\n\tEOF",
    "ls < /etc/passwd",
    "ls 0< x",
    "ls <&3",
    "ls <> x",
    # writes anywhere but /dev/null
    "ls > /dev/null; rm x",
    "ls 2>/etc/x",
    "ls >& /etc/x",
    "ls &> /etc/x",
    "ls >> ~/.bashrc",
    "ls >| x",
    "ls > /dev/null2",
    "ls > /dev/nul?",
    "ls > $CLAUDE_PROJECT_DIR/x",
    'ls > "/dev/null" > x',
    "ls 2>&1 >/tmp/x",
    "echo > /dev/null hi; rm x",
    "ls | tee /etc/x",
    "ls | tee -a x",
    ">/etc/x ls",
    "echo <<'EOF' > /etc/x\nhi\nEOF",
    # compound commands, negation, assignments, declarations
    "! ls",
    "[[ -f x ]]",
    "[ -f x ]",
    "test -f x",
    "for f in a; do rm x; done",
    "while true; do ls; done",
    "until false; do ls; done",
    "case x in x) rm x;; esac",
    "select x in a; do ls; done",
    "FOO=x ls",
    "FOO=x",
    "PATH=/tmp ls",
    "export PATH=/tmp; ls",
    "declare -x PATH=/tmp",
    "local x=1",
    "readonly x",
    "typeset x=1",
    "unset PATH",
    "read PATH <<< /tmp; ls",
    "mapfile PATH <<< /tmp",
    "printf -v PATH /tmp; ls",
    "let x=1",
    "set -o vi",
    "source x",
    ". ./x",
    "trap 'rm x' EXIT",
    "hash -p /tmp/evil ls; ls",
    "enable -f ./evil.so ls",
    "coproc rm x",
    "time rm x",
    "nohup rm x",
    "command rm x",
    "builtin echo x",
    "ls | xargs rm",
    "ls | bash",
    "ls | /bin/sh",
    "ls | python3",
    "ls | python3 -",
    "ls | perl -e 'system q(rm x)'",
    "ls && (echo x)",
    "ls && { echo x; }",
    "ls | { cat; }",
    "ls; function f { rm x; }",
    "cat <<EOF | sh\nrm x\nEOF",
    "cat <<EOF && rm x\nhi\nEOF",
    "ls <(id)",
    "ls >(id)",
    # empty and blank
    "",
    " ",
    "\n\t",
    ";",
    "ls;;",
    "ls |",
    "| ls",
    "ls 'unterminated",
]


@pytest.mark.parametrize("command", HOSTILE)
def test_hostile_commands_are_denied(command: str) -> None:
    assert_denied(check(command, AllowList(allow=(*CASES.allow, "cat *", "true", "false"))))


@pytest.mark.parametrize(
    "command",
    [
        "'ls' -la",
        "l''s",
        '"ls" "-la"',
        "l's'",
        "echo 'a;b' \"c|d\" 'e&&f'",
        "echo '$(rm x)' '`id`' '${x}'",
        'echo "\\$(rm x)"',
        'echo "{\\"decision\\": \\"block\\"}"',
        "echo x#y",
        "ls -la # ; rm x",
        "# only a comment\nls",
        "ls; ls && ls || ls | ls |& ls",
        "ls &",
        "ls\necho done\n",
        "  ls  ",
        "ls \\\n  -la",
        "echo ~ ~/x",
        "echo {} a{b}c",
        "echo *.py [ab] x?",
        "echo a=b --x=y",
        "echo 42 -1",
        "echo \t tabbed",
        "echo ''",
    ],
)
def test_plain_commands_in_disguise_still_pass(command: str) -> None:
    assert allowed(command)


@pytest.mark.parametrize(
    "command",
    [
        "echo ok > /dev/null",
        "echo ok >/dev/null",
        "echo ok >> /dev/null",
        "echo ok 2>/dev/null",
        "echo ok 2>> /dev/null",
        "echo ok &>/dev/null",
        "echo ok &>> /dev/null",
        "echo ok >| /dev/null",
        "echo ok > '/dev/null'",
        'echo ok > "/dev/null"',
        "echo ok >& /dev/null",
        "echo hi >&2",
        "echo hi 1>&2",
        "ls 2>&1",
        "ls 2>&-",
        "ls >/dev/null 2>&1",
        "ls 2>/dev/null | echo x",
        ">/dev/null echo hi",
        "ls 2>&1 | echo x",
        "echo <<'EOF'\n$(id) `id` ${x}\nEOF",
        'echo <<"EOF"\n$HOME\nEOF',
        "echo <<\\EOF\n$HOME\nEOF",
        "echo <<EOF\nplain text, no expansion\nEOF",
        "echo <<-EOF\n\tplain\n\tEOF",
        "echo <<'EOF' | ls\n$x\nEOF",
        "echo <<< 'literal $x'",
        'echo <<< "literal"',
        "echo <<< literal",
    ],
)
def test_output_to_dev_null_and_literal_input_pass(command: str) -> None:
    assert allowed(command)


@pytest.mark.parametrize(
    ("allow", "command"),
    [
        # tree-sitter starts the heredoc operator early and loses the word before it
        (("ls",), "ls -l<<E\nq\nE"),
        (("ls",), "ls -<<E\nq\nE"),
        # a continuation after a newline: tree-sitter reads one command `ls -`, bash two
        (("ls", "ls -"), "ls\n\\\n-<<E\nq\nE"),
        (("ls -la",), "l\\\ns -la"),
        # `\ ` is skipped by tree-sitter as if it were a blank; bash passes " -la"
        (("ls -la",), "ls \\ -la"),
        # whitespace inside quotes is filed under the closing quote, not the content
        (("echo ''",), 'echo "  "'),
        (("echo ''",), 'echo "\t"'),
        (("echo /home/dev/proj",), 'echo " $CLAUDE_PROJECT_DIR"'),
        # tree-sitter ends a `<<$E` heredoc at the next line, which bash runs
        (("ls",), "ls<<-$E\n$(rm x)\n\\E\n#E"),
        (("ls",), "ls <<$E 2>&1\n$(rm x)\n"),
        # str.strip() removes \r, \v and U+0085; bash does not
        (("ls",), "\rls"),
        (("ls",), "ls\x0b"),
        (("ls",), "\x85ls"),
    ],
)
def test_text_that_tree_sitter_misreads_is_denied(allow: tuple[str, ...], command: str) -> None:
    assert_denied(check(command, AllowList(allow=allow)))


@pytest.mark.parametrize(
    ("entry", "command"),
    [
        ("echo '  '", 'echo "  "'),
        ("echo ' /home/dev/proj '", 'echo " $CLAUDE_PROJECT_DIR "'),
        ("echo 'a\n  b'", 'echo "a\n  b"'),
        ("echo '\t'", 'echo "\t"'),
    ],
)
def test_whitespace_inside_quotes_is_kept(entry: str, command: str) -> None:
    assert allowed(command, AllowList(allow=(entry,)))


# --- reasons ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "allowlist", "reason"),
    [
        ("rm x", CASES, "`rm x` is not on the allow-list"),
        ("ls && rm x", CASES, "`rm x` is not on the allow-list"),
        ("echo $(rm x)", CASES, "command substitution `$(rm x)` is never allowed"),
        ("echo ${x:-$(id)}", CASES, "command substitution `$(id)` is never allowed"),
        ("cat <(curl x)", CASES, "process substitution `<(curl x)` is never allowed"),
        ("rm -rf /", AllowList(allow=("*",), deny=("rm *",)), "`rm -rf /` matches the deny entry 'rm *'"),
        ("ls &&", CASES, "the command cannot be parsed"),
        ("", CASES, "the command is empty"),
        ("(ls)", CASES, "a subshell `(ls)` is not allowed"),
        ("FOO=x ls", CASES, "the variable assignment `FOO=x` is not allowed"),
        ("ls > /etc/x", CASES, "the redirect `> /etc/x` writes a file; only /dev/null is allowed"),
        ("\\rm x", CASES, "the backslash in `\\rm` is not allowed (quote the word instead)"),
        ("$CMD x", CASES, "the variable `$CMD` is not allowed (only $CLAUDE_PROJECT_DIR is expanded)"),
        ("timeout 5 ls", CASES, "`timeout 5 ls` needs an exact entry: `timeout` runs the command in its arguments"),
    ],
)
def test_reason_names_the_part_that_failed(command: str, allowlist: AllowList, reason: str) -> None:
    assert check(command, allowlist).reason == reason


@pytest.mark.parametrize(
    "command",
    ["rm " + "x" * 500 + "\nrm y", 'git "-c\nx" status', "echo '\x1b[2J' | rm x", "echo \"a\nb\" > /etc/x"],
)
def test_reason_stays_one_short_line(command: str) -> None:
    result = check(command, AllowList(allow=("*",), deny=("rm *", "curl\n*")))
    assert_denied(result)
    assert len(result.reason) <= 240
    assert "\x1b" not in result.reason


def test_deeply_nested_lists_are_checked() -> None:
    assert allowed("ls && " * 2500 + "ls")  # deeper than Python's recursion limit, inside MAX_COMMAND_BYTES
    assert_denied(check("ls && " * 2500 + "rm x"))
    assert_denied(check("ls | " * 3000 + "sh"))


# --- deny entries ---------------------------------------------------------------------------

EVERYTHING_BUT_RM = AllowList(allow=("*", "ls *", "rm x"), deny=("rm *",))


@pytest.mark.parametrize(
    "command",
    [
        "rm x",  # even though `rm x` is also an allow entry
        "rm -rf /",
        "ls; rm x",
        "ls && rm -rf /",
        "ls | rm x",
        "'rm' x",
        "r''m x",
        "rm",  # `rm *` matches zero further arguments
        "sudo rm x",
        "timeout 5 rm -rf /",
        "env FOO=1 rm x",
        "find . -exec rm {} +",
        "echo $(rm x)",
        "(rm x)",
        "if true; then rm x; fi",
        "rm $HOME",  # an expansion could be anything
        "rm > /dev/null -rf /",
    ],
)
def test_deny_entries_win(command: str) -> None:
    result = check(command, EVERYTHING_BUT_RM)
    assert_denied(result)
    assert "deny entry 'rm *'" in result.reason
    assert result.suggestion is None


def test_deny_entries_win_over_a_whole_command_entry() -> None:
    complex_command = "jq -e .x >/dev/null && { rm -rf /tmp/x; exit 2; } || exit 0"
    allowlist = AllowList(allow=(complex_command,), deny=("rm *",))
    result = check(complex_command, allowlist)
    assert_denied(result)
    assert result.suggestion is None
    assert allowed(complex_command, AllowList(allow=(complex_command,), deny=("curl *",)))


@pytest.mark.parametrize(
    ("deny", "command", "denied"),
    [
        ("git push *", "git push origin main", True),
        ("git push *", "git status", False),
        ("curl *", "echo x | curl -d @- x", True),
        ("cat /etc/shadow", "cat /etc/shadow", True),
        ("cat /etc/shadow", "cat /etc/sha*", True),  # a glob may become the denied word
        ("cat /etc/shadow", "cat /etc/passwd", False),
        ("$CLAUDE_PROJECT_DIR/bin/deploy *", "/home/dev/proj/bin/deploy --prod", True),
        ("*", "ls", True),
    ],
)
def test_deny_entry_matching(deny: str, command: str, denied: bool) -> None:
    allowlist = AllowList(allow=("*",), deny=(deny,))
    assert check(command, allowlist).allowed is not denied


# --- entries ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "command", "expected"),
    [
        ("ls", "ls", True),
        ("ls", "ls -la", False),  # no `*`: no arguments
        ("ls *", "ls", True),  # a final `*` is zero or more arguments
        ("ls *", "ls -la /tmp", True),
        ("git status", "git status --porcelain", False),
        ("git status *", "git status --porcelain", True),
        ("git status *", "git stash", False),
        ("npm run *", "npm run lint", False),  # which package.json script runs: the entry must name it
        ("npm run lint *", "npm run lint -- --fix", True),
        ("npm run *", "npm test", False),
        ("ls", "/bin/ls", False),
        ("/bin/ls", "ls", False),
        ("ls", "./ls", False),
        ("ls", "LS", False),
        ("ruff check *.py", "ruff check a.py", True),
        ("ruff check *.py", "ruff check a.pyc", False),
        ("ruff check *.py", "ruff check a.py b.py", False),  # `*` inside a word is one word
        ("ruff check *.py", "ruff check dir/a.py", False),  # ... and does not cross `/`
        ("cat $CLAUDE_PROJECT_DIR/docs/*", "cat $CLAUDE_PROJECT_DIR/docs/a.md", True),
        ("cat $CLAUDE_PROJECT_DIR/docs/*", "cat $CLAUDE_PROJECT_DIR/docs/../../../etc/passwd", False),
        ("cat a?", "cat a?", True),  # `?` and `[` are literal in entries
        ("cat a?", "cat ab", False),
        ("cat [ab]", "cat a", False),
        ("echo 'a b'", "echo 'a b'", True),
        ("echo 'a b'", "echo a b", False),
        ("echo \"$CLAUDE_PROJECT_DIR\"", "echo $CLAUDE_PROJECT_DIR", True),
        ("echo ${CLAUDE_PROJECT_DIR}/x", "echo /home/dev/proj/x", True),
        ("*.sh", "run.sh", True),
        ("*.sh", "sub/run.sh", False),
        ("$CLAUDE_PROJECT_DIR/.hookcage/*.sh", "$CLAUDE_PROJECT_DIR/.hookcage/fmt.sh", True),
        ("$CLAUDE_PROJECT_DIR/.hookcage/*.sh", "$CLAUDE_PROJECT_DIR/.hookcage/../x.sh", False),
        ("  ls  ", "ls", True),
        ("", "ls", False),
    ],
)
def test_entry_matching(entry: str, command: str, expected: bool) -> None:
    assert allowed(command, AllowList(allow=(entry,))) is expected


def test_a_root_with_glob_characters_is_literal_in_entries() -> None:
    root = "/srv/a*b"
    allowlist = AllowList(allow=("$CLAUDE_PROJECT_DIR/run.sh",))
    assert check_command('"$CLAUDE_PROJECT_DIR"/run.sh', allowlist, root).allowed
    assert not check_command("/srv/aXXb/run.sh", allowlist, root).allowed


def test_unquoted_project_dir_is_denied_when_the_root_would_split() -> None:
    allowlist = AllowList(allow=("$CLAUDE_PROJECT_DIR/run.sh",))
    assert not check_command("$CLAUDE_PROJECT_DIR/run.sh", allowlist, "/srv/my proj").allowed
    assert check_command('"$CLAUDE_PROJECT_DIR/run.sh"', allowlist, "/srv/my proj").allowed


# --- the entry `*` and wrappers ---------------------------------------------------------------

STAR = AllowList(allow=("*",))


@pytest.mark.parametrize(
    "command",
    ["rm x", "anything --at all", "make -j4 && npm test | tee /dev/null", "./local-script", "jq . 2>&1"],
)
def test_star_entry_allows_any_simple_command(command: str) -> None:
    assert allowed(command, STAR)


@pytest.mark.parametrize(
    "command",
    ["echo $(id)", "(ls)", "ls > /etc/x", "FOO=1 ls", "$CMD", "ls $HOME", "{ ls; }", "! ls", "[[ -f x ]]"],
)
def test_star_entry_still_denies_structure(command: str) -> None:
    assert_denied(check(command, STAR))


WRAPPED = [
    "bash -c 'rm x'",
    "bash -lc 'rm x'",
    "sh -c 'rm x'",
    "sh ./script.sh",
    "/bin/bash -c x",
    "zsh -c x",
    "dash -c x",
    "fish -c x",
    "timeout 5 rm x",
    "env rm x",
    "env",
    "/usr/bin/env rm x",
    "xargs rm",
    "sudo rm x",
    "doas rm x",
    "su -c 'rm x'",
    "exec rm x",
    "eval 'rm x'",
    "nohup rm x",
    "nice rm x",
    "ionice rm x",
    "time rm x",
    "command rm x",
    "builtin echo",
    "stdbuf -o0 rm x",
    "setsid rm x",
    "chroot / rm x",
    "flock /tmp/l rm x",
    "watch rm x",
    "parallel rm ::: x",
    "busybox rm x",
    "python3 -c 'import os'",
    "python -c x",
    "python3.12 -c x",
    "python3",
    "python3 -",
    "python3 -I -c x",
    "python3 -m -c x",
    "node -pe x",
    "perl -e 'system(1)'",
    "ruby -e x",
    "node -e x",
    "node --eval x",
    "find . -exec rm {} ;",
    "find . -execdir rm {} +",
    "find . -ok rm {} ;",
    "git -c core.pager='sh -c id' status",
    "git -ccore.pager=id status",
    "git --exec-path=/tmp status",
    "git --config-env=core.pager=X status",
    "git --git-dir=/tmp/evil status",
    "git rebase --exec 'rm x' main",
    "git rebase --exe='rm x' main",  # git accepts abbreviated long options
    "git rebase -ix 'rm x' main",  # ... and bundled short ones
    "export X=1",
    "set -e",
    "source ./env.sh",
    "alias x=y",
    "trap 'x' EXIT",
    "tar --to-command=sh -xf a.tar",
    "rg --pre ./evil x",
]


@pytest.mark.parametrize("command", WRAPPED)
def test_wrappers_need_an_exact_entry(command: str) -> None:
    assert_denied(check(command, AllowList(allow=("*",))))
    first = shlex.split(command)[0]
    assert_denied(check(command, AllowList(allow=(f"{first} *",))))
    assert allowed(command, AllowList(allow=(command,)))


@pytest.mark.parametrize(
    "command",
    [
        "sh $CLAUDE_PROJECT_DIR/.hookcage/guard.sh",
        'sh "$CLAUDE_PROJECT_DIR/.hookcage/guard.sh"',
        "sh ${CLAUDE_PROJECT_DIR}/.hookcage/guard.sh",
        "sh /home/dev/proj/.hookcage/guard.sh",
        "sh $CLAUDE_PROJECT_DIR/.hookcage/guard.sh >/dev/null 2>&1",
    ],
)
def test_a_shell_running_a_project_script_by_exact_entry(command: str) -> None:
    allowlist = AllowList(allow=("sh $CLAUDE_PROJECT_DIR/.hookcage/guard.sh",))
    assert allowed(command, allowlist)
    assert not allowed("sh $CLAUDE_PROJECT_DIR/.hookcage/guard.sh --other", allowlist)
    assert not allowed("sh /tmp/.hookcage/guard.sh", allowlist)


@pytest.mark.parametrize(
    "command",
    [
        "python3 $CLAUDE_PROJECT_DIR/.hookcage/lint.py --fix",
        "node scripts/check.js",
        "git status -s",
        "git diff --name-only HEAD~1",
        "find . -name '*.py'",
    ],
)
def test_plain_uses_of_interpreters_and_tools_match_star_entries(command: str) -> None:
    assert allowed(command, AllowList(allow=("*",)))


# --- whole-command entries --------------------------------------------------------------------

REVIEWED = "jq -e '.x' >/dev/null && { echo no >&2; exit 2; } || exit 0"


@pytest.mark.parametrize(
    "command",
    [
        REVIEWED,
        f"  {REVIEWED}\n",
    ],
)
def test_whole_command_entry_allows_a_complex_command(command: str) -> None:
    assert_denied(check(command, CASES))
    assert allowed(command, AllowList(allow=(REVIEWED,)))


@pytest.mark.parametrize(
    ("entry", "command"),
    [
        ('cd "$CLAUDE_PROJECT_DIR" && make lint', 'cd "${CLAUDE_PROJECT_DIR}" && make lint'),
        ('cd "$CLAUDE_PROJECT_DIR" && make lint', 'cd "/home/dev/proj" && make lint'),
        ('cd "$HOOKCAGE_PROJECT_DIR" && make lint', 'cd "$CLAUDE_PROJECT_DIR" && make lint'),
        ("[ -f x ] && echo y", "[ -f x ] && echo y"),
        ("echo $(date)", "echo $(date)"),
    ],
)
def test_whole_command_entry_expands_project_dir_on_both_sides(entry: str, command: str) -> None:
    assert allowed(command, AllowList(allow=(entry,)))


@pytest.mark.parametrize(
    ("entry", "command"),
    [
        (REVIEWED, REVIEWED.replace("exit 0", "rm x")),
        (REVIEWED, REVIEWED.replace("  ", " ").replace("&& {", "&&  {")),
        (REVIEWED, REVIEWED + "; rm x"),
        ("echo $(date)", "echo $(date) $(id)"),
        ("* x", "* x"),  # a glob as the command name runs whatever file sorts first
        ("*", "*"),
        ("ls && * x", "ls && * x"),
    ],
)
def test_whole_command_entry_is_exact(entry: str, command: str) -> None:
    assert_denied(check(command, AllowList(allow=(entry,))))


# --- suggestions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "suggestion"),
    [
        ("rm x", "hookcage allow 'rm x'"),
        ("true", "hookcage allow true"),
        ("ls -la && rm x", "hookcage allow 'rm x'"),
        ("ls | tee out.log", "hookcage allow 'tee out.log'"),
        ("touch 'a b'", "hookcage allow 'touch '\"'\"'a b'\"'\"''"),
        ('"$CLAUDE_PROJECT_DIR"/.hookcage/fmt.sh --check', "hookcage allow '$CLAUDE_PROJECT_DIR/.hookcage/fmt.sh --check'"),
        ("${HOOKCAGE_PROJECT_DIR}/x.sh", "hookcage allow '$HOOKCAGE_PROJECT_DIR/x.sh'"),
        ("/home/dev/proj/x.sh", "hookcage allow /home/dev/proj/x.sh"),
        ("timeout 5 make", "hookcage allow 'timeout 5 make'"),
        ("(rm x)", "hookcage allow '(rm x)'"),
        ("ls; rm x; rm y", "hookcage allow 'ls; rm x; rm y'"),  # two off-list: the whole command
        ("ls $(id)", "hookcage allow 'ls $(id)'"),
    ],
)
def test_suggestion_is_the_exact_pasteable_line(command: str, suggestion: str) -> None:
    assert check(command).suggestion == suggestion


@pytest.mark.parametrize(
    "command",
    [
        "",
        "ls &&",
        "ls 'unterminated",
        "ls\x0brm x",
        "* x",
        "l? x",
    ],
)
def test_no_suggestion_when_no_entry_could_allow_it(command: str) -> None:
    result = check(command)
    assert_denied(result)
    assert result.suggestion is None


ROUND_TRIP = [
    "rm x",
    "rm -rf build/",
    "touch 'a b' \"c d\"",
    "npm run lint -- --fix",
    "ls && rm x",
    "ls | tee out.log",
    "make >/dev/null 2>&1",
    "git status --porcelain",
    '"$CLAUDE_PROJECT_DIR"/.hookcage/check.sh --fast',
    "${CLAUDE_PROJECT_DIR}x/run.sh",
    "$CLAUDE_PROJECT_DIR/bin/tool $CLAUDE_PROJECT_DIR/src",
    "echo '$CLAUDE_PROJECT_DIR'; rm x",
    "rm 'weird*name' 'q?[x]'",
    "prettier --write '**/*.ts'",
    "bash -c 'rm x'",
    "sh $CLAUDE_PROJECT_DIR/.hookcage/guard.sh",
    "timeout 5 rm x",
    "sudo -n true",
    "find . -name '*.pyc' -exec rm {} +",
    "git -c color.ui=never status",
    "python3 -c 'print(1)'",
    "(rm x)",
    "{ rm x; }",
    "f(){ rm x; }; f",
    "if true; then rm x; fi",
    "for f in a b; do echo $f; done",
    "echo $(rm x)",
    "echo `rm x`",
    'echo "$(rm x)"',
    "cat <(curl x)",
    "FOO=$(rm x) ls",
    "FOO=1 make",
    "cat <<EOF\n$(id)\nEOF",
    "echo ${x:-$(id)}",
    "echo $((1+2))",
    "\\rm x",
    "$CMD x",
    "ls${IFS}-la",
    "ls > /etc/x",
    "ls 2>/tmp/err.log",
    "cat < input.txt",
    "ls; rm x; touch y",
    REVIEWED,
    "[ -f package.json ] && npm test",
    "r\\\nm x",
    "echo {a,b}",
    "! grep -q TODO x",
    "jq -r '.tool_input.command' | grep -qE 'rm -rf|sudo' && { echo 'blocked' >&2; exit 2; }",
    "cd $CLAUDE_PROJECT_DIR && npx eslint --fix . 2>&1 | head -20",
    "cat <<EOF > /dev/null\nhello\nEOF",
]


@pytest.mark.parametrize("command", ROUND_TRIP)
def test_adding_the_suggested_entry_allows_the_command(command: str) -> None:
    result = check(command)
    assert_denied(result)
    assert result.suggestion is not None
    widened = AllowList(allow=(*CASES.allow, entry_of(result.suggestion)))
    assert check(command, widened) == AllowCheck(allowed=True)


@pytest.mark.parametrize("command", [*SECURITY_DENIED, *HOSTILE, *WRAPPED])
def test_every_suggestion_given_works(command: str) -> None:
    result = check(command)
    if result.suggestion is not None:
        widened = AllowList(allow=(*CASES.allow, entry_of(result.suggestion)))
        assert allowed(command, widened)


def test_a_suggested_simple_entry_does_not_allow_more_than_it_shows() -> None:
    result = check("ls && rm x")
    assert result.suggestion is not None
    widened = AllowList(allow=(*CASES.allow, entry_of(result.suggestion)))
    assert allowed("rm x", widened)
    assert not allowed("rm y", widened)
    assert not allowed("rm x y", widened)


# --- literal_words --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("ls -la", ["ls", "-la"]),
        ("sh $CLAUDE_PROJECT_DIR/.hookcage/guard.sh --x", ["sh", f"{ROOT}/.hookcage/guard.sh", "--x"]),
        (
            'test -f a && { cat "${CLAUDE_PROJECT_DIR}/b.txt" 2>/dev/null; }',
            ["test", "-f", "a", "cat", f"{ROOT}/b.txt", "/dev/null"],
        ),
        ("python3 x.py < in.txt | jq . > /dev/null", ["python3", "x.py", "in.txt", "jq", ".", "/dev/null"]),
        ("cat $HOME/x 'q' \"r s\"", ["cat", "q", "r s"]),
        ("echo $(cat inner.txt)", ["echo", "cat", "inner.txt"]),
        ("(cd sub && ./run.sh)", ["cd", "sub", "./run.sh"]),
        ("if [ -f a ]; then bash b.sh; fi", ["a", "bash", "b.sh"]),
        ("for f in a b; do echo $f; done", ["a", "b", "echo"]),
        ("f(){ cat c.txt; }; f", ["f", "cat", "c.txt", "f"]),
        ("echo ${x:-default.txt}", ["echo", "default.txt"]),
        ("cat <<EOF\nnot a word\nEOF", ["cat"]),
        ("", []),
        ("ls &&", ["ls"]),
        ("ls 'unterminated", ["ls"]),
        ("\ud800", []),
    ],
)
def test_literal_words(command: str, words: list[str]) -> None:
    assert literal_words(command, ROOT) == words


@pytest.mark.parametrize("command", [*SECURITY_DENIED, *HOSTILE, *ROUND_TRIP])
def test_literal_words_never_raises(command: str) -> None:
    assert isinstance(literal_words(command, ROOT), list)


# --- concurrency ------------------------------------------------------------------------------


def test_checks_from_many_threads_agree() -> None:
    commands = [*SECURITY_DENIED, "ls -la", "npm test", "git status", REVIEWED] * 5
    expected = [check(c).allowed for c in commands]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(lambda c: check(c).allowed, commands)) == expected
