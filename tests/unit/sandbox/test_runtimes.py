"""The runtime setting's resolution and the daemon.json merge of `hookcage setup runsc` (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from executor.errors import ConfigError
from executor.sandbox.runtimes import (
    DaemonJsonError,
    isolation,
    merge_runtime,
    parse_daemon_json,
    resolve_runtime,
    runtime_entry,
    unexpected_keys,
)
from executor.settings import load_settings


@pytest.mark.parametrize(("setting", "runtimes", "default", "resolved"), [
    ("auto", ["runc", "runsc"], "runc", "runsc"),
    ("auto", ["io.containerd.runc.v2", "runc"], "runc", "runc"),
    ("auto", ["crun", "runc"], "crun", "crun"),  # Podman's default
    (None, ["runc", "runsc"], "runc", "runsc"),
    ("", ["runc"], "runc", "runc"),
    ("auto", [], "", "runc"),
    ("runc", ["runc", "runsc"], "runc", "runc"),  # asked for: kept, even with gVisor there
    ("runsc", ["runc"], "runc", "runsc"),  # missing: kept (the engine refuses it), never swapped for runc
    ("kata", ["runc"], "runc", "kata"),
])
def test_resolve_runtime(setting: str | None, runtimes: list[str], default: str, resolved: str) -> None:
    assert resolve_runtime(setting, runtimes, default) == resolved


def test_only_gvisor_counts_as_a_kernel_of_its_own() -> None:
    assert isolation("runsc") == "gvisor" and isolation("runsc-debug") == "gvisor"
    for name in ("runc", "crun", "kata", "runscx", "io.containerd.runc.v2"):
        assert isolation(name) == "shared kernel"


def test_runtime_setting_defaults_to_auto_and_refuses_odd_names(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOOKCAGE_RUNTIME", raising=False)
    assert load_settings(home=tmp_path, managed_dir=tmp_path).runtime == "auto"
    monkeypatch.setenv("HOOKCAGE_RUNTIME", "")
    assert load_settings(home=tmp_path, managed_dir=tmp_path).runtime == "auto"
    monkeypatch.setenv("HOOKCAGE_RUNTIME", "runc")
    assert load_settings(home=tmp_path, managed_dir=tmp_path).runtime == "runc"
    monkeypatch.setenv("HOOKCAGE_RUNTIME", "runc --privileged")
    with pytest.raises(ConfigError, match="runtime"):
        load_settings(home=tmp_path, managed_dir=tmp_path)


ORIGINAL = ('{"data-root": "/var/lib/docker", "storage-driver": "fuse-overlayfs", "mtu": 1400, '
            '"log-driver": "json-file", "log-opts": {"max-size": "10m", "max-file": "3"}}')


def test_merge_adds_runsc_and_keeps_every_key_in_order() -> None:
    config = parse_daemon_json(ORIGINAL)
    merge = merge_runtime(config, "runsc", runtime_entry("/usr/bin/runsc"))
    assert merge.changed and not merge.conflict
    assert list(merge.config) == ["data-root", "storage-driver", "mtu", "log-driver", "log-opts", "runtimes"]
    assert {k: v for k, v in merge.config.items() if k != "runtimes"} == json.loads(ORIGINAL)
    assert merge.config["runtimes"] == {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}}
    assert config == json.loads(ORIGINAL)  # the input is not changed


def test_merge_is_idempotent_and_keeps_other_runtimes() -> None:
    config = {"runtimes": {"kata": {"path": "/opt/kata"}}}
    once = merge_runtime(config, "runsc", runtime_entry("/usr/bin/runsc"))
    written = json.dumps(once.config, indent=4, sort_keys=True)  # as runsc install writes it
    twice = merge_runtime(parse_daemon_json(written), "runsc", runtime_entry("/usr/bin/runsc"))
    assert not twice.changed and twice.config == once.config
    assert once.config["runtimes"]["kata"] == {"path": "/opt/kata"}


def test_an_entry_with_other_settings_is_a_conflict_unless_forced() -> None:
    config = {"runtimes": {"runsc": {"path": "/usr/local/bin/runsc"}}}
    merge = merge_runtime(config, "runsc", runtime_entry("/usr/bin/runsc"))
    assert not merge.changed and merge.config == config
    assert 'path is "/usr/local/bin/runsc", hookcage would set "/usr/bin/runsc"' in merge.conflict
    assert 'runtimeArgs is absent, hookcage would set ["--network=none"]' in merge.conflict
    forced = merge_runtime(config, "runsc", runtime_entry("/usr/bin/runsc"), force=True)
    assert forced.changed and forced.replaced == {"path": "/usr/local/bin/runsc"}
    assert forced.config["runtimes"]["runsc"]["path"] == "/usr/bin/runsc"


@pytest.mark.parametrize(("text", "said"), [
    ('{"a": 1,', "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"mtu": 1400, "mtu": 1500}', "'mtu' appears twice"),
    ("null", "not a JSON object"),
])
def test_daemon_json_that_is_not_an_object_is_refused(text: str, said: str) -> None:
    with pytest.raises(DaemonJsonError, match=said):
        parse_daemon_json(text)


def test_blank_daemon_json_is_empty() -> None:
    assert parse_daemon_json("") == {} and parse_daemon_json(" \n") == {}


@pytest.mark.parametrize("config", [{"runtimes": []}, {"runtimes": {"runsc": "/usr/bin/runsc"}}])
def test_runtimes_of_the_wrong_shape_are_refused(config: dict[str, object]) -> None:
    with pytest.raises(DaemonJsonError):
        merge_runtime(config, "runsc", runtime_entry("/usr/bin/runsc"), force=True)


def test_what_runsc_install_wrote_is_checked_key_by_key() -> None:
    expected = merge_runtime(parse_daemon_json(ORIGINAL), "runsc", runtime_entry("/usr/bin/runsc")).config
    # runsc install sorts the keys and indents by four: the same data.
    assert unexpected_keys(expected, json.loads(json.dumps(expected, indent=4, sort_keys=True))) == []
    assert unexpected_keys(expected, {**expected, "userland-proxy": False}) == ["userland-proxy"]
    assert unexpected_keys(expected, {k: v for k, v in expected.items() if k != "mtu"}) == ["mtu"]
    other = {**expected, "runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": []}, "kata": {}}}
    assert unexpected_keys(expected, other) == ["runtimes.kata", "runtimes.runsc"]
    # Go reads numbers as floats: an integer past 2**53 comes back rounded.
    assert unexpected_keys({"n": 12345678901234567890}, {"n": 12345678901234567000}) == ["n"]


def test_under_gvisor_the_hooks_process_limit_is_rlimit_nproc(tmp_path: Path) -> None:
    from executor.core.options import SandboxOptions
    from executor.sandbox.base import RunRequest
    from executor.sandbox.conventions import SELF_END_PIDS
    from executor.sandbox.docker.profile import DockerProfile, container_args
    from executor.sandbox.relay import RELAY_PIDS

    request = RunRequest(command="true", project_dir=str(tmp_path), cwd=str(tmp_path),
                         options=SandboxOptions(pids=64))
    _, host = container_args(DockerProfile(runtime="runsc"), request, name="hookcage-x", now=1.0)
    tasks = 64 + SELF_END_PIDS + RELAY_PIDS  # the relay of the hook's output runs beside it under gVisor
    assert {"name": "nproc", "soft": tasks, "hard": tasks} in host["ulimits"]
    # The engine's limit counts gVisor's own host threads (~17 per hook process measured): a backstop.
    assert host["pids_limit"] == tasks * 24 + 1024
    assert host["runtime"] == "runsc"
    _, runc = container_args(DockerProfile(runtime="runc"), request, name="hookcage-x", now=1.0)
    assert runc["pids_limit"] == 64 + SELF_END_PIDS and all(u["name"] != "nproc" for u in runc["ulimits"])
