"""path_map (issue 14): the one translation, the setting, and how hookcage finds its own container (no Docker).

The samples are real: ``/proc/self/mountinfo`` of a container of this
project's engine (Docker 20.10, cgroup v1, fuse-overlayfs) started with
``-v /tmp/h4s/ws:/work/proj:ro -v h4vol:/root/.config/hookcage -v
/var/run/docker.sock:/var/run/docker.sock --tmpfs /scratch``, and its
``docker inspect --format '{{json .Mounts}}'``. The cgroup v2 and Podman
lines are written after those engines' formats.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import docker.errors  # type: ignore[import-untyped, unused-ignore]
import pytest
import requests

from executor.core.options import SandboxOptions
from executor.core.pathmap import IDENTITY, PathMap, engine_path, parse_path_map, with_resolved_keys
from executor.errors import ConfigError, SandboxError
from executor.sandbox.base import Bind, RunRequest
from executor.sandbox.docker import (
    DockerProfile,
    DockerSandbox,
    container_args,
    map_engine_error,
    run_mounts,
)
from executor.sandbox.docker.doctor import refuse_wrong_home_mapping
from executor.sandbox.pathcheck import Seen, carrying_entries, compare
from executor.sandbox.paths import (
    Candidates,
    container_ids_from_cgroup,
    container_ids_from_mountinfo,
    detect_path_map,
    hostname_id,
    map_from_mounts,
    own_container,
)
from executor.settings import load_settings

CONTAINER = "650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857"
REAL_MOUNTINFO = """\
73 47 0:41 / / rw,nodev,noatime master:4 - fuse.fuse-overlayfs fuse-overlayfs rw,user_id=0,group_id=0,default_permissions,allow_other
74 73 0:43 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
75 73 0:44 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
76 75 0:45 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
77 73 0:46 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
78 77 0:47 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
79 78 0:29 /docker/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857 /sys/fs/cgroup/cpu ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu
80 78 0:30 /docker/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857 /sys/fs/cgroup/cpuacct ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpuacct
81 78 0:31 /docker/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857 /sys/fs/cgroup/cpuset ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpuset
82 78 0:32 /docker/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857 /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory
83 78 0:33 /docker/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857 /sys/fs/cgroup/devices ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,devices
84 78 0:34 /docker/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857 /sys/fs/cgroup/freezer ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,freezer
85 78 0:35 /docker/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857 /sys/fs/cgroup/blkio ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,blkio
86 78 0:36 /docker/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857 /sys/fs/cgroup/pids ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,pids
87 78 0:37 /docker/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857 /sys/fs/cgroup/systemd ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,name=systemd
88 75 0:42 / /dev/mqueue rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw
89 75 0:48 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k
90 73 0:49 / /scratch rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw
91 73 254:0 /tmp/h4s/ws /work/proj ro,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
92 73 254:0 /var/lib/docker/containers/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
93 73 254:0 /var/lib/docker/containers/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
94 73 254:0 /var/lib/docker/containers/650981c539f31763a853dc19b281272c23eeae5e1916a0b02eabc70a423ca857/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
95 73 254:0 /var/lib/docker/volumes/h4vol/_data /root/.config/hookcage rw,relatime master:1 - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
96 73 254:0 /run/docker.sock /run/docker.sock rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
48 74 0:43 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw
49 74 0:43 /fs /proc/fs ro,nosuid,nodev,noexec,relatime - proc proc rw
50 74 0:43 /irq /proc/irq ro,nosuid,nodev,noexec,relatime - proc proc rw
51 74 0:43 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw
52 74 0:50 / /proc/acpi ro,relatime - tmpfs tmpfs ro
53 74 0:44 /null /proc/keys rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
54 74 0:44 /null /proc/timer_list rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
55 77 0:51 / /sys/firmware ro,relatime - tmpfs tmpfs ro
"""
REAL_MOUNTS: list[dict[str, Any]] = [
    {"Type": "bind", "Source": "/var/run/docker.sock", "Destination": "/var/run/docker.sock", "Mode": "",
     "RW": True, "Propagation": "rprivate"},
    {"Type": "bind", "Source": "/tmp/h4s/ws", "Destination": "/work/proj", "Mode": "ro", "RW": False,
     "Propagation": "rprivate"},
    {"Type": "volume", "Name": "h4vol", "Source": "/var/lib/docker/volumes/h4vol/_data",
     "Destination": "/root/.config/hookcage", "Driver": "local", "Mode": "z", "RW": True, "Propagation": ""},
]


def pm(entries: dict[str, str], origin: str = "setting") -> PathMap:
    return PathMap(parse_path_map(entries), origin)  # type: ignore[arg-type]


# -- the translation ----------------------------------------------------------------


def test_without_a_map_every_path_passes_unchanged() -> None:
    assert engine_path("/anything/at/all", IDENTITY) == "/anything/at/all"
    assert engine_path("/x/../y", IDENTITY) == "/x/../y"  # nothing normalised: nothing changes on the host


def test_the_longest_entry_wins_whatever_the_order() -> None:
    for entries in ({"/work": "/h/work", "/work/cache": "/h/cache"}, {"/work/cache": "/h/cache", "/work": "/h/work"}):
        paths = pm(entries)
        assert engine_path("/work/cache/x", paths) == "/h/cache/x"
        assert engine_path("/work/cache", paths) == "/h/cache"
        assert engine_path("/work/cachet", paths) == "/h/work/cachet"
        assert engine_path("/work/src/a.py", paths) == "/h/work/src/a.py"
        assert engine_path("/work", paths) == "/h/work"


def test_a_prefix_that_is_not_a_whole_component_does_not_match() -> None:
    paths = pm({"/work": "/h/work"})
    with pytest.raises(SandboxError, match="/workspace/p is outside every path_map entry"):
        engine_path("/workspace/p", paths)
    with pytest.raises(SandboxError, match="outside"):
        engine_path("/wor", paths)


def test_dot_dot_cannot_climb_out_of_an_entry_and_stay_translated() -> None:
    paths = pm({"/work": "/h/work"})
    with pytest.raises(SandboxError, match="/etc/passwd is outside"):
        engine_path("/work/../etc/passwd", paths)
    with pytest.raises(SandboxError, match="/etc is outside"):
        engine_path("/work/a/../../etc", paths)
    assert engine_path("/work/a/../b/./c", paths) == "/h/work/b/c"
    assert engine_path("//work//a/", paths) == "/h/work/a"


def test_trailing_slashes_and_doubled_slashes_in_entries_are_the_same_entry() -> None:
    assert dict(parse_path_map({"/work/": "/h/work/", "//data//": "/h/data"})) == {"/work": "/h/work", "/data": "/h/data"}
    assert parse_path_map({"/work/": "/h/work", "/work": "/h/work"}) == (("/work", "/h/work"),)
    with pytest.raises(ValueError, match="names /work twice with different targets"):
        parse_path_map({"/work/": "/h/work", "/work": "/elsewhere"})


def test_a_root_entry_passes_the_rest_on_purpose_and_maps_under_another_root() -> None:
    paths = pm({"/": "/", "/work": "/h/work"})
    assert engine_path("/opt/x", paths) == "/opt/x"
    assert engine_path("/work/x", paths) == "/h/work/x"
    assert engine_path("/", paths) == "/"
    rooted = pm({"/": "/srv/root"})
    assert engine_path("/", rooted) == "/srv/root"
    assert engine_path("/a/b", rooted) == "/srv/root/a/b"
    to_root = pm({"/mnt/host": "/"})
    assert engine_path("/mnt/host", to_root) == "/"
    assert engine_path("/mnt/host/etc", to_root) == "/etc"


def test_outside_every_entry_is_refused_with_the_fix_never_passed_unchanged() -> None:
    paths = pm({"/work": "/h/work"})
    with pytest.raises(SandboxError) as caught:
        engine_path("/tmp/staging/run-1/tree", paths)
    message = str(caught.value)
    assert "/tmp/staging/run-1/tree is outside every path_map entry" in message
    assert "/work -> /h/work" in message and "HOOKCAGE_PATH_MAP" in message and "\n" not in message


def test_a_detected_container_without_mounts_refuses_every_path() -> None:
    bare = PathMap((), "detected", CONTAINER)
    assert bare.active
    with pytest.raises(SandboxError, match="no mounts"):
        engine_path("/work", bare)


def test_paths_that_are_not_absolute_or_hold_nul_or_newline_are_refused() -> None:
    paths = pm({"/": "/"})
    for bad in ("work/x", "", "/a\0b", "/a\nb"):
        with pytest.raises(SandboxError, match="cannot hand the Docker engine"):
            engine_path(bad, paths)


@pytest.mark.parametrize("entries, message", [
    ({"work": "/h"}, "is not an absolute path"),
    ({"/work": "h"}, "is not an absolute path"),
    ({"/work": "/h/../etc"}, "holds '..'"),
    ({"/work/..": "/h"}, "holds '..'"),
    ({"/work": "/h\0x"}, "NUL"),
    ({"/wo\nrk": "/h"}, "newline"),
    ({"/work": 3}, "must be a path"),
])
def test_bad_entries_are_refused_naming_them(entries: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_path_map(entries)


def test_characters_the_overlay_option_cannot_carry_are_fine_in_a_translation() -> None:
    # What to do with them is the overlay's business (a symlink), not the translation's.
    paths = pm({"/work": "/h/a,b:c\\d"})
    assert engine_path("/work/p", paths) == "/h/a,b:c\\d/p"


def test_an_entry_reached_through_a_symlink_matches_its_resolved_form_too() -> None:
    paths = with_resolved_keys(pm({"/alias": "/h/real", "/work": "/h/work"}),
                               {"/alias": "/data/real", "/work": "/work"}.__getitem__)
    assert engine_path("/data/real/x", paths) == "/h/real/x"
    assert engine_path("/alias/x", paths) == "/h/real/x"
    assert len(paths.entries) == 3


# -- the setting --------------------------------------------------------------------


def test_the_setting_comes_from_the_environment_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKCAGE_HOME", str(tmp_path))
    monkeypatch.setenv("HOOKCAGE_PATH_MAP", '{"/work": "/home/me/work"}')
    assert load_settings().path_map == {"/work": "/home/me/work"}
    monkeypatch.setenv("HOOKCAGE_PATH_MAP", "{}")
    assert load_settings().path_map == {}
    monkeypatch.delenv("HOOKCAGE_PATH_MAP")
    assert load_settings().path_map is None


@pytest.mark.parametrize("value, message", [
    ('{"/work": "relative"}', "not an absolute path"),
    ('{"/work/": "/a", "/work": "/b"}', "twice"),
    ('["/work"]', "valid dictionary"),
    ('{"/work": ', "valid dictionary"),
])
def test_a_bad_setting_is_one_line_naming_the_variable(
    value: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKCAGE_HOME", str(tmp_path))
    monkeypatch.setenv("HOOKCAGE_PATH_MAP", value)
    with pytest.raises(ConfigError, match=f"environment variable HOOKCAGE_PATH_MAP: setting 'path_map': .*{message}"):
        load_settings()


def test_the_setting_comes_from_config_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKCAGE_HOME", str(tmp_path))
    monkeypatch.delenv("HOOKCAGE_PATH_MAP", raising=False)
    (tmp_path / "config.toml").write_text('[path_map]\n"/work" = "/home/me/work"\n')
    assert load_settings().path_map == {"/work": "/home/me/work"}
    (tmp_path / "config.toml").write_text('[path_map]\n"/work" = "work"\n')
    with pytest.raises(ConfigError, match=r"config\.toml: setting 'path_map'"):
        load_settings()


def test_an_invalid_map_given_to_the_sandbox_is_refused_at_once() -> None:
    with pytest.raises(SandboxError, match="not an absolute path"):
        DockerSandbox(path_map={"/work": "h"}, reap_on_start=False)


# -- finding hookcage's own container -----------------------------------------------


def test_the_container_id_is_read_from_the_files_the_engine_binds_into_it() -> None:
    assert container_ids_from_mountinfo(REAL_MOUNTINFO) == [CONTAINER]


def test_a_host_mountinfo_names_no_container() -> None:
    host = ("42 27 254:0 /var/lib/docker /var/lib/docker rw,relatime shared:1 - ext4 /dev/vda rw\n"
            "43 42 0:39 / /var/lib/docker/fuse-overlayfs/ff23/merged rw - fuse.fuse-overlayfs fuse-overlayfs rw\n"
            f"44 42 254:0 /var/lib/docker/containers/{CONTAINER}/hostname /var/lib/docker/containers/{CONTAINER}/"
            "hostname rw - ext4 /dev/vda rw\n")
    assert container_ids_from_mountinfo(host) == []


def test_only_the_engine_files_count_not_a_volume_whose_path_looks_like_a_container() -> None:
    fake = "b" * 64
    text = (f"90 73 254:0 /srv/containers/{fake}/hostname /data rw - ext4 /dev/vda rw\n"
            f"91 73 254:0 /srv/containers/{fake}/hosts /etc/hostname.bak rw - ext4 /dev/vda rw\n")
    assert container_ids_from_mountinfo(text) == []


def test_podman_and_escaped_mountinfo_lines() -> None:
    ident = "c" * 64
    podman = (f"700 650 0:60 /containers/storage/overlay-containers/{ident}/userdata/hostname /etc/hostname "
              "rw,nosuid,nodev - tmpfs tmpfs rw\n")
    assert container_ids_from_mountinfo(podman) == [ident]
    spaced = f"701 650 254:0 /var/lib/my\\040docker/containers/{ident}/hosts /etc/hosts rw - ext4 /dev/vda rw\n"
    assert container_ids_from_mountinfo(spaced) == [ident]


def test_cgroup_paths_name_the_container_under_v1_and_systemd_but_not_a_private_v2_namespace() -> None:
    v1 = "".join(f"{i}:cpu:/docker/{CONTAINER}\n" for i in range(3))
    assert container_ids_from_cgroup(v1) == [CONTAINER]
    scope = f"0::/system.slice/docker-{CONTAINER}.scope\n"
    assert container_ids_from_cgroup(scope) == [CONTAINER]
    assert container_ids_from_cgroup("0::/\n") == []
    assert container_ids_from_cgroup("4:memory:/process_api/dd56862365244961fca3dbf4b91aace3\n") == []
    assert container_ids_from_cgroup(f"0::/kubepods/pod1/{CONTAINER}0\n") == []  # 65 hex digits: no id


def test_a_hostname_is_an_id_prefix_only_when_it_looks_like_one() -> None:
    assert hostname_id(CONTAINER[:12]) == CONTAINER[:12]
    assert hostname_id("vm") is None
    assert hostname_id("hookcage") is None
    assert hostname_id("deadbeef") is None  # too short to be the default hostname


def test_the_mounts_give_destination_to_source_tmpfs_and_sourceless_ones_left_out() -> None:
    mounts = [*REAL_MOUNTS, {"Type": "tmpfs", "Source": "", "Destination": "/scratch"},
              {"Type": "volume", "Name": "nfs", "Source": "", "Destination": "/nfs", "Driver": "nfs"},
              {"Type": "bind", "Source": "C:\\Users\\me", "Destination": "/win"}]
    assert map_from_mounts(mounts) == (
        ("/root/.config/hookcage", "/var/lib/docker/volumes/h4vol/_data"),
        ("/var/run/docker.sock", "/var/run/docker.sock"),
        ("/work/proj", "/tmp/h4s/ws"),
    )


class FakeEngine:
    """Answers ``inspect_container`` from a table; records what was asked."""

    def __init__(self, containers: dict[str, dict[str, Any]]) -> None:
        self.containers = containers
        self.asked: list[str] = []

    def inspect_container(self, ident: str) -> dict[str, Any]:
        self.asked.append(ident)
        for key, value in self.containers.items():
            if key == ident or (len(ident) >= 12 and key.startswith(ident)):
                return value
        response = requests.Response()
        response.status_code = 404
        raise docker.errors.NotFound("no such container", response=response)


def inspected(ident: str, hostname: str | None = None) -> dict[str, Any]:
    return {"Id": ident, "Config": {"Hostname": hostname or ident[:12]}, "Mounts": REAL_MOUNTS}


def test_detection_maps_the_verified_containers_mounts() -> None:
    engine = FakeEngine({CONTAINER: inspected(CONTAINER)})
    paths = detect_path_map(engine, Candidates((CONTAINER,), CONTAINER[:12]))
    assert paths.origin == "detected" and paths.container == CONTAINER
    assert engine_path("/work/proj/src/a.py", paths) == "/tmp/h4s/ws/src/a.py"
    assert engine_path("/root/.config/hookcage/staging/run-1/tree",
                       paths) == "/var/lib/docker/volumes/h4vol/_data/staging/run-1/tree"
    with pytest.raises(SandboxError, match="/tmp/x is outside"):
        engine_path("/tmp/x", paths)  # the container's own /tmp: the engine cannot see it
    assert engine.asked == [CONTAINER]


def test_not_in_a_container_asks_the_engine_nothing() -> None:
    class Untouchable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the engine was asked {name}")

    assert detect_path_map(Untouchable(), Candidates()) is IDENTITY


def test_a_container_of_another_engine_is_no_container_of_this_one() -> None:
    # e.g. hookcage in a CI job container talking to docker:dind over TCP.
    assert detect_path_map(FakeEngine({}), Candidates((CONTAINER,), CONTAINER[:12])) is IDENTITY


def test_a_hostname_counts_only_when_the_container_it_finds_has_it_as_its_default_hostname() -> None:
    other = "d" * 64
    engine = FakeEngine({other: inspected(other, hostname="custom")})
    assert own_container(engine, Candidates((), other[:12])) is None
    engine = FakeEngine({other: inspected(other)})
    found = own_container(engine, Candidates((), other[:12]))
    assert found is not None and found["Id"] == other


def test_a_whole_id_must_be_the_inspected_containers_id() -> None:
    engine = FakeEngine({CONTAINER: inspected("e" * 64)})
    assert own_container(engine, Candidates((CONTAINER,))) is None


def test_the_first_candidate_the_engine_knows_wins() -> None:
    stranger, mine = "1" * 64, CONTAINER
    engine = FakeEngine({mine: inspected(mine)})
    found = own_container(engine, Candidates((stranger, mine)))
    assert found is not None and found["Id"] == mine
    assert engine.asked == [stranger, mine]


# -- the mounts of a run, translated -----------------------------------------------------


def test_every_source_of_a_run_is_the_engines_path(tmp_path: Path) -> None:
    here = tmp_path / "svc"
    project = here / "work" / "p"
    (project / "sub").mkdir(parents=True)
    home = here / "home"
    (home / "deps").mkdir(parents=True)
    staged = home / "staging" / "run-1" / "x.sh"
    staged.parent.mkdir(parents=True)
    staged.write_text("echo\n")
    transcript = here / "t.jsonl"
    transcript.write_text("{}\n")
    paths = pm({str(here / "work"): "/host/work", str(home): "/var/lib/docker/volumes/h/_data",
                str(transcript): "/host/t.jsonl"})
    req = RunRequest(
        command="true", cwd=str(project / "sub"), project_dir=str(project), transcript_path=str(transcript),
        options=SandboxOptions(workspace="rw", mounts=(str(project / "sub"),)),
        overlays={str(project / "x.sh"): str(staged)},
        binds=(Bind(str(home / "deps"), "/opt/hookcage-deps"),),
    )
    mounts, workdir = run_mounts(req, paths)
    assert workdir == str(project / "sub")  # the container's side is hookcage's path
    assert [(m["Source"], m["Target"]) for m in mounts] == [
        ("/host/work/p", str(project)),
        ("/var/lib/docker/volumes/h/_data/staging/run-1/x.sh", str(project / "x.sh")),
        ("/host/work/p/sub", str(project / "sub")),
        ("/var/lib/docker/volumes/h/_data/deps", "/opt/hookcage-deps"),
        ("/host/t.jsonl", str(transcript)),
    ]
    create, host = container_args(DockerProfile(paths=paths), req, name="n", now=0)
    assert host["mounts"] == mounts and create["working_dir"] == str(project / "sub")


def test_a_workspace_the_engine_cannot_see_is_refused_and_a_transcript_left_out(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("{}\n")
    paths = pm({str(tmp_path / "elsewhere"): "/host/elsewhere"})
    req = RunRequest(command="true", cwd=str(project), project_dir=str(project))
    with pytest.raises(SandboxError, match=f"{project} is outside every path_map entry"):
        run_mounts(req, paths)
    paths = pm({str(project): "/host/p"})
    req = RunRequest(command="true", cwd=str(project), project_dir=str(project), transcript_path=str(transcript))
    assert [m["Source"] for m in run_mounts(req, paths)[0]] == ["/host/p"]


def test_an_absolute_symlink_in_the_workspace_is_resolved_as_hookcage_sees_it(tmp_path: Path) -> None:
    # On the engine's host the link's target would mean another directory.
    real = tmp_path / "work" / "real"
    real.mkdir(parents=True)
    (tmp_path / "work" / "link").symlink_to(real)
    paths = pm({str(tmp_path / "work"): "/host/work"})
    req = RunRequest(command="true", cwd=str(tmp_path / "work" / "link"), project_dir=str(tmp_path / "work" / "link"))
    mount = run_mounts(req, paths)[0][0]
    assert (mount["Source"], mount["Target"]) == ("/host/work/real", str(tmp_path / "work" / "link"))


def test_the_overlay_layers_are_the_engines_paths(tmp_path: Path) -> None:
    project = tmp_path / "work" / "p"
    project.mkdir(parents=True)
    tree = tmp_path / "home" / "staging" / "run-1" / "tree"
    tree.mkdir(parents=True)
    paths = pm({str(tmp_path / "work"): "/host/work", str(tmp_path / "home"): "/host/home"})
    req = RunRequest(command="true", cwd=str(project), project_dir=str(project),
                     overlays={f"{project}/a.sh": f"{tree}/a.sh"})
    mount = run_mounts(req, paths)[0][0]
    assert mount["Target"] == str(project)
    assert mount["VolumeOptions"]["DriverConfig"]["Options"]["o"] == (
        "lowerdir=/host/home/staging/run-1/tree:/host/work/p")


def test_an_engine_project_path_the_overlay_cannot_carry_goes_through_a_link_holding_the_engines_path(
    tmp_path: Path,
) -> None:
    project = tmp_path / "work" / "p"
    project.mkdir(parents=True)
    run = tmp_path / "home" / "staging" / "run-1"
    (run / "tree").mkdir(parents=True)
    paths = pm({str(tmp_path / "work"): "/host/we,ird:work", str(tmp_path / "home"): "/host/home"})
    req = RunRequest(command="true", cwd=str(project), project_dir=str(project),
                     overlays={f"{project}/a.sh": f"{run}/tree/a.sh"})
    options = run_mounts(req, paths)[0][0]["VolumeOptions"]["DriverConfig"]["Options"]
    assert options["o"] == "lowerdir=/host/home/staging/run-1/tree:/host/home/staging/run-1/project"
    assert os.readlink(run / "project") == "/host/we,ird:work/p"  # followed on the engine's host


def test_a_staging_folder_whose_engine_path_the_overlay_cannot_carry_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "work" / "p"
    project.mkdir(parents=True)
    tree = tmp_path / "home" / "staging" / "run-1" / "tree"
    tree.mkdir(parents=True)
    paths = pm({str(tmp_path / "work"): "/host/work", str(tmp_path / "home"): "/host/ho:me"})
    req = RunRequest(command="true", cwd=str(project), project_dir=str(project),
                     overlays={f"{project}/a.sh": f"{tree}/a.sh"})
    with pytest.raises(SandboxError, match="cannot lay the reviewed files over the workspace: '/host/ho:me/"):
        run_mounts(req, paths)


def test_a_missing_mount_source_is_one_line_naming_it_and_the_fix() -> None:
    response = requests.Response()
    response.status_code = 400
    exc = docker.errors.APIError("400 Client Error", response=response, explanation=(
        'invalid mount config for type "bind": bind source path does not exist: /host/work/p'))
    message = str(map_engine_error(exc, step="create", url="unix:///var/run/docker.sock"))
    assert message.startswith("the Docker engine's host has no /host/work/p to mount")
    assert "path_map" in message and "hookcage doctor" in message
    exc = docker.errors.APIError("500", response=response, explanation=(
        "error while mounting volume '/var/lib/docker/volumes/5254/_data': failed to mount local volume: mount "
        "overlay:/var/lib/docker/volumes/5254/_data, data: lowerdir=/h/tree:/h/p: no such file or directory"))
    assert "has no /h/tree:/h/p to mount" in str(map_engine_error(exc, step="start", url="u"))


# -- the probe's verdict --------------------------------------------------------------


def test_the_probe_says_wrong_for_another_inode_even_with_the_same_listing() -> None:
    empty = Seen(ino=10, digest="e3b0", count=0)
    ok, detail = compare("/home", "/h/other", empty, Seen(ino=11, digest="e3b0", count=0), empty)
    assert not ok and "another directory" in detail and "inode 11 there, 10 here" in detail


def test_the_probe_says_wrong_for_other_entries_and_right_when_a_listing_matches_either_side() -> None:
    before, after = Seen(5, "aa", 3), Seen(5, "bb", 4)
    assert compare("/w", "/h/w", before, Seen(5, "cc", 7), after) == (
        False, "the engine's /h/w holds other entries than hookcage's /w (7 there, 3 here)")
    assert compare("/w", "/h/w", before, Seen(5, "bb", 4), after)[0]  # a file made during the probe
    assert compare("/w", "/h/w", before, Seen(5, None, None), after)[0]  # unreadable there: the inode decides


def test_serve_probes_the_entry_translating_its_home_and_those_inside_it_only() -> None:
    paths = pm({"/": "/", "/state": "/h/state", "/state/deps": "/h/deps", "/work": "/h/work", "/stat": "/h/stat"})
    assert sorted(carrying_entries(paths, "/state")) == [("/state", "/h/state"), ("/state/deps", "/h/deps")]
    assert carrying_entries(paths, "/state/homes/x") == [("/state", "/h/state")]
    assert carrying_entries(paths, "/opt/home") == [("/", "/")]


def test_serve_asks_the_engine_nothing_without_a_map(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import executor.sandbox.docker.doctor as docker_doctor

    def no_engine(**_: Any) -> Any:
        raise AssertionError("the engine was asked")

    monkeypatch.setattr(docker_doctor, "default_client", no_engine)
    monkeypatch.setattr(Candidates, "of_this_process", classmethod(lambda cls: cls()))
    refuse_wrong_home_mapping(tmp_path, None)  # on the engine's host
    refuse_wrong_home_mapping(tmp_path, {})  # turned off


def test_a_volume_mounted_with_a_subpath_maps_to_that_folder_of_the_volume() -> None:
    mounts = [{"Type": "volume", "Name": "v", "Source": "/var/lib/docker/volumes/v/_data", "Destination": "/home"},
              {"Type": "volume", "Name": "w", "Source": "/var/lib/docker/volumes/w/_data", "Destination": "/w"},
              {"Type": "bind", "Source": "/srv/x", "Destination": "/x"}]
    requested = [{"Type": "volume", "Source": "v", "Target": "/home", "VolumeOptions": {"Subpath": "hookcage/state"}},
                 {"Type": "volume", "Source": "w", "Target": "/w", "VolumeOptions": {"Subpath": "../escape"}},
                 {"Type": "bind", "Source": "/srv/x", "Target": "/x"}]
    assert dict(map_from_mounts(mounts, requested)) == {
        "/home": "/var/lib/docker/volumes/v/_data/hookcage/state", "/x": "/srv/x"}
