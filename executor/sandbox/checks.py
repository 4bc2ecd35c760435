"""What ``hookcage doctor``'s checks are made of: a :class:`Check` is a line, a :class:`Probe` what one run's checks share.

The checks themselves live with their backend (the docker backend's in
:mod:`executor.sandbox.docker.doctor`); :func:`executor.sandbox.backends.doctor_checks`
runs them in order. Each is a plain function ``(settings, probe) -> iterable of
Check``, printed as ``[ok]``, ``[!!]`` with a fix, or ``[..]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

__all__ = ["Check", "Probe", "Provisioning"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Check:
    """One line (or a few) of ``hookcage doctor``.

    Attributes:
        what: what was checked, or what is so (for ``ok=None``).
        ok: True ``[ok]``, False ``[!!]`` (a problem: counted, ``fix`` shown),
            None ``[..]`` (information).
        fix: what to do when not ok.
        detail: further lines, printed indented under it.
        stop: nothing after this can be checked (the engine is unreachable):
            the doctor stops here and fails.
    """

    what: str
    ok: bool | None = None
    fix: str = ""
    detail: tuple[str, ...] = ()
    stop: bool = False

    def lines(self) -> list[str]:
        """The check as ``doctor`` prints it."""
        mark = {True: "ok", False: "!!", None: ".."}[self.ok]
        out = [f"[{mark}] {self.what}"]
        if self.ok is False and self.fix:
            out.append(f"     fix: {self.fix}")
        out.extend(f"     {line}" for line in self.detail)
        return out


class Provisioning(Protocol):
    """What the doctor's checks ask of image provisioning (:mod:`executor.provision`, which the sandbox never imports)."""

    def runner_image_current(self, client: Any) -> bool:
        """Whether the runner image was built from this version's recipe (one inspect call)."""

    def offline_build_tool(self) -> tuple[bool, str]:
        """Whether an offline build can have an mmdebstrap, and one line saying how."""


class Probe:
    """What the checks of one ``doctor`` run share: things made once, closed at the end.

    The first check that needs the engine's client makes it with
    ``probe.get("docker.client", make, close=...)``; later ones get the same.
    ``provisioning`` answers the checks about building images; without it
    (this class as is) those checks are left out: ``hookcage doctor`` uses
    :class:`executor.provision.doctor.Probe`, which has it.
    """

    provisioning: Provisioning | None = None

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}
        self._closers: list[Callable[[], None]] = []

    def get(self, key: str, make: Callable[[], _T], *, close: Callable[[_T], None] | None = None) -> _T:
        """The thing made under ``key``, made now by ``make`` if it was not yet (exceptions pass through)."""
        if key not in self._made:
            made = self._made[key] = make()
            if close is not None:
                self._closers.append(lambda: close(made))
        return cast(_T, self._made[key])

    def has(self, key: str) -> bool:
        """Whether something was made under ``key``."""
        return key in self._made

    def close(self) -> None:
        """Close what was made, newest first; a failure to close is not the doctor's concern."""
        while self._closers:
            closer = self._closers.pop()
            try:
                closer()
            except Exception:  # best effort: the doctor has said what it found
                continue
