"""The Debian mirror the runner image is built from: given, ``$HOOKCAGE_DEBIAN_MIRROR``, apt's own, or deb.debian.org."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from executor.provision.recipe import DEBIAN_SUITE

__all__ = ["DEFAULT_MIRROR", "MIRROR_ENV", "mirror_from_apt_sources", "resolve_mirror"]

DEFAULT_MIRROR = "http://deb.debian.org/debian"
MIRROR_ENV = "HOOKCAGE_DEBIAN_MIRROR"


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    """Parse deb822 text (``*.sources``) into stanzas of lower-cased field names."""
    fields: dict[str, str] = {}
    key: str | None = None
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if fields:
                yield fields
            fields, key = {}, None
            continue
        if raw[0] in " \t" and key is not None:
            fields[key] += " " + raw.strip()
            continue
        name, sep, value = raw.partition(":")
        if sep:
            key = name.strip().lower()
            fields[key] = value.strip()
    if fields:
        yield fields


_ONE_LINE_ENTRY = re.compile(r"^(deb|deb-src)\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)")


def _apt_entries(etc_apt: Path) -> Iterator[tuple[str, str]]:
    """Every enabled binary (``deb``) entry of an apt config dir, as (uri, suite), in apt's order."""
    files = [etc_apt / "sources.list"]
    parts = etc_apt / "sources.list.d"
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if p.suffix in (".list", ".sources"))
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in _deb822_stanzas(text):
                if stanza.get("enabled", "yes").lower() in ("no", "false", "0"):
                    continue
                if "deb" not in stanza.get("types", "").split():
                    continue
                for uri in stanza.get("uris", "").split():
                    for suite in stanza.get("suites", "").split():
                        yield uri, suite
        else:
            for line in text.splitlines():
                match = _ONE_LINE_ENTRY.match(line.split("#", 1)[0].strip())
                if match and match.group(1) == "deb":
                    yield match.group(2), match.group(3)


def mirror_from_apt_sources(
    etc_apt: Path = Path("/etc/apt"), suite: str = DEBIAN_SUITE
) -> str | None:
    """The Debian mirror this machine's apt already uses, if it has one that fits.

    Reads ``sources.list`` and ``sources.list.d/*.list`` (one-line format) and
    ``sources.list.d/*.sources`` (deb822), skipping disabled entries and other
    file names. Prefers an http(s) or file URI that serves ``suite`` itself
    (not ``suite-security``/``-updates``); else any URI whose path ends in
    ``/debian`` (a Debian archive root serving another release).

    Args:
        etc_apt: apt's configuration directory (tests pass a fake one).
        suite: the Debian release to be served.

    Returns:
        The mirror URI without a trailing slash, or None when nothing fits.
    """
    fallback: str | None = None
    for uri, entry_suite in _apt_entries(etc_apt):
        if not uri.startswith(("http://", "https://", "file:/")):
            continue  # cdrom:, mirror+file:, tor+http: ... mean nothing to mmdebstrap
        uri = uri.rstrip("/")
        if entry_suite.rstrip("/") == suite:
            return uri
        if fallback is None and uri.endswith("/debian") and "-" not in entry_suite:
            fallback = uri
    return fallback


def resolve_mirror(
    mirror: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    etc_apt: Path = Path("/etc/apt"),
) -> str:
    """The Debian mirror to build from: ``mirror``, else $HOOKCAGE_DEBIAN_MIRROR, else apt's, else deb.debian.org.

    Args:
        mirror: an explicit mirror URI; wins when given.
        environ: the environment to read (default ``os.environ``).
        etc_apt: apt's configuration directory to detect from.
    """
    env = os.environ if environ is None else environ
    chosen = mirror or env.get(MIRROR_ENV) or mirror_from_apt_sources(etc_apt)
    return (chosen or DEFAULT_MIRROR).rstrip("/")
