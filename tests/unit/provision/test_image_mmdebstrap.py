"""hookcage's own mmdebstrap (executor.provision.mmdebstrap), the command it runs, and the automatic online/offline
choice, no engine.

apt and dpkg-deb are faked here (a runner that plays their parts); the real
fetch runs in tests/integration/test_base_without_mmdebstrap.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests.exceptions  # type: ignore[import-untyped, unused-ignore]

from executor.cachedir import cache_dir
from executor.provision import base_image, images
from executor.provision import mmdebstrap as mm
from executor.provision.base_image import mmdebstrap_command
from executor.provision.mmdebstrap import (
    MIN_VERSION,
    STAMP,
    DownloadURI,
    Mmdebstrap,
    MmdebstrapFetchError,
    apt_config,
    apt_options,
    cached_mmdebstrap,
    deb_fields,
    fetch_mmdebstrap,
    find_mmdebstrap,
    parse_print_uris,
    shown,
    too_old,
    unsafe_for_root,
    upstream_version,
    version_dir,
)
from executor.provision.recipe import PACKAGES_LABEL, RUNNER_PACKAGES, SLIM_IMAGE, base_inputs
from executor.sandbox.docker.imagefacts import ImageBuildError

pytestmark = pytest.mark.spawns

VERSION = "1.3.5-7"
FILENAME = f"mmdebstrap_{VERSION}_all.deb"
DEB_BYTES = b"!<arch>\nnot really a deb, the fake dpkg-deb reads nothing\n"
SHA = hashlib.sha256(DEB_BYTES).hexdigest()
URI = f"http://deb.debian.org/debian/pool/main/m/mmdebstrap/{FILENAME}"


# --------------------------------------------------------------------------- pure parts


def test_cache_dir_follows_hookcage_home_then_xdg() -> None:
    assert cache_dir({"HOOKCAGE_HOME": "/h/home"}) == Path("/h/home/cache")
    assert cache_dir({"XDG_CACHE_HOME": "/x/cache"}) == Path("/x/cache/hookcage")
    assert cache_dir({"XDG_CACHE_HOME": "relative"}).name == "hookcage"
    assert cache_dir({}).name == "hookcage"


def test_shown_writes_home_as_tilde() -> None:
    assert shown("/root/.cache/hookcage", home="/root") == "~/.cache/hookcage"
    assert shown("/rootless/x", home="/root") == "/rootless/x"
    assert shown("/x", home="/") == "/x"


@pytest.mark.parametrize(
    ("version", "folder"),
    [(VERSION, f"mmdebstrap-{VERSION}"), ("1:1.0.9~rc1", "mmdebstrap-1%3a1.0.9~rc1")],
)
def test_version_dir(version: str, folder: str) -> None:
    assert version_dir(version) == folder


@pytest.mark.parametrize("version", ["", "../../etc", "1.0 2", "1.0/x"])
def test_version_dir_refuses_what_is_not_a_version(version: str) -> None:
    with pytest.raises(MmdebstrapFetchError, match="not a Debian version"):
        version_dir(version)


def test_apt_options_write_only_in_the_private_folder(tmp_path: Path) -> None:
    options = apt_options(tmp_path)
    pairs = dict(
        options[i + 1].split("=", 1) for i in range(len(options) - 1) if options[i] == "-o"
    )
    for name in ("Dir::State", "Dir::State::Lists", "Dir::State::Status", "Dir::Cache"):
        assert Path(pairs[name]).is_relative_to(tmp_path), name
    assert options[options.index("-c") + 1] == str(tmp_path / "apt.conf")
    # The host's sources and keyrings stay apt's own: nothing points Dir::Etc elsewhere.
    assert not any(name.startswith("Dir::Etc") for name in pairs)
    assert pairs["Acquire::AllowInsecureRepositories"] == "false"
    assert pairs["APT::Get::AllowUnauthenticated"] == "false"


@pytest.mark.skipif(shutil.which("apt-config") is None, reason="no apt on this machine")
def test_apt_config_drops_the_hosts_hook_commands(tmp_path: Path) -> None:
    (tmp_path / "apt.conf").write_text(apt_config())
    dumped = subprocess.run(
        ["apt-config", "-c", str(tmp_path / "apt.conf"), "dump"],
        capture_output=True, text=True, check=True,
    ).stdout
    for line in dumped.splitlines():
        if "Invoke" in line or "Pre-Install-Pkgs" in line:
            assert line.endswith(' "";'), line  # the list is empty: no command runs


def test_parse_print_uris() -> None:
    found = parse_print_uris(f"'{URI}' {FILENAME} 45106 SHA256:{SHA}\n")
    assert found == DownloadURI(URI, FILENAME, 45106, SHA)
    assert found.version == VERSION


def test_the_epoch_of_a_file_name_is_decoded() -> None:
    assert DownloadURI("u", "mmdebstrap_1%3a1.0_all.deb", 1, SHA).version == "1:1.0"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (f"'{URI}' {FILENAME} 45106 MD5Sum:{'0' * 32}\n", "no sha256"),
        (f"'{URI}' {FILENAME} 45106 SHA256:xyz\n", "no sha256"),
        (f"'{URI}' {FILENAME} many SHA256:{SHA}\n", "size"),
        ("", "printed no download"),
        (f"'{URI}' other_1_all.deb 1 SHA256:{SHA}\n", "printed no download"),
    ],
)
def test_parse_print_uris_refuses(text: str, match: str) -> None:
    with pytest.raises(MmdebstrapFetchError, match=match):
        parse_print_uris(text)


def test_deb_fields() -> None:
    text = f"Package: mmdebstrap\nVersion: {VERSION}\nArchitecture: all\n Description: x\n"
    assert deb_fields(text) == {"Package": "mmdebstrap", "Version": VERSION, "Architecture": "all"}


def test_unsafe_for_root(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    tmp_path.chmod(0o755)
    assert unsafe_for_root(folder) is None
    folder.chmod(0o777)
    assert "writable by others" in str(unsafe_for_root(folder))
    folder.chmod(0o700)
    tmp_path.chmod(0o777)  # a parent others may write: they could swap the cache
    assert "writable by others" in str(unsafe_for_root(folder))
    tmp_path.chmod(0o1777)  # sticky, like /tmp: they cannot
    assert unsafe_for_root(folder) is None
    tmp_path.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(folder, 4242, -1)  # another user's folder: they could change what root runs
        assert "belongs to uid 4242" in str(unsafe_for_root(folder))
        os.chown(folder, 0, -1)
    else:
        assert "belongs to uid" in str(unsafe_for_root(folder, euid=os.geteuid() + 4242))
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert "symbolic link" in str(unsafe_for_root(link))


# --------------------------------------------------------------------------- fetching (apt faked)


class FakeApt:
    """Plays apt-get and dpkg-deb; records the commands."""

    def __init__(self, *, payload: bytes = DEB_BYTES, package: str = "mmdebstrap") -> None:
        self.payload = payload
        self.package = package
        self.calls: list[list[str]] = []

    def __call__(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(cmd)
        out = ""
        if cmd[0] == "apt-get" and cmd[-1] == "update":
            work = Path(cmd[cmd.index("-c") + 1]).parent
            assert (work / "status").read_text() == ""
        elif cmd[0] == "apt-get" and "--print-uris" in cmd:
            out = f"'{URI}' {FILENAME} {len(DEB_BYTES)} SHA256:{SHA}\n"
        elif cmd[0] == "apt-get" and cmd[-2:] == ["download", "mmdebstrap"]:
            (Path(kwargs["cwd"]) / FILENAME).write_bytes(self.payload)
        elif cmd[:2] == ["dpkg-deb", "--field"]:
            out = f"Package: {self.package}\nVersion: {VERSION}\nArchitecture: all\n"
        elif cmd[:2] == ["dpkg-deb", "-x"]:
            root = Path(cmd[3])
            (root / "usr/bin").mkdir(parents=True)
            (root / "usr/share/mmdebstrap/hooks/merged-usr").mkdir(parents=True)
            (root / "usr/bin/mmdebstrap").write_text("#!/usr/bin/perl\nprint 'fetched';\n")
        else:
            raise AssertionError(f"unexpected command {cmd}")
        return subprocess.CompletedProcess(cmd, 0, out, "")


def tools_present(monkeypatch: pytest.MonkeyPatch, *, missing: tuple[str, ...] = ()) -> None:
    """Pretend apt-get, dpkg-deb and perl are installed (and mmdebstrap is not)."""
    monkeypatch.setattr(
        mm.shutil, "which",
        lambda name, path=None: None if name in (*missing, "mmdebstrap") else f"/usr/bin/{name}",
    )


def test_fetch_unpacks_into_the_cache_with_a_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools_present(monkeypatch)
    apt = FakeApt()
    lines: list[str] = []
    copy = fetch_mmdebstrap(tmp_path / "cache", log=lines.append, run=apt)
    folder = tmp_path / "cache" / f"mmdebstrap-{VERSION}"
    assert copy.origin == str(folder) and copy.version == VERSION
    assert copy.argv == ("/usr/bin/perl", str(folder / "usr/bin/mmdebstrap"))
    assert copy.hooks == str(folder / "usr/share/mmdebstrap/hooks")
    assert json.loads((folder / STAMP).read_text())["sha256"] == SHA
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [folder.name]  # no leftovers
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700
    assert [c[0] for c in apt.calls] == ["apt-get"] * 3 + ["dpkg-deb"] * 2
    assert any(f"fetching mmdebstrap {VERSION}" in line for line in lines)


def test_a_file_other_than_the_index_says_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools_present(monkeypatch)
    with pytest.raises(MmdebstrapFetchError, match="not the signed index's") as caught:
        fetch_mmdebstrap(tmp_path / "cache", log=lambda _: None, run=FakeApt(payload=b"evil"))
    assert "\n" not in str(caught.value)
    assert list((tmp_path / "cache").iterdir()) == []


def test_another_package_under_the_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools_present(monkeypatch)
    with pytest.raises(MmdebstrapFetchError, match="holds 'cowsay'"):
        fetch_mmdebstrap(tmp_path / "cache", log=lambda _: None, run=FakeApt(package="cowsay"))
    assert list((tmp_path / "cache").iterdir()) == []


def test_apt_failures_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch)

    def no_package(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if "--print-uris" in cmd:
            return subprocess.CompletedProcess(cmd, 100, "", "E: Unable to locate package mmdebstrap\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    with pytest.raises(MmdebstrapFetchError, match="finds no mmdebstrap package") as caught:
        fetch_mmdebstrap(tmp_path / "cache", log=lambda _: None, run=no_package)
    assert "Unable to locate package" in str(caught.value) and "\n" not in str(caught.value)


def test_without_apt_it_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch, missing=("apt-get",))
    with pytest.raises(MmdebstrapFetchError, match="neither mmdebstrap nor apt-get") as caught:
        fetch_mmdebstrap(tmp_path / "cache", log=lambda _: None, run=FakeApt())
    assert "install mmdebstrap" in str(caught.value) and "docker load" in str(caught.value)


def test_the_second_build_fetches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch)
    tmp_path.chmod(0o755)
    apt = FakeApt()
    with find_mmdebstrap(search_path="", cache=tmp_path / "cache", log=lambda _: None, run=apt) as first:
        pass
    calls = len(apt.calls)
    lines: list[str] = []
    with find_mmdebstrap(search_path="", cache=tmp_path / "cache", log=lines.append, run=apt) as again:
        assert again == first
    assert len(apt.calls) == calls
    assert lines == [f"using mmdebstrap {VERSION} from {shown(first.origin)} (fetched earlier; no download)"]
    assert cached_mmdebstrap(tmp_path / "cache") == first


def test_a_half_unpacked_copy_is_not_used(tmp_path: Path) -> None:
    (tmp_path / f"mmdebstrap-{VERSION}" / "usr/bin").mkdir(parents=True)
    (tmp_path / f"mmdebstrap-{VERSION}" / "usr/bin/mmdebstrap").write_text("")
    assert cached_mmdebstrap(tmp_path) is None  # no stamp: not complete


@pytest.mark.parametrize(("text", "version"), [
    ("mmdebstrap 1.3.5", (1, 3, 5)), ("1.3.5-7", (1, 3, 5)), ("1:1.4.3-2", (1, 4, 3)),
    ("0.8.4-1", (0, 8, 4)), ("mmdebstrap 1.0", (1, 0)), ("", None), ("mmdebstrap", None),
])
def test_upstream_version(text: str, version: tuple[int, ...] | None) -> None:
    assert upstream_version(text) == version


def test_an_mmdebstrap_older_than_the_build_needs_is_refused() -> None:
    def says(text: str) -> Any:
        return lambda cmd, **kwargs: subprocess.CompletedProcess(cmd, 0, text + "\n", "")

    installed = Mmdebstrap(argv=("/usr/bin/mmdebstrap",))
    assert too_old(installed, run=says("mmdebstrap 1.3.5")) is None
    assert too_old(installed, run=says("mmdebstrap 0.7.5")) == (
        "mmdebstrap 0.7.5 (installed) is older than 1.1, which the offline build needs")
    assert "no version" in str(too_old(installed, run=says("usage: ...")))
    fetched = Mmdebstrap(argv=("perl", "/c/usr/bin/mmdebstrap"), version="0.8.4-1", origin="/c")

    def no_run(*args: object, **kwargs: object) -> Any:
        raise AssertionError("a fetched copy's version is its package's")

    assert too_old(fetched, run=no_run) == "mmdebstrap 0.8.4 (in /c) is older than 1.1, which the offline build needs"
    assert MIN_VERSION == (1, 1)


def test_the_installed_mmdebstrap_wins(tmp_path: Path) -> None:
    program = tmp_path / "usr" / "bin" / "mmdebstrap"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)

    def no_fetch(*args: object, **kwargs: object) -> Any:
        raise AssertionError("must not fetch")

    with find_mmdebstrap(search_path=str(program.parent), cache=tmp_path / "c", log=no_fetch, run=no_fetch) as tool:
        assert tool.argv == (str(program),) and tool.origin == "system"
        assert tool.hooks == str(tmp_path / "usr/share/mmdebstrap/hooks")  # its package's own


def test_a_cache_others_can_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch)
    tmp_path.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    lines: list[str] = []
    with find_mmdebstrap(search_path="", cache=cache, log=lines.append, run=FakeApt()) as tool:
        temporary = Path(tool.origin)
        assert not temporary.is_relative_to(cache) and temporary.exists()
    assert not temporary.exists()  # deleted after the build
    assert list(cache.iterdir()) == []
    assert "not keeping mmdebstrap" in lines[0] and "writable by others" in lines[0]


def test_a_fetched_mmdebstrap_needs_perl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch, missing=("perl",))
    with pytest.raises(MmdebstrapFetchError, match="install perl"), find_mmdebstrap(
        search_path="", cache=tmp_path / "c", log=lambda _: None, run=FakeApt()
    ):
        pass


# --------------------------------------------------------------------------- images.py wiring


def test_building_offline_without_root_says_so_before_fetching(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base_image.os, "geteuid", lambda: 1000)
    with pytest.raises(ImageBuildError, match="needs root"), base_image._require_mmdebstrap(
        search_path="", log=lambda _: None
    ):
        pass


def test_a_fetch_failure_is_an_image_build_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0 or not base_image.DEBIAN_KEYRING.is_file():
        pytest.skip("the root and keyring checks come first")
    tools_present(monkeypatch, missing=("apt-get",))
    with pytest.raises(ImageBuildError, match="neither mmdebstrap nor apt-get"), base_image._require_mmdebstrap(
        search_path="", cache=tmp_path / "c", log=lambda _: None
    ):
        pass


class PullEngine:
    """Enough of APIClient for the automatic choice: one image list and a scripted pull."""

    def __init__(self, *, has_slim: bool, pull: Callable[[], list[dict[str, str]]]) -> None:
        self.has_slim = has_slim
        self.pull = pull
        self.timeouts: list[float] = []

    def inspect_image(self, tag: str) -> dict[str, Any]:
        import docker.errors  # type: ignore[import-untyped, unused-ignore]

        if tag == SLIM_IMAGE and self.has_slim:
            return {"Id": "sha256:slim", "Config": {"Labels": {}}}
        raise docker.errors.NotFound(f"no such image: {tag}")

    def _url(self, path: str) -> str:
        return path

    def _post(self, url: str, **kwargs: Any) -> Any:
        assert url == "/images/create" and kwargs["stream"]
        self.timeouts.append(kwargs["timeout"])
        return Response(self.pull())

    def _raise_for_status(self, response: Any) -> None:
        pass

    def _stream_helper(self, response: Any, decode: bool) -> Any:
        for message in response.messages:
            if message.get("status") == "done":
                self.has_slim = True
            yield message


class Response:
    def __init__(self, messages: list[dict[str, str]]) -> None:
        self.messages = messages
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_auto_uses_the_slim_image_the_engine_has() -> None:
    lines: list[str] = []
    assert images._choose_online(PullEngine(has_slim=True, pull=list), lines.append)
    assert lines == [f"building online: FROM {SLIM_IMAGE}, already in the engine"]


def test_auto_pulls_when_a_registry_answers() -> None:
    engine = PullEngine(has_slim=False, pull=lambda: [{"status": "Pulling"}, {"status": "done"}])
    lines: list[str] = []
    assert images._choose_online(engine, lines.append, silence=7)
    assert engine.timeouts == [7]
    assert lines[-1] == f"building online: FROM {SLIM_IMAGE}, pulled from the registry"


def test_auto_goes_offline_when_no_registry_answers() -> None:
    def silent() -> list[dict[str, str]]:
        raise requests.exceptions.ReadTimeout("read timed out")

    lines: list[str] = []
    assert not images._choose_online(PullEngine(has_slim=False, pull=silent), lines.append, silence=3)
    assert "building offline" in lines[-1] and "no answer from a registry in 3 s" in lines[-1]


def test_auto_goes_offline_when_the_engine_says_the_pull_failed() -> None:
    def refused() -> list[dict[str, str]]:
        return [{"error": "dial tcp: lookup registry-1.docker.io: no such host"}]

    lines: list[str] = []
    assert not images._choose_online(PullEngine(has_slim=False, pull=refused), lines.append)
    assert "building offline" in lines[-1] and "no such host" in lines[-1]


def test_doctor_says_how_an_offline_build_gets_mmdebstrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = tmp_path / "bin" / "mmdebstrap"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\necho mmdebstrap 1.3.5\n")
    program.chmod(0o755)
    assert mm.offline_build_tool(str(program.parent), tmp_path / "c") == (
        True, f"mmdebstrap installed ({program})")
    program.write_text("#!/bin/sh\necho mmdebstrap 0.8.4\n")  # Ubuntu 22.04's
    assert mm.offline_build_tool(str(program.parent), tmp_path / "c") == (
        False, "mmdebstrap 0.8.4 (installed) is older than 1.1, which the offline build needs")
    tools_present(monkeypatch)
    ready, how = mm.offline_build_tool("", tmp_path / "c")
    assert ready and "fetched with apt into" in how
    fetch_mmdebstrap(tmp_path / "c", log=lambda _: None, run=FakeApt())
    assert mm.offline_build_tool("", tmp_path / "c")[1].startswith(f"mmdebstrap {VERSION} in hookcage's cache")
    tools_present(monkeypatch, missing=("apt-get",))
    assert mm.offline_build_tool("", tmp_path / "d") == (False, "no mmdebstrap, and no apt-get to fetch it")


# --------------------------------------------------------------------------- the command and its run


SLIM = Path("/ctx/slim.sh")


def test_the_command_builds_the_whole_package_list_into_a_tar_on_stdout() -> None:
    tool = Mmdebstrap(argv=("/usr/bin/mmdebstrap",))
    command = mmdebstrap_command(tool, "http://deb.debian.org/debian", SLIM)
    assert command[:4] == ["/usr/bin/mmdebstrap", "--mode=root", "--variant=minbase", "--components=main"]
    assert f"--include={','.join(RUNNER_PACKAGES)}" in command  # npm too: apt resolves it
    assert f"--keyring={base_image.DEBIAN_KEYRING}" in command
    assert "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr" in command  # usr-is-merged, as debootstrap
    assert not any("file-mirror-automount" in word for word in command)
    assert command[-3:] == ["bookworm", "-", "http://deb.debian.org/debian"]
    hooks = [word.removeprefix("--customize-hook=") for word in command if word.startswith("--customize-hook=")]
    assert hooks[0] == 'chroot "$1" /bin/sh -s < /ctx/slim.sh'
    assert "etc/resolv.conf etc/hostname" in hooks[1] and "99mmdebstrap" in hooks[1]
    # One shell line each, as mmdebstrap runs them (sh -c ... exec ROOT): they parse.
    for hook in hooks:
        subprocess.run(["sh", "-n", "-c", hook], check=True)


def test_a_file_mirror_is_shown_in_the_tree_before_slim_runs() -> None:
    tool = Mmdebstrap(argv=("perl", "/c/usr/bin/mmdebstrap"), hooks="/c/usr/share/mmdebstrap/hooks")
    command = mmdebstrap_command(tool, "file:///srv/mirror", Path("/a dir/slim.sh"))
    automount = command.index("--hook-dir=/c/usr/share/mmdebstrap/hooks/file-mirror-automount")
    slim = command.index("--customize-hook=chroot \"$1\" /bin/sh -s < '/a dir/slim.sh'")
    assert automount < slim  # its customize hook unmounts the mirror before slim.sh empties /tmp
    assert command[:2] == ["perl", "/c/usr/bin/mmdebstrap"] and command[-1] == "file:///srv/mirror"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 20  # every read comes long after the one before
        return self.now


def test_mmdebstrap_says_a_line_per_phase_and_that_a_quiet_phase_goes_on(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base_image, "HEARTBEAT", 0.05)
    read, write = os.pipe()
    os.write(write, b"I: running apt-get update...\nUnpacking usr-is-merged (1) ...\n"
                    b"I: installing remaining packages inside the chroot...\nI: skipping output/dev as requested\n")
    lines: list[str] = []
    said: list[str] = []
    with os.fdopen(read, "rb") as stream:
        relay = threading.Thread(target=base_image._relay, args=(stream, lines.append, said, Clock()))
        relay.start()
        time.sleep(0.3)
        os.write(write, b"E: apt-get install failed\nno newline at the end")
        os.close(write)
        relay.join(5)
    assert lines[:3] == ["mmdebstrap: running apt-get update...",  # dpkg's lines are not shown
                         "mmdebstrap: installing remaining packages inside the chroot...",
                         "mmdebstrap: skipping output/dev as requested"]  # a remark, not a phase
    assert lines[3].startswith("mmdebstrap: ... still installing remaining packages inside the chroot (")
    assert "Unpacking usr-is-merged (1) ..." in said
    assert lines[-1] == "mmdebstrap: E: apt-get install failed" and said[-1] == "no newline at the end"
    assert base_image._reason(said) == "apt-get install failed"


class ImportEngine:
    """Enough of APIClient for an import: reads the whole stream, answers like dockerd, records the rest."""

    def __init__(self, *, refuse: str = "") -> None:
        self.refuse = refuse
        self.read = b""
        self.tags: list[tuple[str, str, str]] = []
        self.removed: list[str] = []
        self.changes: list[str] = []

    def import_image_from_stream(self, stream: Any, repository: str | None = None, tag: str | None = None,
                                 changes: list[str] | None = None) -> str:
        assert repository is None and tag is None  # tagged only once mmdebstrap succeeded
        self.changes = list(changes or [])
        if self.refuse:  # as dockerd does mid-stream (a full disk)
            import docker.errors  # type: ignore[import-untyped, unused-ignore]

            next(iter(stream))
            raise docker.errors.APIError(self.refuse)
        self.read = b"".join(stream)
        return json.dumps({"status": "sha256:" + "ab" * 32}) + "\r\n"

    def tag(self, image: str, repository: str, tag: str) -> bool:
        self.tags.append((image, repository, tag))
        return True

    def inspect_image(self, name: str) -> dict[str, Any]:
        return {"Id": "sha256:" + "ab" * 32}

    def remove_image(self, image: str, force: bool = False) -> None:
        self.removed.append(image)


def fake_mmdebstrap(tmp_path: Path, script: str) -> Mmdebstrap:
    program = tmp_path / "mmdebstrap"
    program.write_text("#!/bin/sh\n" + script)
    program.chmod(0o755)
    return Mmdebstrap(argv=(str(program),), hooks=str(tmp_path / "hooks"))


def build(engine: ImportEngine, tool: Mmdebstrap, tmp_path: Path, lines: list[str]) -> str:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return base_image._build(engine, tool, "http://mirror.example/debian", Path("/ctx"), scratch,
                             "hookcage-test/base:x", lines.append)


def test_a_successful_run_is_imported_then_tagged(tmp_path: Path) -> None:
    tool = fake_mmdebstrap(tmp_path, 'echo "I: creating tarball..." >&2; printf tarbytes\n')
    engine, lines = ImportEngine(), []
    image_id = build(engine, tool, tmp_path, lines)
    assert image_id == "sha256:" + "ab" * 32 and engine.read == b"tarbytes"
    assert engine.tags == [(image_id, "hookcage-test/base", "x")] and engine.removed == []
    assert "LABEL hookcage.image=base hookcage.version=" in engine.changes[-1]
    assert f"{PACKAGES_LABEL}={base_inputs()}" in engine.changes[-1]
    assert lines[0].startswith(f"running {tool.argv[0]} --mode=root --variant=minbase")
    assert "mmdebstrap: creating tarball..." in lines
    assert lines[-1].startswith(f"imported hookcage-test/base:x ({image_id[:19]}, 0 MB of tar)")


def test_a_failed_run_leaves_the_tag_alone_and_says_why_in_one_line(tmp_path: Path) -> None:
    # mmdebstrap writes its tar only at the end: a failure gives the import an empty stream, and
    # the engine makes an empty image of it. That image is removed, never tagged.
    tool = fake_mmdebstrap(tmp_path, 'echo "I: running apt-get update..." >&2\n'
                                     'echo "E: apt-get update failed: mirror.example unreachable" >&2; exit 1\n')
    engine, lines = ImportEngine(), []
    with pytest.raises(ImageBuildError, match=r"mmdebstrap bookworm from http://mirror.example/debian failed "
                                              r"\(exit 1\): apt-get update failed: mirror.example unreachable; "
                                              r"check the mirror \(set HOOKCAGE_DEBIAN_MIRROR\)") as caught:
        build(engine, tool, tmp_path, lines)
    assert "\n" not in str(caught.value)
    assert engine.tags == [] and engine.removed == ["sha256:" + "ab" * 32]


def test_an_import_the_engine_refuses_stops_mmdebstrap(tmp_path: Path) -> None:
    tool = fake_mmdebstrap(tmp_path, "printf tar; exec sleep 60\n")
    engine, lines = ImportEngine(refuse="no space left on device"), []
    started = time.monotonic()
    with pytest.raises(ImageBuildError, match=r"importing hookcage-test/base:x failed: .*no space left"):
        build(engine, tool, tmp_path, lines)
    assert time.monotonic() - started < 30 and engine.tags == []
