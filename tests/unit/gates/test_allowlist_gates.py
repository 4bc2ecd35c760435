"""Issue 11, "the allow-list means what it says": what a hostile repository tries against `*` entries.

Every test here is an attack that must fail: words the shell expands, programs
that run programs, options and program text that run programs, suggestions
wider than the command, and inputs that would stall the gate.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor.gates.allowlist import (
    MAX_COMMAND_BYTES,
    MAX_NESTING,
    AllowCheck,
    AllowList,
    check_command,
    entry_warning,
    literal_words,
    programs,
)

pytestmark = pytest.mark.spawns

ROOT = "/home/dev/proj"


def check(command: str, *allow: str, deny: tuple[str, ...] = ()) -> AllowCheck:
    return check_command(command, AllowList(allow=allow, deny=deny), ROOT)


def allowed(command: str, *allow: str) -> bool:
    return check(command, *allow).allowed


def entry_of(suggestion: str) -> str:
    words = shlex.split(suggestion)
    assert words[:2] == ["hookcage", "allow"] and len(words) == 3, suggestion
    return words[2]


# --- 3a. words the shell would expand ------------------------------------------------------------


def test_issue_find_glob_that_a_file_named_exec_turns_into_exec() -> None:
    # the repository has a file named `-exec`: `-exe?` expands to it and find runs jq
    result = check("find . -maxdepth 0 -exe? jq -n 1 ';'", "find *")
    assert not result.allowed
    assert "can expand to an option" in result.reason
    assert result.suggestion is None  # no entry may allow it: not even the whole command
    assert not allowed("find . -maxdepth 0 -exe? jq -n 1 ';'", "find . -maxdepth 0 -exe? jq -n 1 ';'")


def test_issue_git_glob_that_a_file_named_c_turns_into_c() -> None:
    # the repository has a file named `-c`: `-?` expands to it and git runs a shell alias
    command = "git -? 'alias.x=!printf pwned' x"
    assert not allowed(command, "git *")
    assert not allowed(command, "*")
    assert not allowed(command, command)


@pytest.mark.parametrize(
    ("command", "entry"),
    [
        ("find . -exe*dir id ';'", "find *"),
        ("find . [-]exec id ';'", "find *"),
        ("find . *exec id ';'", "find *"),
        ("git [-]c core.pager=id log", "git *"),
        ("git * status", "git *"),
        ("tar -x? 'sh -c id' -f a.tar", "tar *"),
        ("sed -n p *", "sed *"),
        ("sort *", "sort *"),  # a file named --compress-program=...
        ("xargs -?", "*"),
        ("./tool.sh *.txt", "./tool.sh *"),  # a program hookcage does not know: its options are unknown
        ("$CLAUDE_PROJECT_DIR/.hookcage/check.sh ?", "$CLAUDE_PROJECT_DIR/.hookcage/check.sh *"),
        ("npm run lint -- *", "npm run lint *"),
        ("rsync -?", "rsync *"),
    ],
)
def test_globs_that_can_become_options_of_a_program_that_runs_others_are_denied(command: str, entry: str) -> None:
    assert not allowed(command, entry)
    assert not allowed(command, "*")


@pytest.mark.parametrize(
    ("command", "entry"),
    [
        ("ls *", "ls *"),
        ("echo *", "echo *"),
        ("ruff format *.py", "ruff *"),  # ruff runs no other program, whatever its options
        ("ruff format *.py", "ruff format *.py"),
        ("shellcheck ./*.sh", "shellcheck *"),
        ("git add ./*.py", "git *"),  # every expansion starts with ./: never an option
        ("find ./* -name '*.py'", "find *"),
        ("$CLAUDE_PROJECT_DIR/.hookcage/check.sh ./*.txt", "$CLAUDE_PROJECT_DIR/.hookcage/check.sh *"),
        ("grep -l TODO src/*.py", "grep *"),
    ],
)
def test_globs_that_cannot_become_options_pass(command: str, entry: str) -> None:
    assert allowed(command, entry)


@pytest.mark.parametrize(
    ("entry", "command", "expected"),
    [
        # an entry word's `*` matches literal arguments; a glob in the command is another thing:
        # it becomes whatever files there are, so only the same glob (or the final `*`) allows it
        ("cat x*", "cat xa", True),
        ("cat x*", "cat 'x?'", True),
        ("cat x*", "cat x?", False),
        ("cat x*", "cat x*", True),  # the entry spells out this very glob
        ("cat 'x*'", "cat x*", False),  # ... not when it quotes it: then it is literal
        ("cat 'x*'", "cat 'x*'", True),
        ("cat [ab]", "cat [ab]", True),
        ("cat [ab]", "cat '[ab]'", True),  # `[` in an entry is literal
        ("cat ?", "cat a", False),  # `?` in an entry is literal
        ("cat *", "cat ~root/x", True),  # the final `*` allows any words
        ("cat x*", "cat ~x", False),  # `~x` is a home directory, not the text `~x`
        ("cat ~/x", "cat ~/x", True),
        ("cat '~/x'", "cat ~/x", False),
    ],
)
def test_an_expanding_word_needs_an_entry_word_that_spells_it_out(entry: str, command: str, expected: bool) -> None:
    assert allowed(command, entry) is expected


@pytest.mark.parametrize("command", ["echo {a,b}", "echo {1..3}", "ls x{,.bak}", "echo ~+/x{a,b}"])
def test_brace_expansion_is_denied(command: str) -> None:
    assert not allowed(command, "*")


# --- 3b. programs that run programs ---------------------------------------------------------------

ISSUE_WRAPPERS = [
    "setarch x86_64 sh -c id",
    "setarch linux64 -R sh -c id",
    "x86_64 sh -c id",
    "i386 sh -c id",
    "linux32 sh -c id",
    "linux64 sh -c id",
    "prlimit --nofile=10 sh -c id",
    "setpriv --reuid=1000 sh -c id",
    "ld.so /bin/sh -c id",
    "/lib64/ld-linux-x86-64.so.2 /bin/sh -c id",
    "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 /bin/sh -c id",
    "ld-linux.so.2 /bin/sh -c id",
    "rbash -c id",
]


@pytest.mark.parametrize("command", ISSUE_WRAPPERS)
def test_issue_wrappers_are_never_allowed_by_a_star_entry(command: str) -> None:
    first = shlex.split(command)[0]
    assert not allowed(command, "*")
    assert not allowed(command, f"{first} *")
    assert not allowed(command, f"{first.rsplit('/', 1)[-1]} *")
    assert allowed(command, command)  # an entry that spells it out is the user's choice


@pytest.mark.parametrize("wrapper", sorted(programs.WRAPPERS - {"exec", "eval", "command", "builtin", "coproc", "time"}))
def test_every_wrapper_in_the_catalogue_is_refused_under_star(wrapper: str) -> None:
    for command in (f"{wrapper} sh -c id", f"/usr/bin/{wrapper} id", f"{wrapper}"):
        result = check(command, "*", f"{wrapper} *")
        assert not result.allowed, command


EXECUTING = [
    # sed: the `e` command and the `s///e` flag, also in -e/--expression and after other options
    ("sed", "sed 's/.*/id/e' f"),
    ("sed", "sed -n '1e id' f"),
    ("sed", "sed -e p -e '$e id' f"),
    ("sed", "sed --expression='1e id' f"),
    ("sed", "sed -ne'1e id' f"),
    ("sed", "sed -f script.sed f"),
    ("sed", "sed --file=script.sed f"),
    ("sed", "sed -n p -e '1e id' f"),
    # find
    ("find", "find . -exec id ';'"),
    ("find", "find . -execdir id ';'"),
    ("find", "find . -ok id ';'"),
    ("find", "find . -okdir id ';'"),
    # git
    ("git", "git -c core.pager='sh -c id' log"),
    ("git", "git --config-env=core.pager=X log"),
    ("git", "git --exec-path=/tmp status"),
    ("git", "git -C /tmp/evil status"),
    ("git", "git --git-dir=/tmp/evil status"),
    ("git", "git -p log"),
    ("git", "git x"),  # an alias, or a git-x program
    ("git", "git config --global core.fsmonitor id"),
    ("git", "git bisect run id"),
    ("git", "git submodule foreach id"),
    ("git", "git difftool -x id"),
    ("git", "git rebase --exec id main"),
    ("git", "git rebase --exe=id main"),
    ("git", "git rebase -ix id main"),
    ("git", "git clone --template=./t . x"),
    ("git", "git clone -c core.fsmonitor=id . x"),
    ("git", "git fetch --upload-pack=id ."),
    ("git", "git push --receive-pack=id ."),
    ("git", "git grep -O id x"),
    ("git", "git merge -s ours x"),
    ("git", "git help log"),
    # awk and its kin
    ("awk", "awk 'BEGIN{system(\"id\")}'"),
    ("awk", "awk 'BEGIN{print | \"sh\"}'"),
    ("awk", "awk 'BEGIN{\"id\" | getline x}'"),
    ("gawk", "gawk 'BEGIN{print |& \"sh\"}'"),
    ("gawk", "gawk '@load \"x\"; BEGIN{}'"),
    ("gawk", "gawk 'BEGIN{f=\"sys\" \"tem\"; @f(\"id\")}'"),
    ("gawk", "gawk -l ./evil 1"),
    ("gawk", "gawk -f prog.awk x"),
    ("gawk", "gawk -e 'BEGIN{}' x"),
    ("mawk", "mawk -W exec prog.awk"),
    ("awk", "awk 'BEGIN{sys\\\ntem(\"id\")}'"),
    # tar
    ("tar", "tar --to-command=sh -xf a.tar"),
    ("tar", "tar --checkpoint=1 --checkpoint-action=exec=id -cf /dev/null x"),
    ("tar", "tar --use-compress-program=./evil -xf a.tar"),
    ("tar", "tar -I ./evil -xf a.tar"),
    ("tar", "tar -xIf ./evil a.tar"),
    ("tar", "tar xIf ./evil a.tar"),
    ("tar", "tar --info-script=./evil -cf a.tar x"),
    ("tar", "tar -cf host:/x src"),
    ("tar", "tar --rsh-command=./evil -cf host:/x src"),
    # others
    ("xargs", "xargs id"),
    ("rsync", "rsync -e 'sh -c id' a b"),
    ("rsync", "rsync --rsh=id a b"),
    ("ssh", "ssh -o ProxyCommand=id x"),
    ("vim", "vim -c '!id'"),
    ("less", "less '+!id' f"),
    ("python3", "python3 -m evilmod"),
    ("python3", "python3 -c 'import os'"),
    ("python3", "python3"),
    ("env", "env -S 'sh -c id'"),
    ("perl", "perl -e 'system 1'"),
    ("perl", "perl '-Mstrict;system q(id)' x.pl"),
    ("node", "node -e 'x'"),
    ("node", "node --require ./evil.js x.js"),
    ("make", "make SHELL=./evil"),
    ("make", "make --eval='x:=$(shell id)'"),
    ("npm", "npm run evil"),
    ("npm", "npm exec evil"),
    ("npm", "npm x evil"),
    ("npm", "npm --script-shell=./evil test"),
    ("npm", "npm test --script-shell=./evil"),
    ("npx", "npx evil"),
    ("npx", "npx -c id"),
    ("uv", "uv run sh -c id"),
    ("uv", "uv tool run evil"),
    ("uv", "uv run python -c 1"),
    ("uv", "uv sync --python ./evil"),
    ("uvx", "uvx evil"),
    ("sort", "sort --compress-program=./evil x"),
    ("sort", "sort --compress-prog=./evil x"),
    ("split", "split --filter=id x"),
    ("install", "install -s --strip-program=./evil a b"),
    ("diff3", "diff3 --diff-program=./evil a b c"),
    ("zic", "zic -y ./evil x"),
    ("openssl", "openssl req -engine ./evil.so"),
    ("openssl", "openssl x509 -provider-path . -provider evil"),
    ("ip", "ip netns exec x id"),
    ("ip", "ip -batch cmds"),
    ("tc", "tc exec bpf x"),
    ("apt-get", "apt-get -o APT::Update::Pre-Invoke::=id update"),
    ("dpkg", "dpkg --pre-invoke=id -i x.deb"),
    ("printf", "printf -v PATH x"),
]


@pytest.mark.parametrize(("program", "command"), EXECUTING)
def test_options_and_program_text_that_run_commands_need_an_exact_entry(program: str, command: str) -> None:
    assert not allowed(command, f"{program} *")
    assert not allowed(command, "*")
    result = check(command, "*")
    if result.suggestion is not None:  # the line it offers allows this command and nothing wider
        assert entry_of(result.suggestion).strip() == command
    assert allowed(command, command)


@pytest.mark.parametrize(
    ("entry", "command"),
    [
        ("sed *", "sed -n 's/x/y/p' f"),
        ("sed *", "sed -i 's/a/b/g' src/main.py"),  # a file name with an `e` is not a script
        ("sed *", "sed --posix -n p f"),
        ("awk *", "awk -F, '{print $1}' data.csv"),
        ("awk *", "awk -v n=1 'NR==n' f"),
        ("git *", "git status --porcelain"),
        ("git *", "git diff --name-only HEAD~1"),
        ("git *", "git --no-pager log -1"),
        ("git *", "git add -A"),
        ("find *", "find . -name '*.py' -newer x"),
        ("tar *", "tar -czf out.tgz src"),
        ("tar *", "tar czf out.tgz src"),
        ("npm test", "npm test"),
        ("npm *", "npm test"),
        ("npm run lint *", "npm run lint -- --fix"),
        ("npx eslint *", "npx eslint --fix ."),
        ("uv run ruff *", "uv run ruff check ."),
        ("uvx ruff *", "uvx ruff check ."),
        ("python3 *", "python3 $CLAUDE_PROJECT_DIR/.hookcage/lint.py --fix"),
        ("python3 -m pytest *", "python3 -m pytest -q"),
        ("node *", "node scripts/check.js"),
        ("make *", "make lint"),
        ("sort *", "sort -u x"),
        ("jq *", "jq -r .tool_input.command"),
        ("*", "jq -e .ok"),
    ],
)
def test_plain_uses_of_runners_pass_their_star_entries(entry: str, command: str) -> None:
    assert allowed(command, entry)


@pytest.mark.parametrize("entry", ["python3 *", "python3 -m *", "npx *", "npm run *", "uv run *"])
def test_a_star_cannot_stand_for_the_program_a_runner_runs(entry: str) -> None:
    for command in ("python3 -m evilmod", "npx evil", "npm run evil", "uv run evil"):
        assert not allowed(command, entry)


def test_deny_entries_are_tried_on_what_a_wrapper_runs() -> None:
    assert not check("setarch x86_64 rm -rf /", "setarch x86_64 rm -rf /", deny=("rm *",)).allowed
    assert not check("prlimit rm x", "prlimit rm x", deny=("rm *",)).allowed


# --- warnings at `hookcage allow` and notes in the review -------------------------------------------


@pytest.mark.parametrize("entry", ["git *", "find *", "sed *", "awk *", "tar *", "make *", "npm *", "npx eslint *",
                                   "python3 *", "node *", "env *", "setarch *", "xargs *", "*", "uv run ruff *"])
def test_a_star_entry_for_a_program_that_runs_others_warns(entry: str) -> None:
    warning = entry_warning(entry)
    assert warning and "\n" not in warning


@pytest.mark.parametrize("entry", ["ls *", "echo *", "jq *", "npm test", "git status", "ruff *", "grep *"])
def test_entries_for_plain_programs_or_exact_commands_do_not_warn(entry: str) -> None:
    assert entry_warning(entry) is None


def test_the_review_notes_what_a_star_entry_lets_a_runner_do() -> None:
    result = check("git status", "git *")
    assert result.allowed and any("git runs programs" in note and "'git *'" in note for note in result.notes)
    assert check("git status", "git status").notes == ()
    assert check("ls -la", "ls *").notes == ()


HOOKCAGE = shutil.which("hookcage")


@pytest.mark.skipif(HOOKCAGE is None, reason="the hookcage console script is not installed")
def test_hookcage_allow_warns_for_a_runner_star_entry(tmp_path: Path) -> None:
    assert HOOKCAGE is not None
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HOOKCAGE_HOME": str(tmp_path / "home"),
           "HOOKCAGE_MANAGED_DIR": str(tmp_path / "managed")}
    (tmp_path / "home").mkdir()
    proc = subprocess.run([HOOKCAGE, "allow", "git *"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and "warning: git runs programs" in proc.stderr
    proc = subprocess.run([HOOKCAGE, "allow", "ls *"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and "warning" not in proc.stderr


# --- 3c. suggestions allow exactly their command ----------------------------------------------------


def test_issue_suggestion_for_a_quoted_star_stays_literal() -> None:
    result = check("python3 '*'")
    assert result.suggestion is not None
    entry = entry_of(result.suggestion)
    assert allowed("python3 '*'", entry)
    assert not allowed("python3 -m evilmod", entry)
    assert not allowed("python3 x.py", entry)
    assert not allowed("python3 *", entry)  # the glob is another command


_WORD_CHARS = st.sampled_from([*"ab-_./=:,@%+*?[]{}~$'\" \\;&|<>()!#\t", "x", "*", "-", "é"])
_WORDS = st.text(_WORD_CHARS, min_size=1, max_size=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=st.sampled_from(["tool", "rm", "python3", "git", "sed", "jq", "./run.sh", "$CLAUDE_PROJECT_DIR/x.sh"]),
       args=st.lists(st.tuples(_WORDS, st.booleans()), max_size=5))
def test_a_suggestion_allows_its_command_and_nothing_wider(program: str, args: list[tuple[str, bool]]) -> None:
    # quoted words (a literal `*` among them) and bare words (globs, options) in any mix
    words = [shlex.quote(word) if quoted else word for word, quoted in args]
    command = " ".join([program, *words])
    if "#" in command:  # a comment: what follows is no argument
        return
    result = check(command)
    if result.suggestion is None:
        return
    entry = entry_of(result.suggestion)
    assert allowed(command, entry), (command, entry)
    for i, (word, quoted) in enumerate(args):
        if quoted and "*" in word:  # a literal `*`: another word in its place is another command
            other = [*words[:i], "-m", *words[i + 1 :]]
            assert not allowed(" ".join([program, *other]), entry), (command, entry)
    if "#" not in command:  # (after a comment, `extra` is part of the comment)
        assert not allowed(f"{command} extra", entry) or entry.rstrip().endswith("*")


# --- 4. no input stalls the gate ------------------------------------------------------------------

BUDGET = 2.0
"""CPU seconds of this thread for any one input (unloaded: < 0.3 s at the byte bound). CPU time, not the
wall clock: a machine busy with other work (CI's other workers) slows the clock, not the work, and what
these tests guard against (work that grows faster than the input) shows in the CPU time alike."""


def timed(command: str, *allow: str) -> tuple[AllowCheck, float]:
    start = time.thread_time()
    result = check(command, *allow)
    return result, time.thread_time() - start


def test_issue_deep_command_substitution_is_refused_quickly() -> None:
    command = "echo " + "$(" * 6000 + "id" + ")" * 6000
    result, seconds = timed(command, "*", "echo *")
    assert not result.allowed and ("nests more than" in result.reason or "longer than" in result.reason)
    assert "nests more than" in check("echo " + "$(" * 3000 + "id" + ")" * 3000, "*", "echo *").reason
    assert seconds < BUDGET
    start = time.thread_time()
    assert literal_words(command, ROOT) is not None
    assert time.thread_time() - start < BUDGET


@pytest.mark.parametrize(
    "command",
    [
        "echo " + "$(" * 6000 + "id" + ")" * 6000,
        "echo " + "$(" * 3000 + "id" + ")" * 3000,
        "echo " + '"${x:-' * 3000 + "}\"" * 3000,
        "echo " + "`" * 6000,
        "echo " + "(" * 20000,
        "{ " * 10000 + "ls" + "; }" * 10000,
        "ls && " * 10000 + "ls",
        "a;" * 32000,
        "echo {" + "," * 60000,
        "ls " + "-" * 60000,
        "ls " + "'" + "x" * 60000 + "'",
        "cat <<EOF\n" + "x\n" * 30000 + "EOF",
        "echo " + '"' + "\\$" * 30000 + '"',
        "ls " + "a " * 30000,
        "x" * (MAX_COMMAND_BYTES + 1),
        # just inside the byte bound
        "ls " + "a " * (MAX_COMMAND_BYTES // 2 - 4),
        "a;" * (MAX_COMMAND_BYTES // 2 - 2),
        "ls && " * (MAX_COMMAND_BYTES // 6 - 1) + "ls",
        "ls " + "-" * (MAX_COMMAND_BYTES - 4),
        "echo " + "{," * (MAX_COMMAND_BYTES // 2 - 4),
        "echo " + '"$(' * 40 + "id" + ')"' * 40 + " x" * (MAX_COMMAND_BYTES // 2 - 200),
    ],
    ids=lambda c: f"{c[:12]!r}x{len(c)}",
)
def test_hostile_shapes_are_answered_within_the_bound(command: str) -> None:
    result, seconds = timed(command, "*", "ls *-*-*-*-*-*-*x", "echo *", "x*x*x*x*x*x*y")
    assert seconds < BUDGET, seconds
    start = time.thread_time()
    literal_words(command, ROOT)
    assert time.thread_time() - start < BUDGET
    assert isinstance(result.allowed, bool)


def test_bounds_fail_closed_with_a_reason() -> None:
    assert "longer than" in check("ls " + "a" * MAX_COMMAND_BYTES, "*").reason
    assert "syntax nodes" in check("a;" * (MAX_COMMAND_BYTES // 2 - 1), "*").reason
    assert "nests more than" in check("echo " + "$(" * (MAX_NESTING + 1) + "id" + ")" * (MAX_NESTING + 1)).reason
    # at the bound, an honest command is decided on its merits
    assert allowed("ls && " * (MAX_COMMAND_BYTES // 6 - 1) + "ls", "ls *")
    assert allowed("echo " + '"$(' * (MAX_NESTING // 2 - 1) + "id" + ')"' * (MAX_NESTING // 2 - 1),
                   "echo " + '"$(' * (MAX_NESTING // 2 - 1) + "id" + ')"' * (MAX_NESTING // 2 - 1))


def test_the_work_grows_linearly_with_the_input(monkeypatch: pytest.MonkeyPatch) -> None:
    # a step count, not a clock: each word is evaluated a bounded number of times
    from executor.gates.allowlist import words

    calls = 0
    real = words._evaluate_once

    def counting(*args: object) -> object:
        nonlocal calls
        calls += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(words, "_evaluate_once", counting)
    counts = []
    for n in (500, 1000, 2000):
        calls = 0
        check("echo " + " ".join(["'a b' $CLAUDE_PROJECT_DIR/x"] * n) + " | rm x", "echo *", deny=("curl *",))
        counts.append(calls)
    assert counts[1] <= 2 * counts[0] + 10 and counts[2] <= 2 * counts[1] + 10, counts


_SHELL_BITS = st.sampled_from(["$(", ")", "`", "${x:-", "}", "\"", "'", "{ ", "; }", "(", " && ", " | ", "ls", "a",
                               "*", "-", "\\", "\n", "<<E\n", "E\n", "$((", "))", " ", "[[ ", " ]]", "if x; then ",
                               "; fi", "{a,b}", "~"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(parts=st.lists(_SHELL_BITS, min_size=1, max_size=50), repeat=st.integers(1, 2000))
def test_random_deep_and_long_inputs_are_answered_within_the_bound(parts: list[str], repeat: int) -> None:
    command = ("".join(parts) * repeat)[:MAX_COMMAND_BYTES + 10]
    result, seconds = timed(command, "*", "ls *", "a*a*a*a*b *")
    assert seconds < BUDGET, (seconds, command[:80])
    assert "\n" not in result.reason


# --- the catalogue ------------------------------------------------------------------------------


def test_the_catalogue_classes_are_disjoint() -> None:
    assert not programs.WRAPPERS & programs.PLAIN
    assert not programs.WRAPPERS & set(programs.RUNNERS)
    assert not programs.PLAIN & set(programs.RUNNERS)
    for name in programs.PLAIN | set(programs.RUNNERS):
        assert programs.INTERPRETERS.fullmatch(name) is None, name


@pytest.mark.parametrize("name", ["python3", "python3.11", "perl5.36.0", "perl5.36-x86_64-linux-gnu", "node", "nodejs",
                                  "js", "pdb3", "pdb3.11"])
def test_interpreters_are_classified(name: str) -> None:
    assert programs.kind(name) == "interpreter"


@pytest.mark.parametrize("name", ["ld.so", "ld-linux-x86-64.so.2", "ld-linux.so.2", "ld-linux-aarch64.so.1",
                                  "ld-musl-x86_64.so.1", "ld64.so.2"])
def test_the_dynamic_loader_is_a_wrapper_under_any_name(name: str) -> None:
    assert programs.kind(name) == "wrapper"
