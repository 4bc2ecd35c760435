"""The protocol suite of ``test_dispatch.py``, answered through the daemon as well.

Every case of that suite runs here too, with ``Setup.dispatch`` replaced:
each event goes to ``hookcage dispatch`` twice, side by side, as an agent
spawns it: once in-process (``HOOKCAGE_NO_DAEMON=1``) and once through a
``hookcage serve`` on the same home (the fallback made impossible). Both must
print the same stdout and stderr, exit with the same code and write the same
run log; the suite's own assertions then check that answer.

Every case runs on the ``host`` backend; a few on ``docker``, where the
daemon's pool is filled first so that its runs are warm (checked in
``/health``) while the in-process ones are cold.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from daemon_support import Daemon
from test_dispatch import (  # the suite itself, collected here again with this module's ``setup``
    Setup,
    test_exit_2_blocks_with_stderr,
    test_hook_reads_the_payload_on_stdin,
    test_json_permission_decisions,
    test_non_blocking_error_and_continue_false,
    test_parallel_hooks_fold,
    test_plain_text_becomes_context_on_user_prompt_submit,
    test_stop_hook_sees_stop_hook_active,
    test_timeout_with_children_holding_stdout,
    test_updated_input_built_from_stdin,
)

pytestmark = pytest.mark.docker
SUITE = (
    test_exit_2_blocks_with_stderr,
    test_hook_reads_the_payload_on_stdin,
    test_json_permission_decisions,
    test_updated_input_built_from_stdin,
    test_plain_text_becomes_context_on_user_prompt_submit,
    test_stop_hook_sees_stop_hook_active,
    test_non_blocking_error_and_continue_false,
    test_timeout_with_children_holding_stdout,
    test_parallel_hooks_fold,
)
DOCKER_CASES = {
    "test_exit_2_blocks_with_stderr",
    "test_plain_text_becomes_context_on_user_prompt_submit",
    "test_stop_hook_sees_stop_hook_active",
    "test_timeout_with_children_holding_stdout",
    "test_parallel_hooks_fold",
}
"""The cases that also run on docker (each costs a few containers)."""
POOL_SIZE = 2
"""The pool's default: what a case's parallel hooks may take at once."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "setup" in metafunc.fixturenames:
        backends = ["host", "docker"] if metafunc.function.__name__ in DOCKER_CASES else ["host"]
        metafunc.parametrize("setup", backends, indirect=True)


class DaemonSetup(Setup):
    """``Setup`` whose ``dispatch`` asks ``hookcage dispatch`` in-process and through the daemon."""

    def __init__(self, tmp: Path, workspace: Path, backend: str) -> None:
        super().__init__(tmp, workspace, backend)
        self.tmp = tmp
        self.daemon = Daemon(self.home, self.managed, self.project, tmp / "daemon.log")
        self.calls = 0

    def start(self) -> None:
        self.daemon.start()
        if self.backend == "docker":
            # A hook of the same container shape as the case's: the pool then
            # fills for that shape, and the case's daemon runs go warm.
            self.user_hooks("Notification", self.hook("true"))
            stdin = json.dumps({"session_id": self.session, "cwd": str(self.project), "message": "warm-up"})
            assert self.daemon.dispatch("Notification", stdin.encode(), daemon=True) == (0, "{}\n", "")

    def call(self, event: str, fields: dict[str, Any]) -> tuple[tuple[int, str, str], ...]:
        """The event through the daemon and in-process, at the same time; both answers."""
        self.calls += 1
        stdin = json.dumps({"session_id": self.session, "cwd": str(self.project), **fields}).encode()

        def run(where: str) -> tuple[int, str, str]:
            log = self.tmp / f"runs-{self.calls}-{where}.jsonl"
            return self.daemon.dispatch(event, stdin, daemon=where == "daemon", env={"HOOKCAGE_LOG_FILE": str(log)})

        with ThreadPoolExecutor(2) as threads:
            return tuple(threads.map(run, ("daemon", "in-process")))

    def dispatch(self, event: str, **fields: Any) -> tuple[int, Any, str]:
        before = self.daemon.wait_ready(POOL_SIZE) if self.backend == "docker" else {}
        by_daemon, in_process = self.call(event, fields)
        assert by_daemon == in_process
        logs = [self.daemon.log_lines(self.tmp / f"runs-{self.calls}-{where}.jsonl")
                for where in ("daemon", "in-process")]
        assert logs[0] == logs[1]
        if self.backend == "docker":
            after = self.daemon.pool()
            ran = sum(1 for line in logs[0] if line["outcome"] == "ran")
            assert (after["warm"] - before["warm"], after["cold"] - before["cold"]) == (ran, 0), (before, after)
        code, stdout, stderr = in_process
        return code, json.loads(stdout) if stdout else None, stderr


@pytest.fixture
def setup(request: pytest.FixtureRequest, tmp_path: Path, workspace: Path) -> Iterator[DaemonSetup]:
    if request.param == "host" and shutil.which("jq") is None:
        pytest.skip("jq is not installed on the host")
    if request.param == "docker":
        request.getfixturevalue("runner_image")
    else:
        request.getfixturevalue("docker_api")  # the daemon's docker sandbox reaps at start
    made = DaemonSetup(tmp_path, workspace, request.param)
    made.start()
    yield made
    made.daemon.stop()


def test_every_case_of_the_suite_runs_here_too() -> None:
    import test_dispatch

    cases = {name for name, value in vars(test_dispatch).items()
             if name.startswith("test_") and callable(value)
             and "setup" in value.__code__.co_varnames[:value.__code__.co_argcount]}
    assert cases == {case.__name__ for case in SUITE}
