"""The warm pool's job protocol (pure): the bootstrap, the job, the end markers.

The container side is ``BOOTSTRAP``, a POSIX sh script; the host side
encodes one job (``encode_job``) and reads the output back
(``JobReader``). No I/O here: ``executor.sandbox.poolwire`` moves the bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from executor.sandbox.conventions import SELF_END_GRACE, STDERR
from executor.sandbox.jobrunner import WARMUPS
from executor.sandbox.relay import RELAY_FUNCTION, RELAY_VARIABLES

JOB_TAG = "hookcage-job/3"
RUNNER_JOB_TAG = "hookcage-job/4"
"""Protocol 4, :mod:`executor.sandbox.jobrunner`'s: protocol 3's bytes after its first line,
counted by a fixed-width first line (``hookcage-job/4 LENGTH``), so that they are read in one go."""
WARMUP = "".join(
    f"case $_hc_warm in *,{name},*) {{ {command}; }} </dev/null >/dev/null 2>&1 ;; esac\n"
    for name, command in WARMUPS.items()
)
_WORD = re.compile(r"[^\s'\"`;&|()<>$={}]+")
READY_LINE = b"hookcage-ready\n"
"""What the bootstrap prints on stdout once its idle watchdog is armed."""
RUNNER_READY_LINE = b"hookcage-ready/py\n"
"""What :mod:`executor.sandbox.jobrunner` prints instead: its jobs are protocol 4."""
LAUNCH = (
    'if command -v python3 >/dev/null 2>&1; then exec python3 -I -S -c "$@"; fi\n'
    'shift\n_hc_l=$1\nshift\nexec /bin/sh -c "$_hc_l" hookcage-pool "$@"\n'
)
"""The pooled container's command where a job runner is offered: ``python3`` runs it
(its first argument; the bootstrap, second, is its fallback on a Python older than
3.8), else ``/bin/sh`` runs the bootstrap with the arguments it always had."""
ACK_PREFIX = b"hookcage-job "
END_PREFIX = b"hookcage-end "


# --------------------------------------------------------------------------
# The bootstrap (runs in the container; POSIX sh, dash and busybox ash)
# --------------------------------------------------------------------------

BOOTSTRAP = r"""
unset _hc_idle _hc_l _hc_n _hc_v _hc_i _hc_e _hc_k _hc_x _hc_mp _hc_ok _hc_out
unset _hc_nonce _hc_nenv _hc_nin _hc_d _hc_c _hc_rc _hc_oom _hc_f _hc_o _hc_ov
unset _hc_w _hc_wt _hc_wf _hc_ws _hc_warm
unset """ + RELAY_VARIABLES + r"""
_hc_o=${OLDPWD+set}
_hc_ov=${OLDPWD-}
_hc_idle=$1
_hc_out=$2
_hc_warm=,$3,
shift 3
""" + WARMUP + r"""
""" + RELAY_FUNCTION + r"""
if [ "$_hc_out" = relay ]; then
    _hc_relay_start
fi
_hc_w=
_hc_wf=/tmp/.hookcage-watch-$$
if command -v mkfifo >/dev/null 2>&1 && command -v sleep >/dev/null 2>&1 \
    && mkfifo -m 600 "$_hc_wf" 2>/dev/null; then
    exec 4<>"$_hc_wf" 5<"$_hc_wf"
    rm -f "$_hc_wf" 2>/dev/null
    (
        exec 4>&- 5<&-
        _hc_x=
        if command -v timeout >/dev/null 2>&1; then
            _hc_x=$(timeout "$_hc_idle" /bin/sh -c 'IFS= read -r s && printf %s "$s"')
            _hc_ws=$?
        else
            IFS= read -r _hc_x
            _hc_ws=124
        fi
        case $_hc_x in '' | *[!0-9]*)
            case $_hc_ws in 124 | 137 | 143) kill -9 $$ ;; esac
            exit 0 ;;
        esac
        sleep "$_hc_x" && read -r _hc_x </proc/1/comm \
            && { [ "$_hc_x" = docker-init ] || [ "$_hc_x" = podman-init ]; } && kill -9 -1
    ) <&5 >/dev/null 2>&1 &
    _hc_wp=$!
    exec 5<&-
    _hc_w=1
