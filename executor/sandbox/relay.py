"""Under gVisor, a hook's stdout and stderr go through pipes of the sandbox's own kernel (pure: shell text).

Why: a container's stdout and stderr are pipes of the host (the engine's
shim reads them). gVisor writes to such a host pipe without blocking and
hands the program a short count when the pipe is full (runsc 20221219: at
most 64 KiB per ``write``), where Linux blocks until all of it is written.
A program that does not write the rest (CPython's unbuffered stdout, which
the runner image's ``PYTHONUNBUFFERED=1`` gives every Python hook; any
single ``write``) loses it without an error: a hook that printed 10 MB
reached hookcage as 64 KiB and a clean end of stream, recorded
``truncated: false``. gVisor's pipes between its own processes block as
Linux's do.

So under gVisor the hook's stdout and stderr are FIFOs in the container's
``/tmp`` (made before the hook starts, mode 0600, where nothing else has
run yet), each copied out by ``cat``, which writes the rest after a short
count (coreutils and busybox). The hook sees what it saw: pipes, its exit
status, its stdin. When the hook has exited, every other process of the
container but init, the shell, its parent and the two ``cat`` is killed
(``/proc`` walked until none is left; zombies skipped: the first pass kills
without reading any state, as dash's ``read`` costs a system call per byte
and each one is dear under gVisor; later passes read ``stat`` to skip the
zombies init has not reaped yet; the pool's watch, the shell's own child, is
killed by its pid first), as the end of a
direct run takes them: a background child holding the hook's stdout cannot
keep the run open; then the shell waits for the two ``cat`` to copy out
what is left in the pipes, and only then ends (the container with it).

It runs only in the container's own pid namespace (pid 1 is ``docker-init``
or ``podman-init``). An image without ``cat`` or ``mkfifo``: the hook runs
with the container's pipes as before (docs/sandbox.md says what that costs
under gVisor).
"""

from __future__ import annotations

RELAY_PIDS = 3
"""Processes the relay adds while the hook runs: the waiting shell and the two ``cat``."""

RELAY_VARIABLES = "_hc_rd _hc_r1 _hc_r2 _hc_rc _hc_p _hc_s _hc_k _hc_x _hc_pass _hc_wp"
"""The shell variables the relay sets: unset first (an image's environment may export one)."""

RELAY_FUNCTION = r"""
_hc_relay_start() {
    _hc_rd=/tmp/.hookcage-relay-$$
    _hc_r1=
    _hc_r2=
    _hc_x=
    { read -r _hc_x </proc/1/comm; } 2>/dev/null
    if { [ "$_hc_x" = docker-init ] || [ "$_hc_x" = podman-init ]; } \
        && command -v cat >/dev/null 2>&1 && command -v mkfifo >/dev/null 2>&1 \
        && mkfifo -m 600 "$_hc_rd-1" "$_hc_rd-2" 2>/dev/null; then
        cat <"$_hc_rd-1" &
        _hc_r1=$!
        cat <"$_hc_rd-2" >&2 &
        _hc_r2=$!
    fi
}
_hc_relay() {
    if [ -z "$_hc_r2" ]; then
        _hc_job "$@"
        _hc_rc=$?
        return 1
    fi
    _hc_job "$@" >"$_hc_rd-1" 2>"$_hc_rd-2"
    _hc_rc=$?
    if [ -n "${_hc_wp-}" ]; then
        kill -9 "$_hc_wp" 2>/dev/null
    fi
    _hc_pass=
    while :; do
        _hc_k=
        for _hc_p in /proc/[0-9]*; do
            _hc_p=${_hc_p#/proc/}
            case $_hc_p in 1 | "$$" | "$PPID" | "$_hc_r1" | "$_hc_r2" | "${_hc_wp-}") continue ;; esac
            if [ -n "$_hc_pass" ]; then
                _hc_s=
                { read -r _hc_s <"/proc/$_hc_p/stat"; } 2>/dev/null
                case ${_hc_s##*) } in '' | Z* | X*) continue ;; esac
            fi
            kill -9 "$_hc_p" 2>/dev/null && _hc_k=1
        done
        [ -n "$_hc_k" ] || break
        _hc_pass=1
    done
    wait
    return 0
}
"""
"""Defines ``_hc_relay_start`` and ``_hc_relay``. ``_hc_relay_start`` makes the FIFOs and starts the
two ``cat`` (the pool does it before its container says it is ready: no cost at the job's time);
``_hc_relay`` then runs the function ``_hc_job`` (defined by the caller; with the relay's arguments)
relayed and sets ``_hc_rc`` to its status. It returns 0 when it relayed (every other process is then
gone), 1 when it ran ``_hc_job`` directly (no ``cat``/``mkfifo``, or not in a container's own pid
namespace: ``_hc_relay_start`` started nothing)."""


def relayed_script(command_line: str) -> str:
    """Shell text running ``command_line`` through the relay, ending the shell with its status."""
    return (
        f"unset {RELAY_VARIABLES}; _hc_job() {{ {command_line}\n}}\n"
        f"{RELAY_FUNCTION}_hc_relay_start\n_hc_relay\nexit \"$_hc_rc\""
    )
