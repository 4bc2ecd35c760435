"""Which programs run other programs: the catalogue behind the allow-list's ``*`` entries (pure data).

Every program the runner image ships (and the usual tools of other images) is
in exactly one class:

* :data:`WRAPPERS` run the command given in their arguments (``env``,
  ``timeout``, ``setarch``, the dynamic loader, shells ...). No entry with a
  ``*`` ever allows them: only an entry that spells out every word.
* :data:`INTERPRETERS` run code: a script file named first is fine (trust
  hashes it); ``-c``, ``-e``, stdin and other options are not.
* :data:`RUNNERS` can run other programs through some options, through the
  program text they take (``sed``'s ``e``, ``awk``'s ``system()``), through
  subcommands (``git`` aliases, ``npm exec``) or through files they read
  (a Makefile, ``package.json``, ``eslint.config.js``). A ``*`` entry allows
  them without the executing forms, which need an exact entry, and
  ``hookcage allow`` and the review say what such an entry still lets run.
* :data:`PLAIN` run no other program, whatever their arguments.

``tests/integration/test_allowlist_image.py`` lists every executable in the
runner image and fails when one is in no class, so this list cannot fall
behind the image. A program in no class (a project script, a tool of a custom
image) is allowed by a ``*`` entry like a plain one; the sandbox bounds it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

WRAPPERS = frozenset({
    # shells
    "sh", "bash", "rbash", "dash", "zsh", "ksh", "ksh93", "mksh", "ash", "csh", "tcsh", "fish", "busybox",
    "git-shell",
    # run a command given in their arguments
    "env", "timeout", "xargs", "sudo", "doas", "su", "runuser", "sg", "newgrp", "login", "pkexec",
    "nohup", "nice", "ionice", "chrt", "taskset", "uclampset", "choom", "prlimit", "setpriv", "capsh",
    "setarch", "i386", "x86_64", "linux32", "linux64", "arm64", "aarch64", "uname26",
    "stdbuf", "setsid", "chroot", "unshare", "nsenter", "runcon", "flock", "watch", "parallel",
    "script", "scriptlive", "logsave", "fstab-decode", "run-parts", "start-stop-daemon", "switch_root",
    "sulogin", "agetty", "getty", "debconf", "debconf-apt-progress", "nyc", "istanbul",
    "strace", "ltrace", "unbuffer", "fakeroot", "firejail", "bwrap", "systemd-run", "dbus-run-session",
    "time", "exec", "eval", "command", "builtin", "coproc",
    "ssh", "cpan", "cpan5.36-x86_64-linux-gnu", "gdb", "valgrind", "catchsegv", "sotruss", "memusage",
    "xtrace", "ld.so", "ld-linux.so.2", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
    "docker", "podman", "kubectl", "vim", "vi", "view", "ex", "nvim", "ed", "emacs",
    # its SQL arguments (and stdin) take dot-commands: `.shell CMD`, `.system CMD`, `.load LIB`
    "sqlite3",
})  # fmt: skip
"""Programs whose arguments name a command they run: never allowed by a ``*`` entry."""

_LOADER = re.compile(r"ld(?:-linux)?(?:-[\w.-]+)?\.so(?:\.\d+)*|ld64\.so(?:\.\d+)*|ld-musl-[\w.-]+\.so(?:\.\d+)*")

INTERPRETERS = re.compile(
    r"(?:python|pypy)[0-9.]*|pdb[0-9.]*|perl[0-9.]*(?:-[\w-]+)?|ruby[0-9.]*|node|nodejs|js|deno|bun"
    r"|php[0-9.]*|lua[0-9.]*|luajit|Rscript|tclsh[0-9.]*|wish[0-9.]*|guile[0-9.]*|ts-node|tsx"
)
"""Interpreters: a script file as the first argument runs that file; anything else runs unseen code."""

RUNNERS: Mapping[str, str] = {
    "find": "find runs programs with -exec/-execdir/-ok/-okdir",
    "sed": "sed runs commands with its `e` command and the `s///e` flag",
    "awk": "awk runs commands with system(), pipes and extensions",
    "gawk": "gawk runs commands with system(), pipes and extensions",
    "mawk": "mawk runs commands with system() and pipes",
    "nawk": "nawk runs commands with system() and pipes",
    "git": "git runs programs through -c, aliases, hooks and the repository's config",
    "scalar": "scalar runs git",
    "git-receive-pack": "git-receive-pack runs the repository's hooks",
    "git-upload-pack": "git-upload-pack runs programs named in the repository's config",
    "git-upload-archive": "git-upload-archive runs programs named in the repository's config",
    "tar": "tar runs programs with --to-command, --use-compress-program/-I, --checkpoint-action and remote archives",
    "rmt-tar": "tar runs programs with --to-command and --use-compress-program",
    "sort": "sort runs the program given by --compress-program",
    "split": "split runs the command given by --filter",
    "install": "install runs the program given by --strip-program",
    "diff3": "diff3 runs the program given by --diff-program",
    "sdiff": "sdiff runs --diff-program and an editor",
    "zic": "zic runs the command given by -y",
    "patch": "patch runs ed on ed-style diffs, and version-control checkouts",
    "make": "make runs the recipes of the Makefile it reads",
    "gmake": "make runs the recipes of the Makefile it reads",
    "npm": "npm runs package.json scripts, lifecycle scripts and packages (npm exec)",
    "npx": "npx runs any package's program",
    "npm-arborist": "arborist runs lifecycle scripts",
    "arborist": "arborist runs lifecycle scripts",
    "pacote": "pacote runs prepare scripts of git dependencies",
    "node-gyp": "node-gyp runs make, python and the commands of binding.gyp",
    "gyp": "gyp runs the commands of .gyp files",
    "eslint": "eslint runs its JavaScript config file and plugins",
    "webpack": "webpack runs its JavaScript config file and loaders",
    "babeljs": "babel runs its JavaScript config file and plugins",
    "babeljs-7": "babel runs its JavaScript config file and plugins",
    "tape": "tape runs test files and --require modules",
    "prove": "prove runs test scripts and --exec programs",
    "uv": "uv runs commands (uv run, uv tool run) and build backends",
    "uvx": "uvx runs any package's program",
    "pydoc3": "pydoc imports (runs) the modules it documents",
    "pydoc3.11": "pydoc imports (runs) the modules it documents",
    "pydoc": "pydoc imports (runs) the modules it documents",
    "ldd": "ldd runs the dynamic loader on the file, which can run it",
    "openssl": "openssl loads engines and providers (shared objects) named by options or its config",
    "ip": "ip runs commands with `netns exec`",
    "tc": "tc runs commands with `exec`",
    "apt": "apt runs the hooks of -o options and its config",
    "apt-get": "apt-get runs the hooks of -o options and its config",
    "apt-cache": "apt-cache reads -o options and its config",
    "apt-cdrom": "apt-cdrom runs the hooks of -o options and its config",
    "apt-config": "apt-config reads -o options and its config",
    "apt-key": "apt-key runs gpg",
    "apt-mark": "apt-mark runs the hooks of -o options and its config",
    "dpkg": "dpkg runs maintainer scripts and --pre-invoke/--post-invoke commands",
    "dpkg-reconfigure": "dpkg-reconfigure runs maintainer scripts",
    "dpkg-preconfigure": "dpkg-preconfigure runs maintainer scripts",
    "invoke-rc.d": "invoke-rc.d runs init scripts",
    "service": "service runs init scripts",
    "deb-systemd-invoke": "deb-systemd-invoke runs systemctl",
    "deb-systemd-helper": "deb-systemd-helper runs systemctl",
    "installkernel": "installkernel runs the hooks in /etc/kernel",
    "update-ca-certificates": "update-ca-certificates runs the hooks in /etc/ca-certificates/update.d",
    "c_rehash": "c_rehash runs openssl on file names (and once ran them as commands)",
    "adduser": "adduser runs adduser.local", "addgroup": "addgroup runs adduser.local",
    "deluser": "deluser runs deluser.local", "delgroup": "delgroup runs deluser.local",
    "fsck": "fsck runs the fsck.TYPE helper found on PATH", "mkfs": "mkfs runs the mkfs.TYPE helper found on PATH",
    "mount": "mount runs mount.TYPE helpers", "umount": "umount runs umount.TYPE helpers",
    "e2scrub": "e2scrub runs lvm and e2fsck", "e2scrub_all": "e2scrub_all runs e2scrub",
    "vipw": "vipw runs $EDITOR", "vigr": "vigr runs $EDITOR",
    "more": "more runs shell commands (`!`) when it has a terminal", "pager": "the pager runs shell commands (`!`)",
    "less": "less runs shell commands (`!`, LESSOPEN)", "man": "man runs its pager and preprocessors",
    "zless": "zless runs less", "zmore": "zmore runs more",
    "bashbug": "bashbug runs $EDITOR", "gawkbug": "gawkbug runs $EDITOR",
    "perlbug": "perlbug runs $EDITOR and a mailer", "perlthanks": "perlthanks runs $EDITOR and a mailer",
    "perldoc": "perldoc runs its pager and formatter modules", "instmodsh": "instmodsh runs shell commands",
    "zip": "zip runs the command given by -TT/--unzip-command", "rsync": "rsync runs the program given by -e/--rsh",
    "scp": "scp runs the program given by -S", "sftp": "sftp runs the program given by -S",
    "rg": "rg runs the program given by --pre", "fd": "fd runs commands with -x/-X", "fdfind": "fd runs commands with -x/-X",
    "pnpm": "pnpm runs package.json scripts and packages (pnpm exec/dlx)",
    "yarn": "yarn runs package.json scripts and packages (yarn exec/dlx)",
    "bunx": "bunx runs any package's program",
    "pipx": "pipx runs any package's program", "pip": "pip runs build backends", "pip3": "pip runs build backends",
    "poetry": "poetry runs commands (poetry run) and build backends",
    "tox": "tox runs the commands of its config", "nox": "nox runs the sessions of noxfile.py",
    "pre-commit": "pre-commit runs the hooks of its config",
    "cargo": "cargo runs build scripts and cargo-* programs", "go": "go runs programs (go run, go generate, -toolexec)",
    "pytest": "pytest runs test files, conftest.py and plugins", "jest": "jest runs test files and its config",
    "vitest": "vitest runs test files and its config", "prettier": "prettier runs its JavaScript config and plugins",
    "tsc": "tsc runs no programs but loads plugins from its config",
}  # fmt: skip
"""Programs that can run other programs through options, program text, subcommands or the files they read."""

PLAIN = frozenset({
    # coreutils
    "[", "arch", "b2sum", "base32", "base64", "basename", "basenc", "cat", "chcon", "chgrp", "chmod", "chown",
    "cksum", "comm", "cp", "csplit", "cut", "date", "dd", "df", "dir", "dircolors", "dirname", "du", "echo",
    "expand", "expr", "factor", "false", "fmt", "fold", "groups", "head", "hostid", "id", "join", "link", "ln",
    "logname", "ls", "md5sum", "md5sum.textutils", "mkdir", "mkfifo", "mknod", "mktemp", "mv", "nl", "nproc",
    "numfmt", "od", "paste", "pathchk", "pinky", "pr", "printenv", "printf", "ptx", "pwd", "readlink",
    "realpath", "rm", "rmdir", "seq", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "shred",
    "shuf", "sleep", "stat", "stty", "sum", "sync", "tac", "tail", "tee", "test", "touch", "tr", "true",
    "truncate", "tsort", "tty", "uname", "unexpand", "uniq", "unlink", "users", "vdir", "wc", "who", "whoami",
    "yes", "dnsdomainname", "domainname", "hostname", "nisdomainname", "ypdomainname", "kill",
    # text, files, archives
    "grep", "egrep", "fgrep", "rgrep", "diff", "cmp", "jq", "file", "shellcheck", "ruff", "gzip", "gunzip",
    "zcat", "uncompress", "zcmp", "zdiff", "zgrep", "zegrep", "zfgrep", "zforce", "znew", "gzexe", "tarcat",
    "rmt", "iconv", "which", "which.debianutils", "tempfile", "savelog", "ischroot", "mcookie", "getopt",
    "rev", "look", "namei", "rename.ul", "hardlink", "fincore", "fallocate", "isosize", "whereis", "col",
    "colrm", "column", "hexdump", "xxd", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzip", "tree",
    "gpgv", "getconf", "getent", "locale", "localedef", "iconvconfig", "ldconfig", "pldd", "zdump",
    "tzselect", "debugfs", "hookcage-slim", "bc",
    # procps, util-linux, system tools (nothing of theirs runs a program named by an argument)
    "ps", "pgrep", "pkill", "pidof", "pidwait", "pmap", "pwdx", "skill", "snice", "slabtop", "tload", "top",
    "uptime", "vmstat", "w", "free", "sysctl", "killall5", "renice", "dmesg", "logger", "mesg", "wall",
    "last", "lastb", "lastlog", "faillog", "faillock", "utmpdump", "lsblk", "lscpu", "lsfd", "lsipc", "lsirq",
    "lslocks", "lslogins", "lsmem", "lsns", "findmnt", "findfs", "blkid", "blkdiscard", "blkzone",
    "blockdev", "chcpu", "chmem", "ctrlaltdel", "addpart", "delpart", "partx", "resizepart", "losetup",
    "mkswap", "swapon", "swapoff", "swaplabel", "wipefs", "zramctl", "fsfreeze", "fstrim", "hwclock",
    "rtcwake", "ldattach", "readprofile", "wdctl", "ipcmk", "ipcrm", "ipcs", "mountpoint", "pivot_root",
    "setterm", "scriptreplay", "lsattr", "chattr", "badblocks", "dumpe2fs", "e2freefrag", "e2fsck",
    "e2image", "e2label", "e2mmpstatus", "e2undo", "e4crypt", "e4defrag", "filefrag", "mke2fs",
    "mklost+found", "resize2fs", "tune2fs", "fsck.cramfs", "fsck.ext2", "fsck.ext3", "fsck.ext4",
    "fsck.minix", "mkfs.bfs", "mkfs.cramfs", "mkfs.ext2", "mkfs.ext3", "mkfs.ext4", "mkfs.minix",
    "getcap", "setcap", "getpcaps", "clear", "clear_console", "reset", "tabs", "tput", "tset", "tic",
    "toe", "infocmp", "infotocap", "captoinfo",
    # iproute2 (ip and tc are runners)
    "bridge", "ss", "nstat", "rtacct", "lnstat", "ctstat", "rtstat", "arpd", "devlink", "genl", "rdma",
    "dcb", "vdpa", "tipc", "routel", "rtmon",
    # accounts (they change files under /etc, which the sandbox's root file system refuses)
    "chage", "chfn", "chsh", "chpasswd", "chgpasswd", "cppw", "cpgr", "expiry", "gpasswd", "groupadd",
    "groupdel", "groupmems", "groupmod", "grpck", "grpconv", "grpunconv", "newusers", "nologin", "passwd",
    "pwck", "pwconv", "pwunconv", "useradd", "userdel", "usermod", "shadowconfig", "update-passwd",
    "add-shell", "remove-shell", "update-shells", "mkhomedir_helper", "pam-auth-update", "pam_getenv",
    "pam_namespace_helper", "pam_timestamp_check", "unix_chkpwd", "unix_update", "pwhistory_helper",
    # Debian tools that run nothing given to them
    "dpkg-deb", "dpkg-divert", "dpkg-fsys-usrunmess", "dpkg-maintscript-helper", "dpkg-query",
    "dpkg-realpath", "dpkg-split", "dpkg-statoverride", "dpkg-trigger", "update-alternatives",
    "update-rc.d", "debconf-communicate", "debconf-copydb", "debconf-escape", "debconf-set-selections",
    "debconf-show", "py3clean", "py3compile", "py3versions", "pygettext3", "pygettext3.11",
    # perl's documentation and data tools
    "corelist", "enc2xs", "encguess", "h2ph", "h2xs", "json_pp", "libnetcfg", "perlivp", "piconv",
    "pl2pm", "pod2html", "pod2man", "pod2text", "pod2usage", "podchecker", "ptar", "ptardiff", "ptargrep",
    "shasum", "splain", "streamzip", "xsubpp", "zipdetails",
    # node tools that only parse or print
    "acorn", "babeljs-7-external-helpers", "babeljs-7-parser", "babeljs-external-helpers", "babeljs-parser",
    "browserslist", "escodegen", "esgenerate", "esparse", "esvalidate", "handlebars", "js-yaml", "jsesc",
    "json5", "nanoid", "qrcode-terminal", "regjsparser", "rimraf", "semver", "terser",
})  # fmt: skip
"""Programs known to run no other program, whatever their arguments."""

# node-based tools that are interpreters under another name
_NODE_ALIASES = frozenset({"babeljs-node", "babeljs-7-node"})


def kind(name: str) -> str | None:
    """``"wrapper"``, ``"interpreter"``, ``"runner"``, ``"plain"``, or ``None`` for a program not in the catalogue.

    ``name`` is the command's base name (``/usr/bin/env`` is ``env``).
    """
    if name in WRAPPERS or _LOADER.fullmatch(name) or name in _NODE_ALIASES:
        return "wrapper"
    if INTERPRETERS.fullmatch(name):
        return "interpreter"
    if name in RUNNERS:
        return "runner"
    if name in PLAIN:
        return "plain"
    return None
