"""Which engine answers (Docker, Podman rootful/rootless) and what hookcage changes for it (pure parts).

The answers below are trimmed from real ones: Docker 20.10 and Podman 4.3.1
(Debian bookworm), rootful and rootless, on a cgroup v1 host.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker  # type: ignore[import-untyped, unused-ignore]
import pytest

from executor.errors import ConfigError
from executor.sandbox.base import RunRequest
from executor.sandbox.docker import DockerProfile, container_args, host_config, self_ending
from executor.sandbox.engines import (
    DOCKER_TRAITS,
    PODMAN_ULIMITS,
    EngineTraits,
    detect_engine,
    engine_address,
    extra_ulimits,
    is_podman,
    limits_refusal,
    oom_unreported,
    podman_seccomp_file,
    restrict_namespaces,
    strip_engine_noise,
    unenforced_limits,
    userns_mode,
)
from executor.settings import check_engine_address, load_settings

DOCKER_VERSION = {
    "Platform": {"Name": "Docker Engine - Community"},
    "Components": [{"Name": "Engine", "Version": "20.10.24+dfsg1"}, {"Name": "runc", "Version": "1.1.5"}],
    "Version": "20.10.24+dfsg1",
    "ApiVersion": "1.41",
}
DOCKER_INFO = {
    "Runtimes": {"runc": {"path": "runc"}, "runsc": {"path": "/usr/bin/runsc"}},
    "DefaultRuntime": "runc",
    "SecurityOptions": ["name=seccomp,profile=default"],
    "CgroupVersion": "1",
}
PODMAN_VERSION = {
    "Platform": {"Name": "linux/amd64/debian-12"},
    "Components": [
        {"Name": "Podman Engine", "Version": "4.3.1", "Details": {"APIVersion": "4.3.1"}},
        {"Name": "Conmon", "Version": "conmon version 2.1.6"},
    ],
    "Version": "4.3.1",
    "ApiVersion": "1.41",
}
# Podman lists containers.conf's whole runtime table, installed or not, and says nothing of rootless.
PODMAN_INFO = {
    "Runtimes": {name: {"path": f"/usr/bin/{name}"} for name in ("crun", "kata", "krun", "runc", "runsc")},
    "DefaultRuntime": "crun",
    "SecurityOptions": ["name=seccomp,profile=default"],
    "CgroupVersion": "1",
    "MemoryLimit": True,
}
ALL_V1 = ["cpuset", "cpu", "cpuacct", "blkio", "memory", "devices", "freezer", "pids"]


def libpod(*, rootless: bool, controllers: list[str], cgroup: str = "v1", runtime: str = "crun") -> dict[str, Any]:
    return {"host": {"security": {"rootless": rootless}, "cgroupControllers": controllers,
                     "cgroupVersion": cgroup, "ociRuntime": {"name": runtime}}}


def test_docker_is_docker_with_its_runtimes() -> None:
    traits = detect_engine(DOCKER_VERSION, DOCKER_INFO)
    assert not is_podman(DOCKER_VERSION)
    assert traits.kind == "docker" and not traits.rootless and traits.name == "Docker 20.10.24+dfsg1"
    assert traits.runtimes == ("runc", "runsc") and traits.default_runtime == "runc"
    assert unenforced_limits(traits) == [] and limits_refusal(traits, "unix:///x") is None
    assert extra_ulimits(traits) == () and userns_mode(traits) is None and traits.notes == ()


def test_rootful_podman_has_only_its_default_runtime_and_names_its_ulimits() -> None:
    traits = detect_engine(PODMAN_VERSION, PODMAN_INFO, libpod(rootless=False, controllers=ALL_V1))
    assert is_podman(PODMAN_VERSION)
    assert traits.kind == "podman" and not traits.rootless and traits.name == "Podman 4.3.1"
    assert traits.runtimes == ("crun",)  # not runsc: Podman's list is its configuration's, not what is installed
    assert extra_ulimits(traits) == PODMAN_ULIMITS and userns_mode(traits) is None
    assert unenforced_limits(traits) == [] and limits_refusal(traits, "unix:///x") is None
    assert any("runtimes" in note for note in traits.notes)


def test_rootless_podman_on_cgroup_v1_is_refused_in_one_line() -> None:
    traits = detect_engine(PODMAN_VERSION, PODMAN_INFO, libpod(rootless=True, controllers=[], runtime="runc"))
    assert traits.rootless and traits.default_runtime == "runc" and traits.runtimes == ("runc",)
    assert unenforced_limits(traits) == ["memory", "pids", "cpu"]
    refusal = limits_refusal(traits, "unix:///run/user/1000/podman/podman.sock")
    assert refusal is not None and "\n" not in refusal
    assert "Podman 4.3.1 (rootless)" in refusal and "cgroup v1" in refusal and "docs/engines.md" in refusal
    assert userns_mode(traits) == "keep-id" and extra_ulimits(traits) == ()


@pytest.mark.parametrize(
    ("controllers", "missing"),
    [(["cpu", "memory", "pids"], []), (["memory", "pids"], ["cpu"]), (["cpuset", "cpu", "io"], ["memory", "pids"])],
)
def test_rootless_podman_on_cgroup_v2_needs_the_controllers_delegated(
    controllers: list[str], missing: list[str]
) -> None:
    info = {**PODMAN_INFO, "CgroupVersion": "2"}
    traits = detect_engine(PODMAN_VERSION, info, libpod(rootless=True, controllers=controllers, cgroup="v2"))
    assert traits.cgroup_version == "2"
    assert unenforced_limits(traits) == missing
    refusal = limits_refusal(traits, "unix:///s")
    assert (refusal is None) == (not missing)
    if refusal:
        assert "not delegated" in refusal and "/".join(missing) in refusal


def test_podman_without_libpod_info_is_still_podman() -> None:
    traits = detect_engine(PODMAN_VERSION, PODMAN_INFO, None)
    assert traits.kind == "podman" and traits.runtimes == ("crun",)
    assert traits.controllers is None and unenforced_limits(traits) == []


def test_engine_address_precedence() -> None:
    env = {"DOCKER_HOST": "unix:///var/run/docker.sock", "HOOKCAGE_ENGINE": "unix:///run/podman/podman.sock"}
    assert engine_address("tcp://h:2376", env) == "tcp://h:2376"
    assert engine_address(None, env) == "unix:///run/podman/podman.sock"
    assert engine_address(None, {**env, "HOOKCAGE_ENGINE": " "}) == "unix:///var/run/docker.sock"
    assert engine_address("", {}) is None


@pytest.mark.parametrize("value", ["unix:///run/podman/podman.sock", "tcp://10.0.0.2:2376", " unix:///s "])
def test_engine_addresses_accepted(value: str) -> None:
    assert check_engine_address(value) == value.strip()


@pytest.mark.parametrize("value", ["/run/podman/podman.sock", "unix://relative.sock", "ssh://me@host", "tcp://", "npipe:////./x"])
def test_engine_addresses_refused(value: str) -> None:
    with pytest.raises(ValueError, match="unix:///"):
        check_engine_address(value)


def test_engine_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKCAGE_ENGINE", "unix:///run/user/1000/podman/podman.sock")
    assert load_settings().engine == "unix:///run/user/1000/podman/podman.sock"
    monkeypatch.setenv("HOOKCAGE_ENGINE", "")
    assert load_settings().engine is None
    monkeypatch.setenv("HOOKCAGE_ENGINE", "podman.sock")
    with pytest.raises(ConfigError, match=r"HOOKCAGE_ENGINE.*unix:///"):
        load_settings()


def _args(traits: EngineTraits, tmp_path: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    request = RunRequest(command="true", project_dir=str(tmp_path), cwd=str(tmp_path))
    return container_args(DockerProfile(engine=traits), request, name="hookcage-x", now=0.0)


def test_container_args_per_engine(tmp_path: Any) -> None:
    _, docker_host = _args(DOCKER_TRAITS, tmp_path)
    assert [u["name"] for u in docker_host["ulimits"]] == ["fsize", "core"] and "userns_mode" not in docker_host
    rootful = detect_engine(PODMAN_VERSION, PODMAN_INFO, libpod(rootless=False, controllers=ALL_V1))
    _, host = _args(rootful, tmp_path)
    assert [u["name"] for u in host["ulimits"]] == ["fsize", "core", "nofile", "nproc"]
    rootless = detect_engine(PODMAN_VERSION, {**PODMAN_INFO, "CgroupVersion": "2"},
                             libpod(rootless=True, controllers=["cpu", "memory", "pids"], cgroup="v2"))
    _, host = _args(rootless, tmp_path)
    assert host["userns_mode"] == "keep-id" and [u["name"] for u in host["ulimits"]] == ["fsize", "core"]
    config = host_config(docker.APIClient(base_url="unix:///nonexistent.sock", version="1.41"), host)
    assert config["UsernsMode"] == "keep-id" and config["ReadonlyRootfs"] is True


def test_self_ending_fires_under_either_engines_init() -> None:
    script = self_ending("echo hi", 5)
    assert '= docker-init ]' in script and '= podman-init ]' in script


def test_a_cold_run_on_podman_reads_the_stdin_its_hook_left(tmp_path: Any) -> None:
    """On Podman the hook is the shell's child, which then drains stdin (conmon's reset loses output)."""
    rootful = detect_engine(PODMAN_VERSION, PODMAN_INFO, libpod(rootless=False, controllers=ALL_V1))
    create, _ = _args(rootful, tmp_path)
    script = create["command"][2]
    assert script.endswith("/bin/sh -c 'true'; _hc_r=$?; "
                           "! command -v cat >/dev/null 2>&1 || cat >/dev/null 2>&1; exit $_hc_r")
    docker_create, _ = _args(DOCKER_TRAITS, tmp_path)
    assert docker_create["command"][2].endswith("exec /bin/sh -c 'true'")  # Docker: the hook is exec'd


def test_podmans_attach_error_is_dropped_from_the_end_of_stderr_only() -> None:
    podman = detect_engine(PODMAN_VERSION, PODMAN_INFO, libpod(rootless=False, controllers=ALL_V1))
    noise = b"Error: write unixpacket @->/proc/self/fd/14/attach: write: connection reset by peer\n"
    assert strip_engine_noise(podman, b"err\n" + noise) == b"err\n"
    assert strip_engine_noise(podman, noise) == b""
    assert strip_engine_noise(podman, noise + b"more\n") == noise + b"more\n"  # not last: the hook's own
    assert strip_engine_noise(podman, b"x" + noise) == b"x" + noise  # not a line of its own
    assert strip_engine_noise(DOCKER_TRAITS, b"err\n" + noise) == b"err\n" + noise


def test_restricted_seccomp_refuses_namespaces_and_keeps_the_rest(tmp_path: Any) -> None:
    default = {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
        {"names": ["read", "unshare", "clone", "setns", "clone3"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}}]}
    restricted = restrict_namespaces(default)
    assert restricted["syscalls"][0] == {"names": ["read"], "action": "SCMP_ACT_ALLOW"}
    assert restricted["syscalls"][1]["names"] == ["bpf"]
    by_name = {r["names"][0]: r for r in restricted["syscalls"][2:]}
    assert by_name["clone"]["args"][0]["value"] == 0x7E020000 and by_name["clone3"]["errnoRet"] == 38
    assert by_name["unshare"]["action"] == "SCMP_ACT_ERRNO" and "setns" in by_name["unshare"]["names"]
    source = tmp_path / "seccomp.json"
    source.write_text(json.dumps(default))
    first = podman_seccomp_file(tmp_path / "cache", str(source))
    assert first == podman_seccomp_file(tmp_path / "cache", str(source))  # one file per content
    assert json.loads(Path(first).read_text()) == json.loads(json.dumps(restricted, sort_keys=True))
    assert oct(Path(first).stat().st_mode & 0o777) == "0o644"


def test_unreported_oom_on_podman_only() -> None:
    podman = detect_engine(PODMAN_VERSION, PODMAN_INFO, libpod(rootless=False, controllers=ALL_V1))
    assert oom_unreported(podman, exit_code=137, oom_killed=False, timed_out=False)
    assert not oom_unreported(podman, exit_code=137, oom_killed=False, timed_out=True)
    assert not oom_unreported(podman, exit_code=1, oom_killed=False, timed_out=False)
    assert not oom_unreported(DOCKER_TRAITS, exit_code=137, oom_killed=False, timed_out=False)


def test_podmans_untagged_import_answer_names_the_id() -> None:
    from executor.provision.base_image import imported_id

    digest = "sha256:" + "ab" * 32
    assert imported_id(json.dumps({"status": digest, "progress": "", "id": digest}) + "\n") == digest
    assert imported_id('{"status":"Importing"}\n{"error":"x"}') is None
