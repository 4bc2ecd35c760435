# hookcage-pool: the warm pool's job runner (executor/sandbox/jobrunner.py), run as python3 -I -S -c TEXT
"""The pooled container's program where the image has ``python3``: the bootstrap's job, in few system calls.

This file is not imported by hookcage: its text is the program a pooled
container runs (``python3 -I -S -c TEXT``, :func:`executor.sandbox.warmjob.bootstrap_command`).
It imports nothing but ``os``, ``sys``, ``select`` and ``_signal`` (``signal``'s C part); its
syntax is Python 3.5's, and on a ``python3`` older than 3.8 (no
``posix_spawn``) it hands over to the POSIX sh bootstrap, its first argument.

Why: under gVisor every system call of the container crosses the sandbox's
kernel (about 40 us each on this project's machine, ptrace platform), and
the POSIX ``sh`` bootstrap (:data:`executor.sandbox.warmjob.BOOTSTRAP`)
spends them freely: its ``read`` takes the job a byte per call (28 ms for a
700-byte job), the overlay check reads ``/proc/self/mountinfo`` the same way
(43 ms), and every step that forks (a subshell, ``head``, the output relay's
``cat``, the watch) costs 8-20 ms. This program does the same job with a
handful of calls, once its interpreter has started, which it does before the
container says it is ready (and which is the warm-up a Python hook gains
from).

What it does is the bootstrap's, step for step (docs/sandbox.md, "The warm
pool"); where they differ, the difference is said here:

- **Ready.** It runs the warm-ups it is given (``/bin/sh -c COMMAND`` from
  ``/``, no input, output thrown away), then prints ``hookcage-ready/py``.
  No job within the idle timeout (``SIGALRM``) and it exits.
- **The job** is protocol 4: the line ``hookcage-job/4 LENGTH`` (26 bytes,
  fixed width) and then LENGTH bytes holding protocol 3's lines after its
  first (the nonce, the numbers, the fields). It reads exactly those bytes:
  what follows is the hook's stdin, never read by this program (but for a
  counted stdin, which it feeds the hook through a pipe, and the drain on
  Podman). Anything malformed and it exits without a word: the pool runs the
  hook cold.
- **Overlays** (each reviewed file bound over the workspace) must still be
  mounted: the path is looked up, then ``/proc/self/mountinfo`` must list its
  mount point (read whole).
- **The hook** is ``/bin/sh -c COMMAND`` started with ``posix_spawn`` (a
  vfork: no copy of this process), in the job's directory, with the
  container's environment plus the job's entries, every signal at its
  default disposition (but glibc's two internal ones, 32 and 33, which its
  ``posix_spawn`` leaves ignored and glibc takes back when it uses them), and
  only fds 0, 1 and 2 (Python opens everything
  else close-on-exec). With ``relay`` (gVisor) its stdout and stderr are pipes
  of the sandbox's kernel that this program copies out, writing the rest
  after a short count; otherwise the hook writes to the container's streams
  itself.
- **The watch**: ``SIGALRM`` at the job's watch seconds kills every process
  of the container (``kill(-1, SIGKILL)``, this one last), as the
  bootstrap's watch does; the alarm also ends a write the host stopped
  reading.
- **The end**: when the hook has exited, every other process of the
  container is killed (in the container's own pid namespace only: pid 1 is
  ``docker-init`` or ``podman-init`` and is this program's parent), the relay
  copies what is left, stdin is drained on Podman, the cgroup's OOM kill
  count is read, and the end markers go to stdout and stderr. The exit status
  is the hook's (128 + N for a signal N, as a shell reports it).

The hook's process tree is smaller than under the shell bootstrap: no watch,
no ``cat`` and no ``head`` run beside it.
"""

import os
import select
import sys

signal = __import__("_signal")  # signal's C part (CPython 3.5 on): the module `signal` would load enum and more

READY = b"hookcage-ready/py\n"
TAG = b"hookcage-job/4 "
HEAD = len(TAG) + 11  # ten digits and a newline
MAX_JOB = 1 << 24
INITS = (b"docker-init", b"podman-init")
CHUNK = 65536
PYTHON_WARM_MODULES = ("json", "os", "re", "sys", "pathlib", "subprocess")
"""What the python3 warm-up imports: the modules hooks written in Python load first."""
WARMUPS = {
    "python3": "python3 -c 'import %s'" % ", ".join(PYTHON_WARM_MODULES),
}
"""Programs a pooled container runs once before it says it is ready, by name
(``warmjob.warmups``): a fresh container's first start of an interpreter reads
its files through the engine's storage (and under gVisor through its gofer)
for the first time; the hook's own start then finds them cached. Fixed
commands of the image, run from ``/`` with no input, before any job: no hook
data ever reaches them. (Here, for the job runner to read; the bootstrap has
them in its text.)"""
IN_PROCESS = {
    "python3": PYTHON_WARM_MODULES,
}
"""Warm-ups the job runner does itself, being ``python3``: it imports what the
command imports (and runs ``site`` as a plain start does), which reads the same
files into the sandbox's cache without starting a second interpreter (under
gVisor a start costs tens of milliseconds of CPU, spent while the pool refills)."""


