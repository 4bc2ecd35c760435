"""Commands that run other commands: which words an entry must spell out, and what ``hookcage allow`` warns of (pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from executor.gates.allowlist import programs
from executor.gates.allowlist.entries import Need, compile_entry
from executor.gates.allowlist.words import Word, excerpt

# Builtins that change the shell for the commands after them: aliases, options,
# functions, and variables (`read PATH` repoints every later command).
SHELL_BUILTINS = frozenset({
    "export", "declare", "local", "readonly", "typeset", "alias", "unalias", "shopt", "set",
    "source", ".", "trap", "unset", "enable", "hash", "let", "read", "mapfile", "readarray",
    "getopts", "fc",
})  # fmt: skip
# Options that make an otherwise plain command run another program (or, for
# the builtins, assign a variable). Long options match their GNU abbreviations.
_RUNNING_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "printf": ("-v",),
    "wait": ("-p",),
    "find": ("-exec", "-execdir", "-ok", "-okdir"),
    "rg": ("--pre",),
    "fd": ("-x", "-X", "--exec", "--exec-batch"),
    "fdfind": ("-x", "-X", "--exec", "--exec-batch"),
    "tar": ("--to-command", "--checkpoint-action", "--use-compress-program", "-I", "--info-script",
            "--new-volume-script", "-F", "--rsh-command", "--rmt-command"),
    "rmt-tar": ("--to-command", "--checkpoint-action", "--use-compress-program", "-I", "--info-script",
                "--new-volume-script", "-F", "--rsh-command", "--rmt-command"),
    "rsync": ("-e", "--rsh", "--rsync-path"),
    "scp": ("-S", "-o", "-F", "-J"),
    "sftp": ("-S", "-o", "-F", "-J", "-D"),
    "sort": ("--compress-program",),
    "split": ("--filter",),
    "install": ("--strip-program",),
    "diff3": ("--diff-program",),
    "sdiff": ("--diff-program",),
    "zic": ("-y",),
    "zip": ("-TT", "--unzip-command"),
    "prove": ("--exec", "-e"),
    "tape": ("-r", "--require"),
    "less": ("--lesskey-file", "--lesskey-src"),
    "dpkg": ("--pre-invoke", "--post-invoke", "--status-logger"),
    "apt": ("-o", "--option", "-c", "--config-file"),
    "apt-get": ("-o", "--option", "-c", "--config-file"),
    "apt-cache": ("-o", "--option", "-c", "--config-file"),
    "apt-cdrom": ("-o", "--option", "-c", "--config-file"),
    "apt-config": ("-o", "--option", "-c", "--config-file"),
    "apt-mark": ("-o", "--option", "-c", "--config-file"),
    "make": ("--eval", "-E"),
    "gmake": ("--eval", "-E"),
    "pytest": ("-p",),
}  # fmt: skip


def _option_hits(word: str, option: str) -> bool:
    if option.startswith("--"):
        name = word.partition("=")[0]
        return len(name) > 2 and name.startswith("--") and option.startswith(name)  # GNU abbreviations
    if len(option) == 2:  # -c, -cfoo, and bundled: -ix
        return word.startswith("-") and not word.startswith("--") and option[1] in word[1:]
    return word == option or word.startswith(option + "=")


def _options_hit(base: str, words: Sequence[Word], options: Sequence[str]) -> Need | None:
    for word in words:
        for option in options:
            if _option_hits(word.value, option):
                return Need(f"the option `{excerpt(word.value)}` of `{base}` can run other programs")
    return None


def need_of(words: Sequence[Word]) -> Need | None:
    """Why these words may only be allowed by an entry that spells them out, or ``None``."""
    base = words[0].value.rsplit("/", 1)[-1]
    kind = programs.kind(base)
    if base in SHELL_BUILTINS:
        return Need(f"`{base}` changes the shell itself")
    if kind == "wrapper":
        return Need(f"`{base}` runs the command in its arguments")
    if kind == "interpreter":
        return _interpreter_need(base, words)
    special = _SPECIAL.get(base)
    if special is not None:
        need = special(base, words)
        if need is not None:
            return need
    return _options_hit(base, words[1:], _RUNNING_OPTIONS.get(base, ()))


def _interpreter_need(base: str, words: Sequence[Word]) -> Need | None:
    """``python3 x.py`` runs a file (trust hashes it); ``python3 -m mod`` the module the entry names; anything else, code."""
    if len(words) < 2:
        return Need(f"`{base}` without a script file runs code from its input")
    first = words[1]
    if base.startswith(("python", "pypy")) and first.value == "-m":
        if len(words) < 3 or words[2].value.startswith("-") or words[2].active:
            return Need(f"`{base} -m` without a module name runs code that cannot be checked")
        return Need(f"`{base} -m {excerpt(words[2].value)}` runs that module: the entry must name it", prefix=3)
    if first.value.startswith("-"):
        return Need(f"`{base} {excerpt(first.value)}` runs code that cannot be checked")
    if first.active:
        return Need(f"`{base}` runs the script `{excerpt(first.value)}` names: the entry must spell it out", prefix=2)
    return None


def _first_operand(words: Sequence[Word], start: int = 1) -> int:
    """Index of the first word at or after ``start`` that is not an option (``len(words)`` if none)."""
    i = start
    while i < len(words) and words[i].value.startswith("-") and words[i].value != "-":
        if words[i].value == "--":
            return i + 1
        i += 1
    return i


_GIT_GLOBAL_OK = frozenset({
    "--no-pager", "-P", "--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs",
    "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks", "--no-advice", "--version", "--help",
    "-h", "-v",
})  # fmt: skip
_GIT_COMMANDS = frozenset({
    "add", "am", "annotate", "apply", "archive", "blame", "branch", "bundle", "cat-file", "check-attr",
    "check-ignore", "check-mailmap", "check-ref-format", "checkout", "checkout-index", "cherry", "cherry-pick",
    "clean", "clone", "column", "commit", "commit-graph", "commit-tree", "count-objects", "describe", "diff",
    "diff-files", "diff-index", "diff-tree", "fast-export", "fetch", "for-each-ref", "format-patch", "fsck",
    "gc", "get-tar-commit-id", "grep", "hash-object", "init", "interpret-trailers", "log", "ls-files",
    "ls-remote", "ls-tree", "mailinfo", "mailsplit", "merge", "merge-base", "merge-file", "merge-tree",
    "mktag", "mktree", "multi-pack-index", "mv", "name-rev", "notes", "pack-refs", "prune", "pull", "push",
    "range-diff", "read-tree", "rebase", "reflog", "remote", "repack", "replace", "rerere", "reset", "restore",
    "rev-list", "rev-parse", "revert", "rm", "shortlog", "show", "show-branch", "show-ref", "sparse-checkout",
    "stash", "status", "stripspace", "switch", "symbolic-ref", "tag", "update-index", "update-ref",
    "verify-commit", "verify-pack", "verify-tag", "version", "whatchanged", "worktree", "write-tree",
})  # fmt: skip
# git commands and their options that run a program given to them
_GIT_RUNNING: Mapping[str, tuple[str, ...]] = {
    "clone": ("-c", "--config", "--template", "-u", "--upload-pack"),
    "init": ("--template",),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack", "-s", "--strategy"),
    "ls-remote": ("-u", "--upload-pack"),
    "push": ("--receive-pack", "--exec"),
    "archive": ("--exec", "--remote"),
    "remote": ("--upload-pack",),
    "rebase": ("-x", "--exec", "-i", "--interactive", "-s", "--strategy"),
    "merge": ("-s", "--strategy"),
    "cherry-pick": ("-s", "--strategy"),
    "revert": ("-s", "--strategy"),
    "grep": ("-O", "--open-files-in-pager"),
}


def _git_need(base: str, words: Sequence[Word]) -> Need | None:
    i = 1
    while i < len(words) and words[i].value.startswith("-"):
        if words[i].value not in _GIT_GLOBAL_OK:
            return Need(f"the option `{excerpt(words[i].value)}` of `git` can run other programs or read other config")
        i += 1
    if i >= len(words):
        return None
    sub = words[i]
    if sub.active or sub.value not in _GIT_COMMANDS:
        return Need(f"`git {excerpt(sub.value)}` is not a plain git command: it can be an alias or a git-* program, "
                     "or it runs other programs")
    return _options_hit(f"git {sub.value}", words[i + 1 :], _GIT_RUNNING.get(sub.value, ()))


def _sed_need(base: str, words: Sequence[Word]) -> Need | None:
    """A sed script runs commands only with the letter ``e`` (the ``e`` command, the ``s///e`` flag)."""
    scripts: list[Word] = []
    operand_seen = False
    i = 1
    while i < len(words):
        word, value = words[i], words[i].value
        i += 1
        if value == "--":
            break
        if value.startswith("--"):
            name, eq, arg = value.partition("=")
            if name in ("--expression",):
                if eq:
                    scripts.append(Word(arg, (), frozenset(word.active)))
                elif i < len(words):
                    scripts.append(words[i])
                    i += 1
            elif name == "--line-length" and not eq:
                i += 1
            elif name not in _SED_LONG_OK:
                return Need(f"the option `{excerpt(value)}` of `sed` can run or read other scripts")
            continue
        if value.startswith("-") and value != "-":
            for j, letter in enumerate(value[1:], 1):
                if letter in "nrEsuz":
                    continue
                if letter == "i":
                    break  # -i[SUFFIX]
                if letter in "el":
                    tail = value[j + 1 :]
                    if tail:
                        given = Word(tail, (), frozenset())
                    elif i < len(words):
                        given = words[i]
                        i += 1
                    else:
                        break
                    if letter == "e":
                        scripts.append(given)
                    break
                return Need(f"the option `{excerpt(value)}` of `sed` can run or read other scripts")
            continue
        if not operand_seen and not scripts:
            scripts.append(word)  # the script, unless a later -e makes it a file (checked either way)
        operand_seen = True
    for script in scripts:
        if script.active or "e" in script.value:
            return Need(f"the sed script `{excerpt(script.value)}` may run commands (`e`)")
    return None


_SED_LONG_OK = frozenset({
    "--quiet", "--silent", "--regexp-extended", "--separate", "--unbuffered", "--null-data", "--posix",
    "--sandbox", "--debug", "--in-place", "--follow-symlinks", "--line-length", "--help", "--version",
})  # fmt: skip


def _awk_need(base: str, words: Sequence[Word]) -> Need | None:
    """An awk program runs commands only through ``system``, ``|`` or gawk's ``@`` (``@load``, indirect calls)."""
    i = 1
    while i < len(words):
        value = words[i].value
        if value == "--":
            i += 1
            break
        if not value.startswith("-") or value == "-":
            break
        if value in ("-F", "-v"):
            i += 2
        elif value.startswith(("-F", "-v")) and len(value) > 2:
            i += 1
        else:
            return Need(f"the option `{excerpt(value)}` of `{base}` can run or load other programs")
    if i >= len(words):
        return Need(f"`{base}` without a program reads it from a file")
    program = words[i]
    if program.active or any(s in program.value for s in ("system", "|", "@", "\\\n", "\\\r")):
        return Need(f"the {base} program `{excerpt(program.value)}` may run commands (system(), pipes, @)")
    return None


def _tar_need(base: str, words: Sequence[Word]) -> Need | None:
    if len(words) > 1 and not words[1].value.startswith("-") and any(c in words[1].value for c in "IF"):
        return Need(f"the option `{excerpt(words[1].value)}` of `tar` can run other programs")
    for word in words[1:]:
        if ":" in word.value:
            return Need(f"`{excerpt(word.value)}` names a remote archive, which `tar` reaches by running rsh")
    return None


def _package_runner_need(base: str, words: Sequence[Word], start: int = 1) -> Need | None:
    """``npx PKG ...``: the package (a program) must be named by the entry, and what it is given is checked too."""
    if start >= len(words) or words[start].value.startswith("-") or words[start].active:
        return Need(f"`{base}` runs a package's program: the entry must spell out which")
    inner = need_of(words[start:])
    if inner is not None:
        return Need(inner.why, None if inner.prefix is None else start + inner.prefix)
    return Need(f"`{base} {excerpt(words[start].value)}` runs that program: the entry must name it", prefix=start + 1)


_NPM_OK = frozenset({
    "-s", "--silent", "-q", "--quiet", "--if-present", "--workspaces", "--ws", "--json", "--color",
    "--no-color", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel",
})  # fmt: skip


def _npm_need(base: str, words: Sequence[Word]) -> Need | None:
    i = 1
    if i < len(words) and words[i].value.startswith("-"):
        return Need(f"the option `{excerpt(words[i].value)}` before npm's command can change what it runs")
    if i >= len(words):
        return None
    sub = words[i].value
    end = next((j for j in range(i + 1, len(words)) if words[j].value == "--"), len(words))
    for word in words[i + 1 : end]:
        name = word.value.partition("=")[0]
        if name.startswith("-") and name not in _NPM_OK:
            return Need(f"the option `{excerpt(word.value)}` of `npm` can change what it runs")
    if words[i].active or sub in ("exec", "x", "explore", "edit", "config", "c", "set", "help", "dlx", "init", "create"):
        return Need(f"`{base} {excerpt(sub)}` runs a program given to it")
    if sub in ("run", "run-script", "rum", "urn"):
        if i + 1 >= len(words) or words[i + 1].value.startswith("-") or words[i + 1].active:
            return Need(f"`{base} {sub}` runs a package.json script: the entry must name it")
        return Need(f"`{base} {sub} {excerpt(words[i + 1].value)}` runs that script: the entry must name it", prefix=i + 2)
    return None


def _uv_need(base: str, words: Sequence[Word]) -> Need | None:
    if len(words) > 1 and words[1].value.startswith("-"):
        return Need(f"the option `{excerpt(words[1].value)}` before uv's command can change what it runs")
    for word in words[1:]:
        if _option_hits(word.value, "--python") or _option_hits(word.value, "-p"):
            return Need(f"the option `{excerpt(word.value)}` of `uv` names the interpreter it runs")
    sub = words[1].value if len(words) > 1 else ""
    if sub == "run":
        return _package_runner_need("uv run", words, 2)
    if sub == "tool" and len(words) > 2 and words[2].value == "run":
        return _package_runner_need("uv tool run", words, 3)
    return None


def _generic_exec_words(base: str, words: Sequence[Word]) -> Need | None:
    """``ip netns exec``, ``tc exec``, ``ip -batch``: words that run commands."""
    for word in words[1:]:
        if word.value in ("exec", "-b", "-batch", "-force") or word.active:
            return Need(f"`{base} ... {excerpt(word.value)}` can run other programs")
    return None


def _openssl_need(base: str, words: Sequence[Word]) -> Need | None:
    for word in words[1:]:
        if any(s in word.value for s in ("engine", "provider", "-config", "-conf")):
            return Need(f"the option `{excerpt(word.value)}` of `openssl` loads code")
    return None


def _make_need(base: str, words: Sequence[Word]) -> Need | None:
    for word in words[1:]:
        if "=" in word.value and not word.value.startswith("-"):
            return Need(f"the variable `{excerpt(word.value)}` given to `{base}` can change the commands it runs")
    return None


def _less_need(base: str, words: Sequence[Word]) -> Need | None:
    for word in words[1:]:
        if word.value.startswith("+") or word.value.startswith("-+"):
            return Need(f"`{excerpt(word.value)}` gives `{base}` commands, which can run programs")
    return None


_SPECIAL: Mapping[str, Callable[[str, Sequence[Word]], Need | None]] = {
    "git": _git_need,
    "sed": _sed_need,
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _awk_need),
    **dict.fromkeys(("tar", "rmt-tar"), _tar_need),
    **dict.fromkeys(("npx", "uvx", "bunx", "pipx"), lambda base, words: _package_runner_need(base, words)),
    **dict.fromkeys(("npm", "pnpm", "yarn"), _npm_need),
    "uv": _uv_need,
    **dict.fromkeys(("ip", "tc"), _generic_exec_words),
    "openssl": _openssl_need,
    **dict.fromkeys(("make", "gmake"), _make_need),
    **dict.fromkeys(("less", "more", "pager", "zless", "zmore"), _less_need),
}


