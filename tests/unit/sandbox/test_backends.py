"""The sandbox backends by name: the factory, what each backend is, the doctor's check lines.

No engine is asked anything: ``DOCKER_HOST`` points nowhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from executor.core import hooks
from executor.core.options import SandboxOptions
from executor.errors import SandboxError
from executor.executor import HookExecutor, default_sandbox_factory
from executor.sandbox import backends
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.sandbox.checks import Check, Probe
from executor.sandbox.fake import FakeSandbox
from executor.sandbox.host import HostSandbox
from executor.service.sandboxes import pooled_sandbox_factory
from executor.settings import load_settings


@pytest.fixture(autouse=True)
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKCAGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


def test_an_unknown_backend_is_one_line_naming_it_and_the_known_ones() -> None:
    with pytest.raises(backends.UnknownBackend) as caught:
        backends.known("podmn")
    message = str(caught.value)
    assert message == "unknown sandbox backend 'podmn'; registered: docker, host"
    assert isinstance(caught.value, SandboxError)
    with pytest.raises(backends.UnknownBackend, match="'podmn'"):
        default_sandbox_factory("podmn", load_settings())
    with pytest.raises(backends.UnknownBackend, match="'podmn'"):
        pooled_sandbox_factory("podmn", load_settings())
    for ask in (backends.contained, backends.shared_by_callers, backends.honoured_options):
        with pytest.raises(backends.UnknownBackend, match="'podmn'"):
            ask("podmn")
    with pytest.raises(backends.UnknownBackend, match="'podmn'"):
        backends.trust_profile("podmn", HostSandbox(), SandboxOptions())
    assert not backends.on_engine("podmn")


def test_host_and_docker_are_the_backends_and_built_by_name() -> None:
    assert backends.BACKENDS == ("docker", "host")
    assert backends.on_engine("docker") and backends.contained("docker") and backends.shared_by_callers("docker")
    assert not backends.on_engine("host") and not backends.contained("host")
    assert not backends.shared_by_callers("host")
    assert isinstance(default_sandbox_factory("host", load_settings()), HostSandbox)
    assert isinstance(pooled_sandbox_factory("host", load_settings()), HostSandbox)
    sandbox = backends.build_sandbox("host", load_settings(), environ={"PATH": "/caller/bin"})
    assert isinstance(sandbox, HostSandbox) and sandbox.base_env == {"PATH": "/caller/bin"}


def test_the_docker_backend_declares_what_a_hook_may_set() -> None:
    # The hook parser (core.hooks) and the backends must agree on a docker hook's sandbox keys.
    assert backends.honoured_options("docker") == hooks.SANDBOX_KEYS - {"backend"}
    assert backends.honoured_options("host") == frozenset()


def test_with_no_engine_the_doctor_checks_stop_at_the_engine() -> None:
    probe = Probe()
    try:
        first = next(iter(backends.doctor_checks(load_settings(), probe)))  # `doctor` stops at `stop`
    finally:
        probe.close()
    assert first.what.startswith("Docker engine: ") and first.ok is False and first.stop
    assert first.lines()[1] == "     fix: start Docker (systemctl start docker) or set DOCKER_HOST"


def test_the_trust_profile_of_a_backend_is_its_image_and_isolation() -> None:
    class Images(Sandbox):
        name = "images"

        def run(self, request: RunRequest) -> RunResult:
            raise AssertionError

        def __init__(self, runtime: str | None = None) -> None:
            self._runtime = runtime

        def image_identity(self, image: str | None) -> str:
            return f"sha256:{image}"

        def runtime(self) -> str | None:
            return self._runtime

    assert backends.trust_profile("host", HostSandbox(), SandboxOptions(backend="host")) == {"image": "host"}
    assert backends.trust_profile("docker", Images(), SandboxOptions(image="x")) == {"image": "sha256:x"}
    # Under gVisor the isolation enters the hash; under a shared kernel the key stays absent (hashes as before).
    assert backends.trust_profile("docker", Images("runsc"), SandboxOptions(image="x")) == {
        "image": "sha256:x", "isolation": "gvisor"}
    assert backends.trust_profile("docker", Images("runc"), SandboxOptions(image="x")) == {"image": "sha256:x"}


def test_check_lines_keep_the_doctor_format() -> None:
    assert Check("engine up", ok=True, fix="never shown").lines() == ["[ok] engine up"]
    assert Check("no image", ok=False, fix="hookcage image build").lines() == [
        "[!!] no image", "     fix: hookcage image build"]
    assert Check("no image", ok=False).lines() == ["[!!] no image"]
    assert Check("cgroup v2", detail=("more", "and more")).lines() == [
        "[..] cgroup v2", "     more", "     and more"]


def test_the_probe_makes_each_thing_once_and_closes_newest_first() -> None:
    probe, made, closed = Probe(), [], []

    def make(name: str) -> Any:
        def do() -> str:
            made.append(name)
            return name
        return do

    def failing_close(thing: str) -> None:
        closed.append(thing)
        raise OSError("already gone")

    assert probe.get("a", make("a"), close=closed.append) == "a"
    assert probe.get("a", make("again")) == "a" and made == ["a"]
    assert probe.get("b", make("b"), close=failing_close) == "b" and probe.has("b") and not probe.has("c")
    with pytest.raises(RuntimeError):
        probe.get("c", lambda: (_ for _ in ()).throw(RuntimeError("no engine")))
    assert not probe.has("c")  # a failure is not remembered: the next check may try again
    probe.close()
    assert closed == ["b", "a"]
    probe.close()
    assert closed == ["b", "a"]


def test_only_an_engine_backend_makes_abort_ask_the_engine() -> None:
    fake = FakeSandbox()
    with HookExecutor(load_settings(), sandboxes={"docker": fake}) as executor:
        assert not backends.on_engine(fake.name)
        assert executor.abort() == 0  # a FakeSandbox under "docker": the engine is not asked