def quit_now(status: int) -> None:
    """End this program at once (no cleanup: the container ends with it). Never returns
    (annotated ``None``: ``typing`` is not imported here)."""
    os._exit(status)


def read_exact(fd: int, size: int) -> bytes:
    """Exactly ``size`` bytes of ``fd``, never one more; a short stream ends the program (no job)."""
    parts = []  # type: list[bytes]
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            quit_now(0)
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``, the rest after a short count (gVisor's writes to a host pipe)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BrokenPipeError:
            return


def read_small(path: str) -> "bytes | None":
    """A small file of ``/proc`` or ``/sys`` read whole (None: unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        parts = []  # type: list[bytes]
        while True:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)


def init_name() -> "bytes | None":
    """The container's init (``docker-init``, ``podman-init``) when this program is its child, else None:
    only then does ``kill(-1)`` take this container's processes and nothing else."""
    comm = read_small("/proc/1/comm")
    if os.getppid() != 1 or comm is None or comm.strip() not in INITS:
        return None
    return comm.strip()


def kill_the_rest(init: "bytes | None") -> None:
    """Kill every process of the container but init and this one."""
    if init is not None:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass


def decimal(text: bytes) -> int:
    """A field that must be a decimal number; anything else ends the program (no job)."""
    if not text or not text.isdigit():
        quit_now(0)
    return int(text)


def default_signals() -> "set[int]":
    """Every signal a child can be given its default disposition for (Python ignores SIGPIPE and SIGXFSZ)."""
    return {int(number) for number in signal.valid_signals()} - {signal.SIGKILL, signal.SIGSTOP}


def warm_up(names: "list[str]") -> None:
    """Run each warm-up: in this process (``IN_PROCESS``) or as ``/bin/sh -c COMMAND`` from ``/``
    with no input and its output thrown away."""
    for name in names:
        if name in IN_PROCESS:
            # Whatever it would print (a broken .pth file) goes nowhere: the ready line comes first.
            saved = [os.dup(1), os.dup(2)]
            devnull = os.open("/dev/null", os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            try:
                import site

                site.main()
                for module in IN_PROCESS[name]:
                    __import__(module)
            except BaseException:  # a warm-up only warms: a failure costs the hook's start, never a result
                pass
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, devnull):
                os.close(fd)
            continue
        command = WARMUPS[name]
        devnull = os.open("/dev/null", os.O_RDWR)
        try:
            pid = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", command], dict(os.environ),
                                 file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0),
                                               (os.POSIX_SPAWN_DUP2, devnull, 1),
                                               (os.POSIX_SPAWN_DUP2, devnull, 2)],
                                 setsigdef=default_signals())
            os.waitpid(pid, 0)
        except OSError:
            pass
        os.close(devnull)


def overlays_in_place(pairs: "list[str]") -> bool:
    """Each overlay's path is looked up (under gVisor that is what drops a bind a rename made stale),
    then ``/proc/self/mountinfo`` must list its mount point (passed escaped, as mountinfo writes it)."""
    for pos in range(1, len(pairs), 2):
        os.path.exists(pairs[pos])
    mounts = set()
    for row in (read_small("/proc/self/mountinfo") or b"").split(b"\n"):
        parts = row.split(b" ")
        if len(parts) > 4:
            mounts.add(parts[4])
    return all(os.fsencode(pairs[pos]) in mounts for pos in range(0, len(pairs) - 1, 2))


class Job:
    """One job, read from stdin: protocol 4 (``warmjob.encode_job``)."""

    def __init__(self) -> None:
        head = read_exact(0, HEAD)
        if not head.startswith(TAG) or not head.endswith(b"\n"):
            quit_now(0)
        length = decimal(head[len(TAG):-1])
        if length > MAX_JOB:
            quit_now(0)
        lines = read_exact(0, length).split(b"\n")
        if len(lines) < 5 or lines.pop() != b"":
            quit_now(0)
        self.nonce = lines[0]
        if not self.nonce or self.nonce.strip(b"0123456789abcdef"):
            quit_now(0)
        entries = decimal(lines[1])
        self.counted = None if lines[2] == b"-" else decimal(lines[2])  # type: int | None
        self.watch = decimal(lines[3])
        self.rest = iter(lines[4:])
        self.cwd = self.field()
        self.command = self.field()
        self.env = dict(os.environb)
        for _ in range(entries):
            name, _, value = self.field().partition(b"=")
            self.env[name] = value

    def field(self) -> bytes:
        """A field: its number of lines, then those lines."""
        count = decimal(next(self.rest, b""))
        lines = [next(self.rest, None) for _ in range(count)]
        if None in lines:
            quit_now(0)
        return b"\n".join(line for line in lines if line is not None)


