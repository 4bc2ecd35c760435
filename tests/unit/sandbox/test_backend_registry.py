"""The backend registry: lookups, what each backend declares, the doctor's check lines.

No engine is asked anything: ``DOCKER_HOST`` points nowhere.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.core import hooks
from executor.core.options import SandboxOptions
from executor.errors import SandboxError
from executor.executor import HookExecutor, default_sandbox_factory
from executor.sandbox import registry
from executor.sandbox.base import RunRequest, RunResult, Sandbox
from executor.sandbox.fake import FakeSandbox
from executor.sandbox.host import HostSandbox
from executor.service.sandboxes import pooled_sandbox_factory
from executor.settings import load_settings


@pytest.fixture(autouse=True)
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKCAGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


@pytest.fixture
def scratch_backend() -> Iterator[registry.Backend]:
    """A backend registered for one test (and taken away after)."""

    def build(settings: Any) -> Sandbox:
        return FakeSandbox()

    found = registry.register(registry.Backend(name="scratch", summary="test", options=frozenset(), build=build))
    yield found
    del registry._BACKENDS["scratch"]


def test_an_unknown_backend_is_one_line_naming_it_and_the_registered_ones() -> None:
    with pytest.raises(registry.UnknownBackend) as caught:
        registry.backend("podmn")
    message = str(caught.value)
    assert message == "unknown sandbox backend 'podmn'; registered: docker, host"
    assert isinstance(caught.value, SandboxError)
    with pytest.raises(registry.UnknownBackend, match="'podmn'"):
        default_sandbox_factory("podmn", load_settings())
    with pytest.raises(registry.UnknownBackend, match="'podmn'"):
        pooled_sandbox_factory("podmn", load_settings())
    assert registry.find("podmn") is None


def test_host_and_docker_are_registered_and_looked_up_by_name() -> None:
    assert [b.name for b in registry.backends()][:2] == ["docker", "host"]
    docker, host = registry.backend("docker"), registry.backend("host")
    assert docker.engine and docker.contained and docker.per_caller is None
    assert not host.engine and not host.contained and host.per_caller is not None
    assert isinstance(default_sandbox_factory("host", load_settings()), HostSandbox)
    sandbox = host.per_caller(load_settings(), {"PATH": "/caller/bin"})
    assert isinstance(sandbox, HostSandbox) and sandbox.base_env == {"PATH": "/caller/bin"}


def test_the_docker_backend_declares_what_a_hook_may_set() -> None:
    # The hook parser (core.hooks) and the registry must agree on a docker hook's sandbox keys.
    assert registry.backend("docker").options == hooks.SANDBOX_KEYS - {"backend"}
    assert registry.backend("host").options == frozenset()


def test_a_name_is_registered_once_unless_replaced(scratch_backend: registry.Backend) -> None:
    with pytest.raises(ValueError, match="'scratch' is registered already"):
        registry.register(scratch_backend)
    registry.register(scratch_backend, replace=True)
    assert isinstance(default_sandbox_factory("scratch", load_settings()), FakeSandbox)
    assert isinstance(pooled_sandbox_factory("scratch", load_settings()), FakeSandbox)  # no pooled: build


def test_every_registered_check_and_profile_part_can_be_loaded() -> None:
    for found in registry.backends():
        for part in (*found.checks, *found.profile, found.build, found.pooled, found.per_caller):
            if part is None:
                continue
            target = part.__qualname__
            if ":" in target:  # lazy("module:function")
                module, _, name = target.partition(":")
                assert callable(getattr(importlib.import_module(module), name)), target


def test_lazy_loads_nothing_until_called_and_refuses_a_bad_target() -> None:
    seen = registry.lazy("os.path:join")
    assert seen("a", "b") == "a/b" and seen.__qualname__ == "os.path:join"
    with pytest.raises(ValueError, match="not 'module:function'"):
        registry.lazy("os.path.join")


def test_the_trust_profile_of_a_backend_is_its_parts_merged() -> None:
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

    host = registry.backend("host")
    assert host.trust_profile(HostSandbox(), SandboxOptions(backend="host")) == {"image": "host"}
    docker = registry.backend("docker")
    assert docker.trust_profile(Images(), SandboxOptions(image="x")) == {"image": "sha256:x"}
    # Under gVisor the isolation enters the hash; under a shared kernel the key stays absent (hashes as before).
    assert docker.trust_profile(Images("runsc"), SandboxOptions(image="x")) == {"image": "sha256:x",
                                                                               "isolation": "gvisor"}
    assert docker.trust_profile(Images("runc"), SandboxOptions(image="x")) == {"image": "sha256:x"}


def test_check_lines_keep_the_doctor_format() -> None:
    assert registry.Check("engine up", ok=True, fix="never shown").lines() == ["[ok] engine up"]
    assert registry.Check("no image", ok=False, fix="hookcage image build").lines() == [
        "[!!] no image", "     fix: hookcage image build"]
    assert registry.Check("no image", ok=False).lines() == ["[!!] no image"]
    assert registry.Check("cgroup v2", detail=("more", "and more")).lines() == [
        "[..] cgroup v2", "     more", "     and more"]


def test_the_probe_makes_each_thing_once_and_closes_newest_first() -> None:
    probe, made, closed = registry.Probe(), [], []

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
        assert registry.find(fake.name) is None
        assert executor.abort() == 0  # a FakeSandbox under "docker": the engine is not asked