fi
printf 'hookcage-ready\n'
if [ -n "$_hc_w" ]; then
    IFS= read -r _hc_l
elif command -v timeout >/dev/null 2>&1; then
    _hc_l=$(timeout "$_hc_idle" /bin/sh -c 'IFS= read -r l && printf %s "$l"')
else
    IFS= read -r _hc_l
fi
[ "$_hc_l" = hookcage-job/3 ] || exit 0
IFS= read -r _hc_nonce || exit 0
IFS= read -r _hc_nenv || exit 0
IFS= read -r _hc_nin || exit 0
IFS= read -r _hc_wt || exit 0
case $_hc_nonce in '' | *[!0-9a-f]*) exit 0 ;; esac
case $_hc_nenv in '' | *[!0-9]*) exit 0 ;; esac
case $_hc_wt in '' | *[!0-9]*) exit 0 ;; esac
case $_hc_nin in - | 0) ;; '' | *[!0-9]*) exit 0 ;; *) command -v head >/dev/null 2>&1 || exit 0 ;; esac
_hc_field() {
    IFS= read -r _hc_n || exit 0
    case $_hc_n in '' | *[!0-9]*) exit 0 ;; esac
    _hc_v=
    _hc_i=0
    while [ "$_hc_i" -lt "$_hc_n" ]; do
        IFS= read -r _hc_l || exit 0
        if [ "$_hc_i" -eq 0 ]; then
            _hc_v=$_hc_l
        else
            _hc_v="$_hc_v
$_hc_l"
        fi
        _hc_i=$((_hc_i + 1))
    done
}
while [ "$#" -ge 2 ]; do
    [ -e "$2" ] || :
    _hc_ok=
    while read -r _hc_x _hc_x _hc_x _hc_x _hc_mp _hc_x; do
        if [ "$_hc_mp" = "$1" ]; then
            _hc_ok=1
            break
        fi
    done </proc/self/mountinfo
    [ -n "$_hc_ok" ] || exit 0
    shift 2
done
_hc_field
_hc_d=$_hc_v
_hc_field
_hc_c=$_hc_v
set --
_hc_e=0
while [ "$_hc_e" -lt "$_hc_nenv" ]; do
    _hc_field
    set -- "$@" "$_hc_v"
    _hc_e=$((_hc_e + 1))
done
cd -P -- "$_hc_d" 2>/dev/null || exit 0
if [ -n "$_hc_o" ]; then OLDPWD=$_hc_ov; else unset OLDPWD; fi
unset SHLVL
_hc_exec() {
    for _hc_x do
        case ${_hc_x%%=*} in
        '' | [0-9]* | *[!A-Za-z0-9_]* | _hc_* | PPID | PWD | OLDPWD | IFS | OPTIND | OPTARG | LINENO | PS1 | PS2 | PS4 | ENV)
            exec env -- "$@" /bin/sh -c "$_hc_c" ;;
        esac
    done
    for _hc_x do
        export "$_hc_x"
    done
    exec /bin/sh -c "$_hc_c"
}
_hc_job() {
    if [ "$_hc_nin" = - ]; then
        (_hc_exec "$@")
    elif [ "$_hc_nin" = 0 ]; then
        : | (_hc_exec "$@")
    else
        (exec 3<&0; head -c "$_hc_nin" <&3 3<&- &) | (_hc_exec "$@")
    fi
}
if [ -n "$_hc_w" ]; then
    printf '%s\n' "$_hc_wt" >&4
    exec 4>&-
else
    ( (sleep "$_hc_wt" && read -r _hc_x </proc/1/comm \
        && { [ "$_hc_x" = docker-init ] || [ "$_hc_x" = podman-init ]; } && kill -9 -1) \
        </dev/null >/dev/null 2>&1 & )
fi
printf 'hookcage-job %s\n' "$_hc_nonce"
if [ "$_hc_out" = relay ]; then
    _hc_relay "$@"
else
    _hc_job "$@"
    _hc_rc=$?