def dash_glob(word: Word) -> bool:
    """Can this expanding word become a word that starts with ``-`` (an option) once the shell expands it?"""
    if not word.active:
        return False
    return word.value.startswith("-") or (0 in word.active and not word.value.startswith("~"))


def entry_warning(entry: str) -> str | None:
    """What a new allow entry lets run beyond what it shows, for ``hookcage allow`` (one line), or ``None``."""
    parsed = compile_entry(entry, "$CLAUDE_PROJECT_DIR")
    if parsed is None:
        return None
    if not parsed.words:
        return ("`*` allows every program hookcage does not know to run others, with any arguments, and every "
                "program it does not know at all (project scripts, tools of a custom image)")
    if parsed.exact or parsed.words[0].wild:
        return None
    base = parsed.words[0].value.rsplit("/", 1)[-1]
    kind = programs.kind(base)
    if base in SHELL_BUILTINS or kind == "wrapper":
        return (f"this entry allows nothing: `{base}` runs the command in its arguments (or changes the shell), "
                "which only an entry spelling out every word allows")
    if kind == "interpreter":
        return (f"`{base}` runs whatever script file it is given; `-c`, `-e`, `-m` and other options "
                "need an entry that spells them out")
    if kind == "runner":
        return (f"{programs.RUNNERS[base]}: the forms that run a program given on the command line need an exact "
                "entry, but what it reads from files still runs (only the sandbox bounds it)")
    return None
