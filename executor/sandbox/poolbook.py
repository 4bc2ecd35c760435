"""The warm pool's bookkeeping (pure): creation keys, and which spares to keep.

Times are passed in; nothing here does I/O or reads a clock.
``executor.sandbox.poolrefill`` acts on what ``PoolBook.plan`` says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from executor.sandbox.conventions import EXPIRY_MARGIN

TAKE_MARGIN = 0.5
"""Seconds of idle life a pooled container must have left to be given a job."""
START_FAILURES_BEFORE_COLD = 3
"""Containers of one key in a row that refused or died before a job: the key goes cold."""
BURST_WINDOW = 1.0
"""Runs of one key this close together count as one burst: the key keeps as many
ready (up to ``pool_total``), since one event often runs several hooks at once."""
_FAILURE_BACKOFF = (1.0, 60.0)
"""First and longest pause after a key's container could not be created."""


# --------------------------------------------------------------------------
# Creation keys (pure)
# --------------------------------------------------------------------------

PER_RUN_CREATE_FIELDS = ("name", "command", "environment", "working_dir", "labels")
"""What of ``container_args``' create arguments travels in the job (or is per container)."""


def creation_key(
    create: Mapping[str, Any], host: Mapping[str, Any], overlay_targets: Sequence[str]
) -> str:
    """What a container must have been created with to serve a run, as one string.

    Args:
        create: the cold path's ``create_container`` arguments for the run.
        host: its ``create_host_config`` arguments.
        overlay_targets: the (normalised) container paths of the run's overlays;
            their bind sources are per container, so only the targets count.
    """
    targets = set(overlay_targets)
    mounts = [
        {**mount, "Source": ""} if mount.get("Target") in targets
        else _overlay_layers_dropped(mount) if mount.get("Type") == "volume"
        else dict(mount)
        for mount in host.get("mounts") or []
    ]
    fixed_create = {k: v for k, v in create.items() if k not in PER_RUN_CREATE_FIELDS}
    fixed_host = {**host, "mounts": mounts}
    return json.dumps(
        {"create": fixed_create, "host": fixed_host}, sort_keys=True, default=repr
    )


def _overlay_layers_dropped(mount: Mapping[str, Any]) -> dict[str, Any]:
    """A workspace overlay (staged files over the project) without its per-container layer paths."""
    options = dict(mount.get("VolumeOptions") or {})
    driver = dict(options.get("DriverConfig") or {})
    if (driver.get("Options") or {}).get("type") == "overlay":
        driver["Options"] = {**driver["Options"], "o": ""}
        options["DriverConfig"] = driver
    return {**mount, "VolumeOptions": options}


# --------------------------------------------------------------------------
# Bookkeeping (pure: times are passed in)
# --------------------------------------------------------------------------


@dataclass(eq=False)
class Spare:
    """One pooled container waiting for its job.

    ``ready`` and ``idle_deadline`` are ``time.monotonic()`` values; ``expires``
    is the Unix time of its ``hookcage.expires`` label.
    """

    container: str
    key: str
    ready: float
    idle_deadline: float
    expires: float
    handle: Any = None
    """What the engine side keeps with it (attach socket, overlay files)."""


@dataclass
class _KeyState:
    last_wanted: float
    max_timeout: float
    creating: int = 0
    retry_after: float = 0.0
    backoff: float = 0.0
    start_failures: int = 0
    runs: list[float] = field(default_factory=list)
    """When its runs of the last ``BURST_WINDOW`` seconds came."""
    burst: int = 0
    """The most runs seen within one ``BURST_WINDOW`` while the key is known."""
    spares: list[Spare] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    """What the refill side should do now: create one container of ``create``, discard ``discard``."""

    create: str | None
    discard: tuple[Spare, ...]