fi
_hc_x=
if [ "$PPID" = 1 ] && read -r _hc_x </proc/1/comm && { [ "$_hc_x" = docker-init ] || [ "$_hc_x" = podman-init ]; }; then
    kill -9 -1 2>/dev/null
fi
if [ "$_hc_x" = podman-init ] && [ "$_hc_nin" = - ] && command -v cat >/dev/null 2>&1; then
    cat >/dev/null 2>&1
fi
_hc_oom=-
for _hc_f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
    if [ -r "$_hc_f" ]; then
        while read -r _hc_k _hc_x; do
            if [ "$_hc_k" = oom_kill ]; then _hc_oom=$_hc_x; fi
        done <"$_hc_f"
        break
    fi
done
printf 'hookcage-end %s %s %s\n' "$_hc_nonce" "$_hc_rc" "$_hc_oom"
printf 'hookcage-end %s %s %s\n' "$_hc_nonce" "$_hc_rc" "$_hc_oom" >&2
exit "$_hc_rc"
"""
"""The pooled container's program; its arguments are the idle timeout, ``relay`` or
``direct`` (how the hook's output leaves the container: through the sandbox's own
pipes under gVisor, :mod:`executor.sandbox.relay`) and, per overlay, its mount
point as mountinfo shows it (escaped) and as a path.

Before the job it checks each overlay is still mounted: the path is looked up
first, then ``/proc/self/mountinfo`` must list the mount point. The lookup is
what makes the check hold under gVisor: its kernel keeps its own mount table
and notices a file renamed over on the host (an editor's save, ``git
checkout``) only when a path walk revalidates the name, and only then drops
the bind that was over it; under runc the host kernel drops it at the rename.
Without the lookup gVisor's mountinfo still listed the bind and the hook's
first read found the new, unreviewed file.

Before it prints ``READY_LINE`` it starts its *watch*: a background
subshell reading from a FIFO that the bootstrap holds open (made in
``/tmp``, opened at both ends, then unlinked: nothing is left in ``/tmp``
for the hook to see). The watch waits for one line under ``timeout``
(coreutils and busybox have it): none within ``idle_timeout`` seconds
(no job came: coreutils' ``timeout`` says 124, busybox's 143) and it kills
the bootstrap, so that the container exits by itself; a watch that could
not read its line for another reason (a hook whose fork bomb left it no
process to start: ``timeout`` could not fork its reader, 125) only ends,
and the job's deadline is then the pool's on the host, as it is whenever
the watch cannot start its ``sleep``; given the job's watch seconds, it
sleeps them, then kills every process of the container (``kill -9 -1``, only when pid 1 is the engine's
init), as the cold path's ``docker.self_ending`` does. The bootstrap reads
the job straight from its stdin (its end, when the pool's process dies,
ends the bootstrap) and hands the watch its seconds with a ``printf`` into
the FIFO: no process is started between the job's arrival and the hook.
Without ``mkfifo`` or ``sleep`` in the image it falls back to reading the
first line under ``timeout`` and starting the cold path's watch per job.
The line is read by a child (``read`` reads byte by byte: nothing past the
line is consumed); nothing is ever waited for with the ``wait`` builtin,
which dash can miss a child's exit in.

