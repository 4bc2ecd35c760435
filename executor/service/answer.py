"""``hookcage dispatch``'s answer, from the agent's stdin bytes: shared by its two shells.

The in-process CLI (:mod:`executor.cli`) and the daemon (:mod:`executor.service.daemon`)
both answer an event through :func:`dispatch_bytes`, so they print the same
answer, exit with the same code and write the same run log. Neither shell
imports the other: what they share lives here.

Importing this module is cheap (``json``, ``os``, the errors): the heavy
parts (settings, executor, protocol) are imported when an event is answered.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from executor.errors import HookcageError, OwnDirInProject, PayloadError

if TYPE_CHECKING:
    from executor.core.protocol import AgentAnswer
    from executor.executor import HookExecutor
    from executor.settings import Settings

MAX_PAYLOAD = 256 * 1024 * 1024
"""Bytes of the agent's stdin read for one event; a larger payload is refused (and blocks)."""
MAX_PAYLOAD_DEPTH = 200
"""How deeply arrays and objects may nest in a payload; deeper is refused (and blocks)."""


class PayloadBound(PayloadError):
    """The payload is past a documented bound (size, nesting): refused quickly, and it blocks.

    A gate that cannot judge an event must not let it through: whatever
    ``fail_closed`` says, this answer is a block (exit 2) where the event can block.
    """

_TRUE = ("1", "true", "yes", "on")


def fail_closed_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``HOOKCAGE_FAIL_CLOSED`` asks to block when no verdict can be produced.

    For the errors that come before the settings load (or instead of them);
    once they load, ``Settings.fail_closed`` decides.

    Args:
        environ: the environment to read (default ``os.environ``; the daemon
            passes its caller's).
    """
    env = os.environ if environ is None else environ
    return env.get("HOOKCAGE_FAIL_CLOSED", "").strip().lower() in _TRUE


def internal_error(exc: BaseException) -> str:
    """The one line an unexpected exception becomes (without the ``hookcage: error:`` prefix)."""
    return f"internal error: {type(exc).__name__}: {exc} (set HOOKCAGE_DEBUG=1 for a traceback)"


def read_payload(raw: bytes) -> dict[str, Any]:
    """Decode the agent's stdin into a JSON object.

    Raises:
        PayloadError: it is empty, not JSON, or not an object.
    """
    if len(raw) > MAX_PAYLOAD:
        raise PayloadBound(f"stdin holds more than {MAX_PAYLOAD // (1024 * 1024)} MiB: refused")
    if not raw.strip():
        raise PayloadError("no payload on stdin: the agent must send the event's JSON")
    try:
        payload = json.loads(raw)
    except RecursionError as exc:
        raise PayloadBound(f"stdin JSON nests deeper than {MAX_PAYLOAD_DEPTH} levels: refused") from exc
    except ValueError as exc:
        # JSONDecodeError, UnicodeDecodeError, integers past the digit limit, deep nesting.
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise PayloadError(f"stdin is not valid JSON{where}") from exc
    if not isinstance(payload, dict):
        raise PayloadError(f"stdin must be a JSON object, not {type(payload).__name__}")
    if _deeper_than(payload, MAX_PAYLOAD_DEPTH):
        raise PayloadBound(f"stdin JSON nests deeper than {MAX_PAYLOAD_DEPTH} levels: refused")
    return payload


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether objects and arrays nest more than ``limit`` deep (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            if level > limit:
                return True
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _refuse_own_dirs_in_project(raw: bytes, environ: Mapping[str, str] | None) -> None:
    """hookcage's home or managed directory inside the project (by the environment and the
    payload's cwd) is refused before its ``config.toml`` is read: the repository would hold
    the settings that decide whether a broken or hostile file blocks."""
    from executor.config import project_root, refuse_own_dirs_in_project
    from executor.settings import default_home, default_managed_dir

    try:
        payload = read_payload(raw)
    except HookcageError:
        payload = {}
    refuse_own_dirs_in_project(default_home(), default_managed_dir(), project_root(payload, environ))


def dispatch_bytes(
    event: str | None,
    raw: bytes,
    *,
    agent: str | None = None,
    settings: Settings | None = None,
    make_executor: Callable[[Settings], HookExecutor] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[AgentAnswer, HookExecutor | None]:
    """Answer one agent event from its stdin bytes: what ``hookcage dispatch`` prints.

    The CLI and the daemon both answer through this function, so both agree.

    Args:
        event: the EVENT argument (None: the payload's ``hook_event_name``).
        raw: the agent's stdin.
        agent: the ``--agent`` name whose dialect the answer is written in
            (None: recognised from the payload, Claude Code by default).
        settings: the settings to use; by default :func:`load_settings`, whose
            errors become a non-blocking (or, fail-closed, blocking) answer.
        make_executor: builds the executor from the settings (default
            ``HookExecutor(settings)``).
        environ: where the project root is read from before the settings are
            (the daemon's caller's environment; default this process's).

    Returns:
        The answer, and the executor when one ran: the caller runs its
        ``deferred`` async hooks after answering, then closes it.
    """
    from executor.core.protocol import fail_verdict
    from executor.dialects import get_dialect, resolve_dialect
    from executor.executor import HookExecutor
    from executor.settings import load_settings

    fail_closed = fail_closed_env()
    try:
        if agent is not None:
            get_dialect(agent)  # an unknown agent is reported before anything else
        if settings is None:
            _refuse_own_dirs_in_project(raw, environ)  # before reading the settings they hold
            settings = load_settings()
        fail_closed = settings.fail_closed
        payload = read_payload(raw)
        dialect = resolve_dialect(agent, payload)
        spec = dialect.resolve_event(event, payload)
        canonical = dialect.canonical_payload(spec, payload)
        executor = (make_executor or HookExecutor)(settings)
        try:
            verdict = executor.dispatch(spec, canonical, defer_async=True, dialect=dialect, raw=payload)
            return dialect.render(spec, verdict), executor
        except BaseException:
            executor.close()
            raise
    except HookcageError as exc:
        return fail_verdict(event or "?", str(exc),
                            block=fail_closed or isinstance(exc, PayloadBound | OwnDirInProject)), None
