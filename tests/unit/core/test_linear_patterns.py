"""hookcage's own regular expressions are linear (or bounded) on hostile input (issue 11).

A repository controls the scripts hookcage scans (PEP 723 blocks, imports),
the commands it parses and the output hooks print. Each pattern applied to
such text is checked here on inputs that make a backtracking engine
quadratic or exponential.
"""

from __future__ import annotations

import itertools
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.core import deps
from executor.core.deps import pep723_blocks, script_metadata
from executor.core.protocol import answers, folding, parsing, values
from executor.gates.trust import references, scripts

BOUND = 2.0

REFERENCE_PEP723 = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


def reference_blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group("type"), m.group("content")) for m in REFERENCE_PEP723.finditer(text)]


LINES = ["# /// script", "# ///", "#", "# a = 1", 'dependencies = ["x"]', "# dependencies = [\"rich\"]",
         "", "x", "# /// other", "#x", "# /// a-b", "\r", " ", "# /// script\r"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=12), st.sampled_from(["", "\n"]))
def test_pep723_blocks_are_the_reference_regexs(lines: list[str], end: str) -> None:
    text = "\n".join(lines) + end
    assert pep723_blocks(text) == reference_blocks(text)


@pytest.mark.parametrize("text", [
    "# /// script\n" * 100_000,  # exponential for the reference regex (minutes at 50 KB)
    "# /// script\n" + "#\n" * 500_000,
    ("# /// script\n# a\n" * 50_000) + "# ///\n",
    "# " + "x" * 1_000_000,
])
def test_a_hostile_script_is_scanned_in_linear_time(text: str) -> None:
    started = time.monotonic()
    script_metadata(text)
    assert time.monotonic() - started < BOUND


def test_a_script_block_is_still_read() -> None:
    text = '#!/usr/bin/env -S uv run --script\n# /// script\n# dependencies = ["rich"]\n# ///\nprint(1)\n'
    assert script_metadata(text) == ({"dependencies": ["rich"]}, None)


# Every pattern hookcage applies unanchored (search, sub, finditer) or anchored (match)
# to text it does not control, on repetitions of every pair of interesting characters.
CHARS = [*"aA0_-./:='\"` \t\n$({[]})*?!@#\\|&<>,+", "\u00e9", "line ", ": ", "env: ", "://", "${", "$(", "# "]
UNANCHORED = [parsing._NETWORK, scripts._NODE_SPECIFIER]
ANCHORED = [getattr(module, name) for module in (values, answers, parsing, folding) for name in dir(module)
            if isinstance(getattr(module, name), re.Pattern)] + [
    references.ASSIGNMENT, references.URL, deps._TARBALL, deps._LOCAL_SPEC, deps._PEP723_HEADER]


@pytest.mark.parametrize("pattern", UNANCHORED + ANCHORED, ids=lambda p: p.pattern[:30])
def test_each_pattern_is_linear_on_repetitive_input(pattern: re.Pattern[str]) -> None:
    started = time.monotonic()
    for a, b in itertools.combinations_with_replacement(CHARS, 2):
        text = (a + b) * 2000
        pattern.match(text)
        if pattern in UNANCHORED:
            pattern.search(text)
    assert time.monotonic() - started < BOUND * 5  # ~900 inputs of 4-20 KB