The hook's stdin is the rest of the bootstrap's (up to the end of input the
pool makes by half-closing the connection) when the job's stdin length is
``-`` (an engine on a unix socket: the hook sees what a cold run's sees), or,
over TLS, exactly the bytes the job header counts, sent right after the
job: ``head -c N`` (coreutils and busybox) copies them into a pipe and ends
it, so the hook sees end-of-input without the stream itself ever ending
(over TLS the client cannot half-close its side of the engine's attach
connection reliably; the framing never needs it). ``head`` runs in the
background of a subshell that exits at once: the bootstrap waits for the
hook only, not for a ``head`` stuck writing to a pipe that a hook's
background child holds open and never reads; the ``kill -9 -1`` after the
hook takes it. No stdin: the hook's is an empty pipe (``: |``), as a cold
run's is. An image without
``head`` takes a job with stdin no further than its header (no
acknowledgement: the run goes cold).

Every variable it sets is unset first (had the image's environment one, it
would be exported). The hook runs in a subshell that exports the job's
``NAME=VALUE`` entries and execs ``/bin/sh -c COMMAND``: one exec fewer than
``env`` (which costs most under gVisor); an entry whose name is not a plain
shell name, is one of the shell's own (``PPID``, ``PWD``, ``IFS``...) or
starts with ``_hc_`` goes through ``env -- NAME=VALUE ... /bin/sh -c
COMMAND`` instead. The hook's environment is the container's (what the
cold path gives, minus the request's part) plus the job's entries;
``OLDPWD`` (which ``cd`` sets) is put back and ``SHLVL`` (which bash and
busybox sh raise) removed. ``env``/``export`` rather than ``env -i``:
``-i`` would drop the image's own ``ENV`` and ``HOSTNAME``, which a cold
run has.

After the hook, ``kill -9 -1`` (every process of the container's user but
pid 1 and itself; dash's ``kill`` takes ``-s KILL -1``'s ``-1`` for an
option and kills nothing) does what a cold run's end does to leftovers; it runs only
when pid 1 is ``docker-init`` (Podman's: ``podman-init``) and the bootstrap's parent, i.e. in the
container's own pid namespace. Never run this script anywhere else.

Under Podman (pid 1 is ``podman-init``) a stdin that runs until end of input
is then read to its end (``cat >/dev/null``) before the end markers: conmon
closes its attach socket when the container exits, and with stdin the hook
left unread still queued in it the kernel reports a reset to Podman before
the output queued the other way, so Podman dropped the hook's last bytes and
the markers (seen with ``head -c 10; echo`` and 10 MiB of stdin). The hook
and everything it started are gone by then: the drain is the bootstrap's."""


def bootstrap_command(idle_timeout: float, mount_points: Sequence[str] = (), *, relay: bool = False,
                      warm: Iterable[str] = (), runner: str | None = None) -> list[str]:
    """The pooled container's command: ``/bin/sh -c BOOTSTRAP`` and its arguments.

    With ``runner`` (the text of :mod:`executor.sandbox.jobrunner`), the
    container runs it under the image's ``python3`` when it has one (it then
    says so with :data:`RUNNER_READY_LINE`, and its jobs are protocol 4), and
    the bootstrap otherwise (``LAUNCH``).

    Args:
        idle_timeout: seconds after which the container exits if no job came.
        mount_points: the paths where the engine mounts the overlays (each
            is passed escaped as ``/proc/self/mountinfo`` shows it, then as is).
        relay: run the hook with its stdout and stderr relayed through the
            sandbox's own pipes (under gVisor: :mod:`executor.sandbox.relay`).
        warm: names of :data:`WARMUPS` to run before the container is ready
            (others are ignored).
    """
    seconds = max(1, math.ceil(idle_timeout))
    pairs = [arg for point in mount_points for arg in (mountinfo_escape(point), point)]
    names = ",".join(sorted(set(warm) & WARMUPS.keys())) or "-"
    args = [str(seconds), "relay" if relay else "direct", names, *pairs]
    if runner is not None:
        return ["/bin/sh", "-c", LAUNCH, "hookcage-pool", runner, BOOTSTRAP, *args]
    return ["/bin/sh", "-c", BOOTSTRAP, "hookcage-pool", *args]


def job_environment(run: Mapping[str, str], created: Mapping[str, str]) -> dict[str, str]:
    """The entries of a run's environment a job must send to a spare created with ``created``.

    The hook's environment is the container's plus the job's entries, so an
    entry the container already has with the same value need not travel:
    under gVisor every byte of the job costs the bootstrap's ``read`` a
    system call (about 37 us each on this project's machine, 25 ms for a
    Claude Code hook's 666-byte job). Pure.
    """
    return {name: value for name, value in run.items() if created.get(name) != value}


def warmups(command: str) -> frozenset[str]:
    """The :data:`WARMUPS` a hook command would gain from: the interpreters it names.

    A word of the command that is one of them (``python3 x.py``; ``python``
    counts as ``python3``), or a script path whose suffix says its
    interpreter (``"$DIR"/hooks/check.py``). Python only for now: its gain is
    measured (docs/sandbox.md); a warm-up costs every container of its key
    CPU while the pool refills, which the suite and a busy session feel. A guess that only
    decides what a pooled container runs ahead: a wrong one costs a warm-up,
    never a result.
    """
    found: set[str] = set()
    for word in _WORD.findall(command):
        name = word.rsplit("/", 1)[-1]
        if name in WARMUPS:
            found.add(name)
        elif name == "python" or name.startswith("python3.") or name.endswith(".py"):
            found.add("python3")
    return frozenset(found)


def mountinfo_escape(path: str) -> str:
    """``path`` as the kernel writes a mount point in ``/proc/*/mountinfo``."""
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in path)


def _field(value: str) -> bytes:
    lines = value.encode("utf-8", "surrogateescape").split(b"\n")
    return str(len(lines)).encode() + b"\n" + b"".join(line + b"\n" for line in lines)


def encode_job(nonce: str, cwd: str, command: str, env: Mapping[str, str],
               stdin_length: int | None = None, *, watch: int, protocol: int = 3) -> bytes:
    """The bytes that hand one job to the bootstrap (sent right before the hook's stdin).

    Five header lines (``hookcage-job/3``, the nonce, the number of
    environment entries, the length in bytes of the hook's stdin that
    follows the job, or ``-`` when ``stdin_length`` is None: until end of
    input, which the sender makes by half-closing; then ``watch``, the
    seconds after which the container ends itself whatever runs in it),
    then fields: the working directory, the command (run as
    ``/bin/sh -c COMMAND``), then the ``NAME=VALUE`` entries. A field is
    its number of lines and those lines: ``read -r`` takes them back
    without any decoding, and no value is ever part of the script's text.
    The hook's stdin is sent right after these bytes; nothing after it is
    ever read.

    With ``protocol`` 4 it is (:data:`RUNNER_JOB_TAG`), for the job
    runner: the same bytes, but the first line is ``hookcage-job/4`` and the
    length of the rest in ten digits.

    Raises:
        ValueError: a nonce that is not lowercase hex, a NUL byte anywhere, a
            negative stdin length or a watch under one second.
    """
    if stdin_length is not None and stdin_length < 0:
        raise ValueError("the stdin length cannot be negative")
    if watch < 1:
        raise ValueError("the watch must be at least one second")
    if not re.fullmatch(r"[0-9a-f]{8,64}", nonce):
        raise ValueError("the nonce must be 8 to 64 lowercase hex digits")
    entries = [f"{name}={value}" for name, value in env.items()]
    if any("\0" in text for text in (cwd, command, *entries)):
        raise ValueError("a job field holds a NUL byte")
    length = "-" if stdin_length is None else str(stdin_length)
    body = f"{nonce}\n{len(entries)}\n{length}\n{int(watch)}\n".encode() + b"".join(
        _field(text) for text in (cwd, command, *entries))
    if protocol == 4:
        return f"{RUNNER_JOB_TAG} {len(body):010d}\n".encode() + body
    return f"{JOB_TAG}\n".encode() + body


def watch_seconds(timeout: float) -> int:
    """Seconds after a job starts at which its container ends itself: as a cold run's (``docker.self_ending``)."""
    return math.ceil(timeout) + SELF_END_GRACE


# --------------------------------------------------------------------------
# Reading a job's output: acknowledgement and end markers (pure)
# --------------------------------------------------------------------------

_COMPLETE = re.compile(rb"([0-9]{1,3}) ([0-9]{1,10}|-)\n")
_PARTIAL = re.compile(rb"(?:[0-9]{1,3}(?: (?:[0-9]{0,10}|-))?)?")


class EndScanner:
    """Finds the end marker of one job at the very end of one stream.

    ``feed`` returns the bytes that are surely output and holds back a tail
    that is, or may become, ``hookcage-end NONCE STATUS OOM\\n``. A marker
    counts only while nothing follows it: more bytes on the stream turn a
    held marker back into output. A marker with another nonce is output.
    """

    def __init__(self, nonce: str) -> None:
        self._head = END_PREFIX + nonce.encode() + b" "
        self._window = len(self._head) + 3 + 1 + 10 + 1
        self._held = b""
        self.ended = False
        self.status: int | None = None
        self.oom_kills: int | None = None

    def feed(self, data: bytes | memoryview) -> bytes | memoryview:
        """Take the next bytes of the stream; return what is surely output.

        Only the last bytes can hold a marker: a long piece is not copied.
        """
        if not data:
            return b""
        buf = self._held + bytes(data) if self._held else data
        self.ended, self.status, self.oom_kills = False, None, None
        low = max(0, len(buf) - self._window)
        tail = bytes(buf[low:])
        start = tail.rfind(self._head)
        if start >= 0:
            rest = tail[start + len(self._head) :]
            complete = _COMPLETE.fullmatch(rest)
            if complete or _PARTIAL.fullmatch(rest):
                self._held = tail[start:]
                if complete:
                    self.ended = True
                    self.status = int(complete.group(1))
                    oom = complete.group(2)
                    self.oom_kills = None if oom == b"-" else int(oom)
                return buf[: low + start]
        keep = _prefix_suffix(tail, self._head)
        self._held = tail[len(tail) - keep :]
        return buf[: len(buf) - keep]

    def finish(self, *, marker_is_output: bool = False) -> bytes:
        """End of stream: what was held back and is output (a final marker is not,
        unless ``marker_is_output``)."""
        held, self._held = self._held, b""
        if self.ended and not marker_is_output:
            return b""
        return held


def _prefix_suffix(data: bytes, head: bytes) -> int:
    """Length of the longest end of ``data`` that is a proper start of ``head``."""
    for size in range(min(len(data), len(head) - 1), 0, -1):
        if data.endswith(head[:size]):
            return size
    return 0


class JobReader:
    """Splits a pooled run's demultiplexed output into the hook's output and the protocol.

    Stdout starts with ``hookcage-job NONCE\\n`` (the bootstrap runs the hook
    right after printing it: without it the hook never ran); both streams end
    with an end marker. Feed pieces as they come, in any order between
    streams, cut anywhere.
    """

    def __init__(self, nonce: str) -> None:
        self._ack = ACK_PREFIX + nonce.encode() + b"\n"
        self._ack_seen = b""
        self._ack_failed = False
        self.acknowledged = False
        self.out = EndScanner(nonce)
        self.err = EndScanner(nonce)

    @property
    def done(self) -> bool:
        """The hook ran and both streams have ended with this job's marker."""
        return self.acknowledged and self.out.ended and self.err.ended

    @property
    def status(self) -> int | None:
        """The hook's exit status, once done."""
        return self.out.status if self.done else None

    @property
    def oom_kills(self) -> int | None:
        """OOM kills in the container's cgroup during the job (None: unknown), once done."""
        if not self.done:
            return None
        counts = [c for c in (self.out.oom_kills, self.err.oom_kills) if c is not None]
        return max(counts) if counts else None

    def feed(self, stream: int, data: bytes | memoryview) -> bytes | memoryview:
        """Take a piece of ``stream`` (``STDOUT`` or ``STDERR``); return the hook's bytes in it."""
        if stream == STDERR:
            return self.err.feed(data)
        if self.acknowledged or self._ack_failed:
            return self.out.feed(data)
        need = len(self._ack) - len(self._ack_seen)
        self._ack_seen += bytes(data[:need])
        rest = bytes(data[need:])
        if not self._ack.startswith(self._ack_seen):
            # Not our bootstrap's first line: none of it is protocol, and no
            # acknowledgement can come any more.
            self._ack_failed = True
            seen, self._ack_seen = self._ack_seen, b""
            return self.out.feed(seen + rest)
        if len(self._ack_seen) < len(self._ack):
            return b""
        self.acknowledged = True
        return self.out.feed(rest)

    def finish(self) -> tuple[bytes, bytes]:
        """End of the attach stream: the held-back bytes of stdout and stderr."""
        raw = not self.acknowledged  # then no marker can be the bootstrap's
        out = self._ack_seen if raw else b""
        self._ack_seen = b""
        return (
            out + self.out.finish(marker_is_output=raw),
            self.err.finish(marker_is_output=raw),
        )
