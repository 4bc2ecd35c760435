"""Trust covers the runtime: reviewed under gVisor never covers a run under a shared kernel (hostile cases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from executor.executor import HookExecutor
from executor.gates.trust import TrustRecord, TrustSubject
from executor.sandbox import FakeSandbox, RunRequest, RunResult
from executor.settings import load_settings


class RuntimeSandbox(FakeSandbox):
    """A fake docker backend whose containers get ``runtime`` (what ``auto`` resolved to)."""

    def __init__(self, runtime: str) -> None:
        super().__init__(lambda request: RunResult(0, stdout=b"ran"))
        self._runtime = runtime

    def runtime(self) -> str:
        return self._runtime


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".hookcage").mkdir(parents=True)
    (root / ".hookcage" / "check.sh").write_text("echo checked\n")
    hooks = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "sh .hookcage/check.sh"}]}]}}
    (root / ".hookcage" / "hooks.json").write_text(json.dumps(hooks))
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[allowlist]\nallow = ["*", "sh .hookcage/check.sh"]\n')
    return root


def executor(project: Path, runtime: str) -> tuple[HookExecutor, RuntimeSandbox]:
    home = project.parent / "home"
    fake = RuntimeSandbox(runtime)
    return HookExecutor(load_settings(home=home, managed_dir=project.parent / "managed"),
                        sandboxes={"docker": fake}, environ={}), fake


def review(project: Path, runtime: str) -> list[TrustSubject]:
    ex, _ = executor(project, runtime)
    subjects = [subject for _, subject in ex.pending_reviews(project)[0]]
    assert len(subjects) == 1
    ex.grant(subjects)
    return subjects


def runs(project: Path, runtime: str) -> list[RunRequest]:
    ex, fake = executor(project, runtime)
    verdict = ex.dispatch("Stop", {"session_id": "s", "cwd": str(project)})
    if not fake.requests:
        assert "not trusted yet" in " ".join(verdict.notes)
    return fake.requests


def test_reviewed_under_gvisor_does_not_run_under_a_shared_kernel(project: Path) -> None:
    # The author's hook was reviewed where gVisor contained it; runsc is then unregistered
    # (auto resolves to runc): the same hook would reach the host's kernel. Nothing starts.
    review(project, "runsc")
    assert runs(project, "runc") == []
    ex, _ = executor(project, "runc")
    pending, _ = ex.pending_reviews(project)
    assert len(pending) == 1  # `hookcage trust` asks again
    view = ex.inventory(project)[1][0]
    assert view.trusted is False and view.skip is not None and view.skip.reason == "untrusted"


def test_reviewed_under_gvisor_runs_under_gvisor(project: Path) -> None:
    review(project, "runsc")
    assert [r.command for r in runs(project, "runsc")] == ["sh .hookcage/check.sh"]


def test_reviewed_under_a_shared_kernel_runs_under_gvisor_too(project: Path) -> None:
    review(project, "runc")
    assert [r.command for r in runs(project, "runsc")] == ["sh .hookcage/check.sh"]
    assert [r.command for r in runs(project, "runc")] == ["sh .hookcage/check.sh"]
    ex, _ = executor(project, "runsc")
    assert ex.pending_reviews(project)[0] == []


@pytest.mark.parametrize("other", ["crun", "kata", "io.containerd.runc.v2"])
def test_every_runtime_but_gvisor_counts_as_a_shared_kernel(project: Path, other: str) -> None:
    review(project, "runsc")
    assert runs(project, other) == []


def test_a_record_written_before_runtimes_were_covered_counts_as_a_shared_kernel(project: Path) -> None:
    # Such a record's profile has no "isolation" key: exactly a shared-kernel review's hash.
    subject = review(project, "runc")[0]
    assert "isolation" not in subject.profile
    stored = json.loads((project.parent / "home" / "trust.json").read_text())
    record = next(iter(stored["records"].values()))
    assert "isolation" not in record["profile"]
    assert runs(project, "runsc") and runs(project, "runc")


def test_the_gvisor_record_says_so_and_hashes_differently(project: Path) -> None:
    gvisor = review(project, "runsc")[0]
    ex, _ = executor(project, "runc")
    shared = ex.pending_reviews(project)[0][0][1]
    assert gvisor.profile["isolation"] == "gvisor" and "isolation" not in shared.profile
    assert gvisor.digest() != shared.digest()
    assert gvisor.covering_digests() == (gvisor.digest(), shared.digest())
    assert shared.covering_digests() == (shared.digest(),)
    assert TrustRecord.of(gvisor, "2026-11-24T00:00:00+00:00").profile["isolation"] == "gvisor"


def test_prune_keeps_a_shared_kernel_record_that_covers_gvisor_runs(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from executor.cli import cli

    review(project, "runc")
    monkeypatch.setenv("HOOKCAGE_HOME", str(project.parent / "home"))
    monkeypatch.setattr("executor.executor.default_sandbox_factory", lambda backend, settings: RuntimeSandbox("runsc"))
    monkeypatch.setattr("executor.cli.trust.executor_and_root",
                        lambda p: (executor(project, "runsc")[0], project))
    result = CliRunner().invoke(cli, ["trust", "prune", "--project", str(project)])
    assert result.exit_code == 0, result.output
    assert "pruned 0 record(s)" in result.output
    assert runs(project, "runc")



class ImageSandbox(RuntimeSandbox):
    """A fake docker backend whose images have ids (``sha256:`` + the tag)."""

    def image_identity(self, image: str | None) -> str:
        return f"sha256:{image or 'default'}"


@pytest.mark.parametrize(("backend", "runtime", "image", "profile", "digest"), [
    ("docker", "runc", None,
     '{"backend":"docker","cpus":null,"env":{"A":"1"},"image":"sha256:default","memory":null,"mounts":[],'
     '"network":"none","pids":null,"timeout":60.0,"workspace":"ro"}',
     "ffc707c0e7cdb6696b7e2862fb0f2f0d3bc4e7d34a9e1b0d9bf249684167b3b8"),
    ("docker", "runsc", "python:3.12",
     '{"backend":"docker","cpus":null,"env":{"A":"1"},"image":"sha256:python:3.12","isolation":"gvisor",'
     '"memory":null,"mounts":[],"network":"none","pids":null,"timeout":60.0,"workspace":"ro"}',
     "e454858a778bfcd4bff707f7406fc771048e18c9d2c9929929365e21b8e4c6f2"),
    ("host", None, None,
     '{"backend":"host","cpus":null,"env":{"A":"1"},"image":"host","memory":null,"mounts":[],'
     '"network":"none","pids":null,"timeout":60.0,"workspace":"ro"}',
     "2203b57b6e99e19963e0d5afaa2f782d2a0c4a19e62061f4849c8bfdaedbc214"),
])
def test_the_trust_profile_of_each_backend_hashes_as_it_always_did(
        tmp_path: Path, backend: str, runtime: str | None, image: str | None, profile: str, digest: str) -> None:
    """Every user's trust records hold these hashes: a backend's part of the profile (its image's id,
    gVisor's ``isolation``) must stay byte for byte, or every reviewed hook asks for review again."""
    from executor.core.hooks import HookSpec, Scope
    from executor.core.matchers import compile_matcher
    from executor.core.options import SandboxOptions
    from executor.sandbox.host import HostSandbox

    options = SandboxOptions(backend=backend, image=image)  # type: ignore[arg-type]
    hook = HookSpec(event="Stop", matcher=compile_matcher(None), type="command", command="true",
                    scope=Scope.PROJECT, source="/fixed/proj/.hookcage/hooks.json", json_path="hooks.Stop[0]",
                    sandbox=options, env=(("A", "1"),))
    sandboxes = {"docker": ImageSandbox(runtime or "runc"), "host": HostSandbox()}
    with HookExecutor(load_settings(home=tmp_path / "home"), sandboxes=sandboxes, environ={}) as ex:
        subject = ex.trust_subject(hook, Path("/fixed/proj"))
    assert json.dumps(subject.profile, sort_keys=True, separators=(",", ":")) == profile
    assert subject.digest() == digest
