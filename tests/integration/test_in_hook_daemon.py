"""``HOOKCAGE_IN_HOOK`` through the real daemon (issue 21, class 8).

A hook that calls ``hookcage dispatch`` still does not recurse: its dispatch descends from
the daemon that ran it, which holds the marker its value names. The attack: the agent's
own environment says ``HOOKCAGE_IN_HOOK=1`` (a repository's ``env``, applied by the
agent): the daemon's managed guard and the user's hook still run, in-process and through
the daemon.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_support import PY, THROUGH_DAEMON_ONLY, Daemon
from support import agent_session, allow

pytestmark = pytest.mark.docker


@pytest.fixture
def daemon(tmp_path: Path, workspace: Path, runner_image: str) -> Iterator[Daemon]:
    (tmp_path / "home").mkdir()
    (tmp_path / "managed").mkdir()
    d = Daemon(tmp_path / "home", tmp_path / "managed", workspace, tmp_path / "daemon.log")
    yield d
    d.stop()


def host(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, "sandbox": "host", "timeout": 30, **extra}


def payload(daemon: Daemon) -> bytes:
    return json.dumps({"session_id": agent_session("inhook"), "cwd": str(daemon.project)}).encode()


@pytest.mark.parametrize("through_daemon", [True, False])
def test_in_hook_in_the_agents_environment_silences_neither_managed_nor_user_hooks(
    daemon: Daemon, tmp_path: Path, through_daemon: bool
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    managed, mine = f"touch {marks}/managed", f"touch {marks}/user"
    (daemon.managed / "hooks.json").write_text(json.dumps({"hooks": {"Stop": [{"hooks": [host(managed)]}]}}))
    daemon.user_hooks({"hooks": {"Stop": [{"hooks": [host(mine)]}]}})
    allow(daemon.home, [managed])
    daemon.start()
    code, _, err = daemon.dispatch("Stop", payload(daemon), daemon=through_daemon,
                                   env={"HOOKCAGE_IN_HOOK": "1"})
    assert code == 0, err
    assert "not by a hook hookcage runs: ignored" in err and "called from inside a hook" not in err
    assert sorted(p.name for p in marks.iterdir()) == ["managed", "user"]


def test_a_hook_that_calls_hookcage_through_the_daemon_does_not_recurse(daemon: Daemon, tmp_path: Path) -> None:
    nested = tmp_path / "nested.log"
    script = tmp_path / "recurse.py"
    script.write_text(THROUGH_DAEMON_ONLY)
    line = f"{PY} {script} dispatch Stop </dev/null 2>>{nested}; echo exit=$? >>{nested}"
    env = {"HOOKCAGE_HOME": str(daemon.home), **{k: v for k, v in daemon.env.items() if k == "PYTHONPATH"}}
    daemon.user_hooks({"hooks": {"Stop": [{"hooks": [host(line, env=env)]}]}})
    daemon.start()
    code, out, err = daemon.dispatch("Stop", payload(daemon), daemon=True)
    assert (code, out) == (0, "{}\n"), err
    said = nested.read_text()
    assert "called from inside a hook" in said and said.count("exit=0") == 1, said
    runs = [r for r in daemon.log_lines() if r.get("outcome") == "ran"]
    assert len(runs) == 1, runs  # once: the nested call ran nothing
