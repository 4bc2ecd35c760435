"""Fixtures shared by the unit tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected socket pair: our end of an attach, and the fake engine's."""
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()
