"""hookcage's own debootstrap (executor.provision.debootstrap) and the automatic online/offline choice, no engine.

apt and dpkg-deb are faked here (a runner that plays their parts); the real
fetch runs in tests/integration/test_base_without_debootstrap.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests.exceptions  # type: ignore[import-untyped, unused-ignore]

from executor.cachedir import cache_dir
from executor.provision import base_image, images
from executor.provision import debootstrap as deb
from executor.provision.debootstrap import (
    STAMP,
    DebootstrapFetchError,
    DownloadURI,
    apt_config,
    apt_options,
    cached_debootstrap,
    deb_fields,
    fetch_debootstrap,
    find_debootstrap,
    parse_print_uris,
    shown,
    unsafe_for_root,
    version_dir,
)
from executor.provision.recipe import SLIM_IMAGE
from executor.sandbox.docker.imagefacts import ImageBuildError

pytestmark = pytest.mark.spawns

VERSION = "1.0.128+nmu2+deb12u2"
FILENAME = f"debootstrap_{VERSION}_all.deb"
DEB_BYTES = b"!<arch>\nnot really a deb, the fake dpkg-deb reads nothing\n"
SHA = hashlib.sha256(DEB_BYTES).hexdigest()
URI = f"http://deb.debian.org/debian/pool/main/d/debootstrap/{FILENAME}"


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
    [(VERSION, f"debootstrap-{VERSION}"), ("1:1.0.9~rc1", "debootstrap-1%3a1.0.9~rc1")],
)
def test_version_dir(version: str, folder: str) -> None:
    assert version_dir(version) == folder


@pytest.mark.parametrize("version", ["", "../../etc", "1.0 2", "1.0/x"])
def test_version_dir_refuses_what_is_not_a_version(version: str) -> None:
    with pytest.raises(DebootstrapFetchError, match="not a Debian version"):
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
    assert DownloadURI("u", "debootstrap_1%3a1.0_all.deb", 1, SHA).version == "1:1.0"


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
    with pytest.raises(DebootstrapFetchError, match=match):
        parse_print_uris(text)


def test_deb_fields() -> None:
    text = f"Package: debootstrap\nVersion: {VERSION}\nArchitecture: all\n Description: x\n"
    assert deb_fields(text) == {"Package": "debootstrap", "Version": VERSION, "Architecture": "all"}


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

    def __init__(self, *, payload: bytes = DEB_BYTES, package: str = "debootstrap") -> None:
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
        elif cmd[0] == "apt-get" and cmd[-2:] == ["download", "debootstrap"]:
            (Path(kwargs["cwd"]) / FILENAME).write_bytes(self.payload)
        elif cmd[:2] == ["dpkg-deb", "--field"]:
            out = f"Package: {self.package}\nVersion: {VERSION}\nArchitecture: all\n"
        elif cmd[:2] == ["dpkg-deb", "-x"]:
            root = Path(cmd[3])
            (root / "usr/sbin").mkdir(parents=True)
            (root / "usr/share/debootstrap/scripts").mkdir(parents=True)
            (root / "usr/sbin/debootstrap").write_text("#!/bin/sh\necho fetched\n")
        else:
            raise AssertionError(f"unexpected command {cmd}")
        return subprocess.CompletedProcess(cmd, 0, out, "")


def tools_present(monkeypatch: pytest.MonkeyPatch, *, missing: tuple[str, ...] = ()) -> None:
    """Pretend apt-get, dpkg-deb and wget are installed (and debootstrap is not)."""
    monkeypatch.setattr(
        deb.shutil, "which",
        lambda name, path=None: None if name in (*missing, "debootstrap") else f"/usr/bin/{name}",
    )


def test_fetch_unpacks_into_the_cache_with_a_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools_present(monkeypatch)
    apt = FakeApt()
    lines: list[str] = []
    copy = fetch_debootstrap(tmp_path / "cache", log=lines.append, run=apt)
    folder = tmp_path / "cache" / f"debootstrap-{VERSION}"
    assert copy.origin == str(folder) and copy.version == VERSION
    assert copy.argv == ("/bin/sh", str(folder / "usr/sbin/debootstrap"))
    assert copy.env == {"DEBOOTSTRAP_DIR": str(folder / "usr/share/debootstrap")}
    assert json.loads((folder / STAMP).read_text())["sha256"] == SHA
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [folder.name]  # no leftovers
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700
    assert [c[0] for c in apt.calls] == ["apt-get"] * 3 + ["dpkg-deb"] * 2
    assert any(f"fetching debootstrap {VERSION}" in line for line in lines)


def test_a_file_other_than_the_index_says_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools_present(monkeypatch)
    with pytest.raises(DebootstrapFetchError, match="not the signed index's") as caught:
        fetch_debootstrap(tmp_path / "cache", log=lambda _: None, run=FakeApt(payload=b"evil"))
    assert "\n" not in str(caught.value)
    assert list((tmp_path / "cache").iterdir()) == []


def test_another_package_under_the_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools_present(monkeypatch)
    with pytest.raises(DebootstrapFetchError, match="holds 'cowsay'"):
        fetch_debootstrap(tmp_path / "cache", log=lambda _: None, run=FakeApt(package="cowsay"))
    assert list((tmp_path / "cache").iterdir()) == []


def test_apt_failures_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch)

    def no_package(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if "--print-uris" in cmd:
            return subprocess.CompletedProcess(cmd, 100, "", "E: Unable to locate package debootstrap\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    with pytest.raises(DebootstrapFetchError, match="finds no debootstrap package") as caught:
        fetch_debootstrap(tmp_path / "cache", log=lambda _: None, run=no_package)
    assert "Unable to locate package" in str(caught.value) and "\n" not in str(caught.value)


def test_without_apt_it_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch, missing=("apt-get",))
    with pytest.raises(DebootstrapFetchError, match="neither debootstrap nor apt-get") as caught:
        fetch_debootstrap(tmp_path / "cache", log=lambda _: None, run=FakeApt())
    assert "install debootstrap" in str(caught.value) and "docker load" in str(caught.value)


def test_the_second_build_fetches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch)
    tmp_path.chmod(0o755)
    apt = FakeApt()
    with find_debootstrap(search_path="", cache=tmp_path / "cache", log=lambda _: None, run=apt) as first:
        pass
    calls = len(apt.calls)
    lines: list[str] = []
    with find_debootstrap(search_path="", cache=tmp_path / "cache", log=lines.append, run=apt) as again:
        assert again == first
    assert len(apt.calls) == calls
    assert lines == [f"using debootstrap {VERSION} from {shown(first.origin)} (fetched earlier; no download)"]
    assert cached_debootstrap(tmp_path / "cache") == first


def test_a_half_unpacked_copy_is_not_used(tmp_path: Path) -> None:
    (tmp_path / f"debootstrap-{VERSION}" / "usr/sbin").mkdir(parents=True)
    (tmp_path / f"debootstrap-{VERSION}" / "usr/sbin/debootstrap").write_text("")
    assert cached_debootstrap(tmp_path) is None  # no stamp: not complete


def test_the_installed_debootstrap_wins(tmp_path: Path) -> None:
    program = tmp_path / "debootstrap"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)

    def no_fetch(*args: object, **kwargs: object) -> Any:
        raise AssertionError("must not fetch")

    with find_debootstrap(search_path=str(tmp_path), cache=tmp_path / "c", log=no_fetch, run=no_fetch) as tool:
        assert tool.argv == (str(program),) and tool.origin == "system"


def test_a_cache_others_can_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch)
    tmp_path.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    lines: list[str] = []
    with find_debootstrap(search_path="", cache=cache, log=lines.append, run=FakeApt()) as tool:
        temporary = Path(tool.origin)
        assert not temporary.is_relative_to(cache) and temporary.exists()
    assert not temporary.exists()  # deleted after the build
    assert list(cache.iterdir()) == []
    assert "not keeping debootstrap" in lines[0] and "writable by others" in lines[0]


def test_debootstrap_needs_wget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools_present(monkeypatch, missing=("wget",))
    with pytest.raises(DebootstrapFetchError, match="install wget"), find_debootstrap(
        search_path="", cache=tmp_path / "c", log=lambda _: None, run=FakeApt()
    ):
        pass


# --------------------------------------------------------------------------- images.py wiring


def test_building_offline_without_root_says_so_before_fetching(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base_image.os, "geteuid", lambda: 1000)
    with pytest.raises(ImageBuildError, match="needs root"), base_image._require_debootstrap(
        search_path="", log=lambda _: None
    ):
        pass


def test_a_fetch_failure_is_an_image_build_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0 or not base_image.DEBIAN_KEYRING.is_file():
        pytest.skip("the root and keyring checks come first")
    tools_present(monkeypatch, missing=("apt-get",))
    with pytest.raises(ImageBuildError, match="neither debootstrap nor apt-get"), base_image._require_debootstrap(
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


def test_doctor_says_how_an_offline_build_gets_debootstrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = tmp_path / "bin" / "debootstrap"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    assert deb.offline_build_tool(str(program.parent), tmp_path / "c") == (
        True, f"debootstrap installed ({program})")
    tools_present(monkeypatch)
    ready, how = deb.offline_build_tool("", tmp_path / "c")
    assert ready and "fetched with apt into" in how
    fetch_debootstrap(tmp_path / "c", log=lambda _: None, run=FakeApt())
    assert deb.offline_build_tool("", tmp_path / "c")[1].startswith(f"debootstrap {VERSION} in hookcage's cache")
    tools_present(monkeypatch, missing=("apt-get",))
    assert deb.offline_build_tool("", tmp_path / "d") == (False, "no debootstrap, and no apt-get to fetch it")


# --------------------------------------------------------------------------- progress lines


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_debootstrap_chatter_folds_into_phases_with_a_heartbeat() -> None:
    clock, lines = Clock(), []
    summary = base_image._PhaseLog(lines.append, clock=clock)
    for raw in ["I: Retrieving InRelease", "I: Retrieving libc6 2.36-9", "I: Validating libc6 2.36-9",
                "I: Retrieving bash 5.2", "I: Unpacking the base system...", "I: Unpacking libc6:amd64..."]:
        summary.line(raw + "\n")
        clock.now += 1
    clock.now += 20  # the next package comes long after the last line said anything
    summary.line("I: Unpacking bash...")
    summary.flush()
    assert lines == [
        "debootstrap: Retrieving InRelease",
        "debootstrap: ... retrieved and validated 2 packages",
        "debootstrap: Unpacking the base system...",
        "debootstrap: ... unpacked 2 packages so far",
        "debootstrap: ... unpacked 2 packages",
    ]


def test_apt_in_the_chroot_says_only_its_phases_and_warnings() -> None:
    clock, lines = Clock(), []
    summary = base_image._PhaseLog(lines.append, "apt-get", base_image._apt_phase, echo=False, clock=clock)
    for raw in ["Reading package lists...", "Get:1 http://deb.debian.org/debian bookworm/main node-a 1 [2 kB]",
                "Get:2 http://deb.debian.org/debian bookworm/main node-b 1 [2 kB]",
                "Selecting previously unselected package node-a.", "Unpacking node-a (1) ...",
                "W: something odd", "Setting up node-a (1) ...", "E: Sub-process /usr/bin/dpkg returned an error code (1)"]:
        summary.line(raw)
    assert lines == [
        "apt-get: ... downloaded 2 packages",
        "apt-get: ... unpacked 1 packages",
        "apt-get: W: something odd",
        "apt-get: ... configured 1 packages",
        "apt-get: E: Sub-process /usr/bin/dpkg returned an error code (1)",
    ]
    assert summary.last_error == "Sub-process /usr/bin/dpkg returned an error code (1)"
