"""The service's ``/metrics``: Prometheus text from what it really ran.

One :class:`ServiceMetrics` per :class:`~executor.service.daemon.Daemon`, on
its own ``CollectorRegistry`` (never the process-global one: two daemons in
one process, as in tests, keep separate counts).

Where each number comes from:

- hooks (``hookcage_hooks_total``, ``hookcage_hook_duration_seconds``): the
  run-log records the executor produces for every hook it considered
  (``HookExecutor(on_records=...)``), counted whether or not the run log is
  written, each classified as ``hookcage report`` classifies it
  (:func:`executor.core.report.classify`), so both agree; ``async`` hooks when
  their records are written, after the answer;
- dispatches (``hookcage_dispatches_total``, ``hookcage_dispatch_duration_seconds``,
  ``hookcage_dispatches_in_flight``): the daemon, around each answer;
- requests turned away (``hookcage_requests_rejected_total``) and waiting for a
  slot (``hookcage_dispatches_queued``): the TCP gate;
- warm/cold/fallback starts and ready containers: the warm pools' own
  counters (``PoolStats``), read at scrape time;
- containers alive: asked of the Docker engine at scrape time (running
  containers this process started: its hook runs and its pools').

Label values are bounded: events are catalog names (``unknown`` otherwise),
agents are known dialects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from executor import __version__
from executor.core.events import EVENTS
from executor.core.report import classify
from executor.dialects import DIALECTS

HOOK_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds: hooks run from tens of milliseconds (warm) to their timeout (60 s by default)."""
DISPATCH_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

DISPATCH_OUTCOMES = ("answered", "blocked", "error", "refused", "cancelled")
"""``hookcage_dispatches_total``'s outcomes (see :func:`dispatch_outcome`)."""
RAN = frozenset({"ok", "blocked", "error", "timeout"})
"""The hook outcomes of a run that was started (its duration is observed)."""


def told_to_block(record: Mapping[str, Any]) -> bool:
    """Whether a hook's answer, as folded for the agent, blocks or denies (``on_error: deny`` included)."""
    return record.get("outcome") == "ran" and (record.get("status") == "block"
                                               or record.get("decision") in ("block", "deny"))


def dispatch_outcome(exit_code: int, records: Sequence[Mapping[str, Any]]) -> str:
    """How a dispatch that produced an answer ended: ``blocked`` (exit 2, or a hook
    blocked or denied), ``error`` (hookcage could not judge: exit other than 0 and 2),
    or ``answered``."""
    if exit_code == 2 or any(told_to_block(r) for r in records if not r.get("async")):
        return "blocked"
    if exit_code != 0:
        return "error"
    return "answered"


class _Live(Collector):
    """What is read at scrape time: the pools' counters and the containers alive."""

    def __init__(self, pools: Callable[[], Iterable[Mapping[str, int]]], alive: Callable[[], int | None]) -> None:
        self._pools = pools
        self._alive = alive

    def collect(self) -> Iterator[Metric]:
        total: dict[str, int] = {}
        for stats in self._pools():
            for name, value in stats.items():
                total[name] = total.get(name, 0) + int(value)
        starts = CounterMetricFamily(
            "hookcage_container_starts", "Docker hook runs by how their container was had: warm (a ready "
            "pooled container), cold (a fresh one); fallback counts the cold ones whose pooled container "
            "failed first (a subset of cold)", labels=["start"])
        for name, key in (("warm", "warm"), ("cold", "cold"), ("fallback", "fallbacks")):
            starts.add_metric([name], total.get(key, 0))
        yield starts
        yield CounterMetricFamily("hookcage_pool_containers_created", "Pooled containers created",
                                  value=total.get("created", 0))
        yield CounterMetricFamily("hookcage_pool_creation_failures", "Pooled containers that could not be created",
                                  value=total.get("creation_failures", 0))
        yield GaugeMetricFamily("hookcage_pool_ready", "Pooled containers started and waiting for a hook",
                                value=total.get("ready", 0))
        alive = self._alive()
        if alive is not None:  # the engine did not answer: no figure rather than a wrong one
            yield GaugeMetricFamily("hookcage_containers_alive",
                                    "Running containers this service started (hook runs and pools)", value=alive)