class PoolBook:
    """Which keys are wanted, which spares are ready, what to create or discard.

    Pure: it does no I/O and reads no clock. A key is known from the moment a
    run (or ``prewarm``) asks for it until ``idle_timeout`` passes without
    that. Known keys, most recently wanted first, get up to ``pool_size``
    spares each (or, for a key whose runs came in bursts, the largest burst
    seen) until ``pool_total`` is reached; spares beyond that, of forgotten
    keys, or too close to their idle deadline are discarded.
    """

    def __init__(self, pool_size: int, pool_total: int, idle_timeout: float) -> None:
        self.pool_size = max(0, pool_size)
        self.pool_total = max(0, pool_total)
        self.idle_timeout = idle_timeout
        self._keys: dict[str, _KeyState] = {}
        self._retired: list[Spare] = []

    # -- the run side ----------------------------------------------------

    def want(self, key: str, timeout: float, now: float, *, run: bool = True) -> None:
        """A run (or, not ``run``, a prewarm) for ``key`` with this timeout happened at ``now``."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _KeyState(last_wanted=now, max_timeout=timeout)
        else:
            state.last_wanted = now
            state.max_timeout = max(state.max_timeout, timeout)
        if run:
            state.runs = [t for t in state.runs if now - t < BURST_WINDOW]
            state.runs.append(now)
            state.burst = max(state.burst, len(state.runs))

    def size(self, key: str) -> int:
        """How many spares ``key`` is due (before ``pool_total`` cuts)."""
        state = self._keys.get(key)
        if state is None or not self.pool_size:
            return 0
        return max(self.pool_size, min(state.burst, self.pool_total))

    def take(self, key: str, timeout: float, now: float, wall: float) -> Spare | None:
        """A spare of ``key`` that can serve a run of ``timeout`` seconds, oldest first.

        A spare must have ``TAKE_MARGIN`` of idle life left, and its expiry
        label must lie ``EXPIRY_MARGIN`` past the run's end (as a cold
        run's does) so that no ``reap`` removes it mid-run. Spares that
        fail the first test are retired.
        """
        state = self._keys.get(key)
        if state is None:
            return None
        for spare in list(state.spares):
            if now + TAKE_MARGIN >= spare.idle_deadline:
                state.spares.remove(spare)
                self._retired.append(spare)
                continue
            if wall + timeout + EXPIRY_MARGIN <= spare.expires:
                state.spares.remove(spare)
                return spare
        return None

    def started(self, key: str, ok: bool, now: float) -> None:
        """A taken spare ran its job (``ok``) or refused or was dead (not ``ok``)."""
        state = self._keys.get(key)
        if state is None:
            return
        if ok:
            state.start_failures = 0
            return
        state.start_failures += 1
        if state.start_failures >= START_FAILURES_BEFORE_COLD:
            # Its containers keep failing before the job: stop pooling it for a while.
            state.retry_after = now + self.idle_timeout
            state.start_failures = 0

    def known(self, key: str) -> bool:
        """Whether ``key`` is wanted (or still has containers being created)."""
        return key in self._keys

    def ready(self, key: str) -> int:
        """How many spares of ``key`` wait."""
        state = self._keys.get(key)
        return len(state.spares) if state else 0

    # -- the refill side --------------------------------------------------

    def template_timeout(self, key: str) -> float:
        """The longest timeout asked for ``key`` (its containers' expiry covers it)."""
        state = self._keys.get(key)
        return state.max_timeout if state else 0.0

    def plan(self, now: float) -> Plan:
        """What to create next (marked as being created) and what to discard now."""
        discard, self._retired = list(self._retired), []
        budget = self.pool_total
        create: str | None = None
        order = sorted(self._keys.items(), key=lambda item: item[1].last_wanted, reverse=True)
        for key, state in order:
            for spare in list(state.spares):
                if now + TAKE_MARGIN >= spare.idle_deadline:
                    state.spares.remove(spare)
                    discard.append(spare)
            if now - state.last_wanted >= self.idle_timeout:
                discard.extend(state.spares)
                state.spares.clear()
                if not state.creating:
                    del self._keys[key]
                continue
            allot = min(self.size(key), budget)
            while state.spares and len(state.spares) + state.creating > allot:
                discard.append(state.spares.pop(0))  # the oldest
            have = len(state.spares) + state.creating
            if now < state.retry_after:
                budget -= have
                continue
            if create is None and have < allot:
                create = key
                state.creating += 1
                have += 1
            budget = max(0, budget - max(have, allot))
        return Plan(create=create, discard=tuple(discard))

    def add(self, spare: Spare, now: float) -> bool:
        """A container planned for ``spare.key`` is ready; False: it is not wanted any more."""
        state = self._keys.get(spare.key)
        if state is None:
            return False
        state.creating = max(0, state.creating - 1)
        state.backoff = 0.0
        if now - state.last_wanted >= self.idle_timeout:
            return False
        state.spares.append(spare)
        return True

    def failed(self, key: str, now: float) -> None:
        """Creating a container planned for ``key`` failed: back off, doubling each time."""
        state = self._keys.get(key)
        if state is None:
            return
        state.creating = max(0, state.creating - 1)
        first, longest = _FAILURE_BACKOFF
        state.backoff = min(longest, state.backoff * 2 if state.backoff else first)
        state.retry_after = now + state.backoff

    def next_change(self, now: float) -> float:
        """Monotonic time at which ``plan`` may have something new to do."""
        times = [now + self.idle_timeout]
        for state in self._keys.values():
            times.append(state.last_wanted + self.idle_timeout)
            if state.retry_after > now:
                times.append(state.retry_after)
            times.extend(spare.idle_deadline - TAKE_MARGIN for spare in state.spares)
        return min(times)

    def containers(self) -> list[str]:
        """Ids of the ready spares, all keys."""
        return [spare.container for s in self._keys.values() for spare in s.spares]

    def drain(self) -> list[Spare]:
        """Every spare, ready or retired; the book forgets them all."""
        spares, self._retired = list(self._retired), []
        for state in self._keys.values():
            spares.extend(state.spares)
            state.spares.clear()
        return spares

    def hungry(self, now: float) -> bool:
        """Whether a wanted key has no spare ready: its next run would go cold."""
        return any(
            not state.spares and now >= state.retry_after and self.size(key) > 0
            for key, state in self._keys.items()
        )

    def total(self) -> int:
        """Spares ready and being created, across keys."""
        return sum(len(s.spares) + s.creating for s in self._keys.values())