def run(job: Job, relay: bool, init: "bytes | None") -> int:
    """Run the hook (``/bin/sh -c COMMAND``) to its end; its exit status as a shell reports it."""
    actions = []
    feed = feed_read = None  # type: int | None
    if job.counted is not None:
        feed_read, feed = os.pipe()
        actions.append((os.POSIX_SPAWN_DUP2, feed_read, 0))
    relayed = {}  # type: dict[int, int]
    ends = []
    if relay:
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        actions += [(os.POSIX_SPAWN_DUP2, out_write, 1), (os.POSIX_SPAWN_DUP2, err_write, 2)]
        relayed = {out_read: 1, err_read: 2}
        ends = [out_write, err_write]
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    write_all(1, b"hookcage-job " + job.nonce + b"\n")
    try:
        hook = os.posix_spawn(b"/bin/sh", [b"/bin/sh", b"-c", job.command], job.env,
                              file_actions=actions, setsigdef=default_signals())
    except OSError:
        hook = None
    for fd in [*ends, *([feed_read] if feed_read is not None else [])]:
        os.close(fd)

    status = 127
    pending = b""
    left = job.counted or 0
    if feed is not None:
        os.set_blocking(feed, False)
    while hook is not None:
        if feed is not None and not pending and left == 0:
            os.close(feed)
            feed = None
        readers = [wake_read, *relayed]
        if feed is not None and not pending and left > 0:
            readers.append(0)
        writers = [feed] if feed is not None and pending else []
        readable, writable, _ = select.select(readers, writers, [])
        if 0 in readable:
            chunk = os.read(0, min(left, CHUNK))
            left = left - len(chunk) if chunk else 0
            pending += chunk
        if feed is not None and feed in writable:
            try:
                pending = pending[os.write(feed, pending):]
            except BlockingIOError:
                pass
            except BrokenPipeError:  # the hook closed its stdin: what is left of it is not read
                pending, left = b"", 0
        for fd in [fd for fd in relayed if fd in readable]:
            chunk = os.read(fd, CHUNK)
            if chunk:
                write_all(relayed[fd], chunk)
            else:
                os.close(fd)
                del relayed[fd]
        if wake_read in readable:
            try:
                os.read(wake_read, 512)
            except BlockingIOError:
                pass
        done, code = os.waitpid(hook, os.WNOHANG)
        if done == hook:
            status = 128 + os.WTERMSIG(code) if os.WIFSIGNALED(code) else os.WEXITSTATUS(code)
            hook = None
    if feed is not None:
        os.close(feed)
    # Every other process of the container goes: a background child cannot hold the run open.
    kill_the_rest(init)
    for fd, target in relayed.items():
        while True:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            write_all(target, chunk)
        os.close(fd)
    return status


def oom_kills() -> bytes:
    """The OOM kills the container's cgroup counted (v1 or v2), ``-`` if unreadable."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        text = read_small(path)
        if text is not None:
            for row in text.split(b"\n"):
                parts = row.split()
                if len(parts) == 2 and parts[0] == b"oom_kill":
                    return parts[1]
            break
    return b"-"


def main(argv: "list[str]") -> None:
    """``BOOTSTRAP IDLE relay|direct WARM-UPS [MOUNT-POINT PATH]...``"""
    if not hasattr(os, "posix_spawn") or not hasattr(os, "set_blocking"):
        # Older than Python 3.8: the POSIX sh bootstrap (the first argument) does the job.
        os.execv("/bin/sh", ["/bin/sh", "-c", argv[0], "hookcage-pool", *argv[1:]])
    idle, relay, warm, pairs = int(argv[1]), argv[2] == "relay", argv[3], argv[4:]

    signal.signal(signal.SIGALRM, lambda signum, frame: quit_now(0))  # no job came
    signal.alarm(max(1, idle))
    warm_up([name for name in warm.split(",") if name in WARMUPS])
    write_all(1, READY)
    job = Job()
    if pairs and not overlays_in_place(pairs):
        quit_now(0)
    try:
        os.chdir(job.cwd)
    except OSError:
        quit_now(0)
    init = init_name()

    def watch_out(signum: int, frame: object) -> None:
        kill_the_rest(init)
        quit_now(137)

    signal.signal(signal.SIGALRM, watch_out)  # the job's watch: also ends a write the host stopped reading
    signal.alarm(max(1, job.watch))
    status = run(job, relay, init)
    if init == b"podman-init" and job.counted is None:
        while os.read(0, CHUNK):  # Podman: stdin the hook left is read to its end (warmjob.BOOTSTRAP)
            pass
    end = b"hookcage-end " + job.nonce + b" " + str(status).encode() + b" " + oom_kills() + b"\n"
    write_all(1, end)
    write_all(2, end)
    quit_now(status)


if __name__ == "__main__":  # python3 -c TEXT runs it as __main__; an import runs nothing
    main(sys.argv[1:])