class ServiceMetrics:
    """The counters of one daemon, and their Prometheus text.

    Args:
        pools: the warm pools' counters now (``PoolStats`` as dicts), one per pool.
        alive: how many containers this process has running now (None: unknown).
    """

    def __init__(self, pools: Callable[[], Iterable[Mapping[str, int]]] = list,
                 alive: Callable[[], int | None] = lambda: None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.info = Gauge("hookcage_info", "The hookcage version serving", ["version"], registry=r)
        self.info.labels(__version__).set(1)
        self.dispatches = Counter("hookcage_dispatches", "Dispatches (agent events) by listener "
                                  "(local: the unix socket, remote: TCP), agent, event and outcome",
                                  ["listener", "agent", "event", "outcome"], registry=r)
        self.dispatch_seconds = Histogram("hookcage_dispatch_duration_seconds", "Time to answer a dispatch",
                                          ["listener"], buckets=DISPATCH_BUCKETS, registry=r)
        self.in_flight = Gauge("hookcage_dispatches_in_flight", "Dispatches being answered now",
                               ["listener"], registry=r)
        self.queued = Gauge("hookcage_dispatches_queued", "TCP dispatches waiting for a slot", registry=r)
        self.hooks = Counter("hookcage_hooks", "Hooks considered, by outcome as hookcage report names them "
                             "(ok, blocked, error, timeout, not-run, untrusted, off-list, disabled, invalid, "
                             "unsupported, skipped)", ["listener", "event", "outcome"], registry=r)
        self.hook_seconds = Histogram("hookcage_hook_duration_seconds", "Run time of the hooks that were started",
                                      ["listener", "outcome"], buckets=HOOK_BUCKETS, registry=r)
        self.rejected_requests = Counter("hookcage_requests_rejected", "TCP requests turned away, by HTTP status "
                                         "(401 token, 413 size, 503 queue full, 400/415/422 malformed)",
                                         ["status"], registry=r)
        for listener in ("local", "remote"):
            self.in_flight.labels(listener)
        for status in (400, 401, 413, 415, 422, 503):
            self.rejected_requests.labels(str(status))
        r.register(_Live(pools, alive))
        self._lock = threading.Lock()

    # -- what happened -----------------------------------------------------------------

    def records(self, listener: str, records: Sequence[Mapping[str, Any]]) -> None:
        """Count the run-log records of one batch (a dispatch's hooks, or its async ones)."""
        for record in records:
            outcome = classify(record)
            if outcome is None:  # not a record this version knows: not guessed
                continue
            event = str(record.get("event") or "unknown")
            self.hooks.labels(listener, event if event in EVENTS else "unknown", outcome).inc()
            duration = record.get("duration_ms")
            if outcome in RAN and isinstance(duration, int | float) and not isinstance(duration, bool):
                self.hook_seconds.labels(listener, outcome).observe(duration / 1000)

    def dispatched(self, listener: str, agent: str, event: str, outcome: str, seconds: float | None) -> None:
        """Count one dispatch (``seconds`` None when it was refused before anything ran)."""
        self.dispatches.labels(listener, agent, event, outcome).inc()
        if seconds is not None:
            self.dispatch_seconds.labels(listener).observe(seconds)

    def rejected(self, status: int) -> None:
        """Count a TCP request turned away with ``status``."""
        self.rejected_requests.labels(str(status)).inc()

    # -- the text --------------------------------------------------------------------------

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text (format 0.0.4) and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def agent_label(agent: str | None) -> str:
    """An agent name for the metrics: a known dialect, else ``unknown`` (labels stay bounded)."""
    if agent is None:
        return "recognised"
    return agent if agent in DIALECTS else "unknown"


def event_label(agent: str, event: str | None, payload: Mapping[str, Any]) -> str:
    """The canonical event name for the metrics, ``unknown`` when it does not resolve."""
    try:
        return DIALECTS[agent].resolve_event(event, payload).name
    except Exception:
        return "unknown"
