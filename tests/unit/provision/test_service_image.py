"""The service image's inputs and wheels (executor.provision.service_image), without an engine or pip."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from executor.provision import service_image
from executor.provision.service_image import (
    AGENT_CONTEXT,
    SERVICE_CONTEXT,
    SOURCE_PARTS,
    dependency_pins,
    fetch_service_wheels,
    platform_tags,
    service_inputs,
    source_checkout,
)
from executor.sandbox.docker.imagefacts import ImageBuildError

ROOT = Path(__file__).resolve().parents[3]


def _lookup(table: dict[str, tuple[str, list[str]]]) -> Any:
    return lambda name: table.get(name)


def test_pins_follow_dependencies_transitively_with_canonical_names() -> None:
    table = {
        "fastapi": ("0.110.0", ["starlette>=0.36", "Typing_Extensions>=4.8.0"]),
        "starlette": ("0.37.2", ["anyio>=3.4"]),
        "anyio": ("4.3.0", ["idna>=2.8", "sniffio>=1.1", "starlette"]),  # a cycle is fine
        "idna": ("3.6", []),
        "sniffio": ("1.3.1", []),
        "typing-extensions": ("4.10.0", []),
    }
    assert dependency_pins(["FastAPI>=0.110"], _lookup(table)) == {
        "anyio": "4.3.0",
        "fastapi": "0.110.0",
        "idna": "3.6",
        "sniffio": "1.3.1",
        "starlette": "0.37.2",
        "typing-extensions": "4.10.0",
    }


def test_a_conditional_dependency_not_installed_here_is_left_out() -> None:
    table = {"click": ("8.1.7", ['colorama; platform_system == "Windows"', 'importlib-metadata; python_version < "3.8"'])}
    assert dependency_pins(["click"], _lookup(table)) == {"click": "8.1.7"}


def test_extras_count_only_when_asked_for() -> None:
    table = {
        "uvicorn": ("0.29.0", ["h11>=0.8", 'httptools>=0.5; extra == "standard"', 'websockets; extra == "standard"']),
        "h11": ("0.14.0", []),
        "httptools": ("0.6.1", []),
        "websockets": ("12.0", []),
    }
    assert dependency_pins(["uvicorn"], _lookup(table)) == {"h11": "0.14.0", "uvicorn": "0.29.0"}
    assert dependency_pins(["uvicorn[standard]>=0.29"], _lookup(table)) == {
        "h11": "0.14.0", "httptools": "0.6.1", "uvicorn": "0.29.0", "websockets": "12.0",
    }


def test_an_unconditional_dependency_that_is_not_installed_is_an_error_naming_it() -> None:
    table = {"docker": ("7.0.0", ["requests>=2.26"])}
    with pytest.raises(ImageBuildError, match=r"^requests, which hookcage needs, is not installed"):
        dependency_pins(["docker"], _lookup(table))


def test_the_real_dependencies_are_pinned_to_what_is_installed() -> None:
    import importlib.metadata

    pins = dependency_pins(service_image._project_requirements(ROOT))
    for name in ("click", "pydantic", "pydantic-core", "fastapi", "uvicorn", "docker", "google-re2"):
        assert pins[name] == importlib.metadata.version(name)


def test_platform_tags_cover_every_glibc_up_to_the_runners_and_the_legacy_names() -> None:
    tags = platform_tags("aarch64", (2, 36))
    assert tags[0] == "manylinux_2_36_aarch64"
    assert "manylinux_2_17_aarch64" in tags and "manylinux_2_28_aarch64" in tags
    assert "manylinux_2_37_aarch64" not in tags
    assert {"manylinux2014_aarch64", "manylinux2010_aarch64", "manylinux1_aarch64"} <= set(tags)
    assert all(tag.endswith("_aarch64") for tag in tags)


def test_the_source_checkout_is_this_repository() -> None:
    assert source_checkout() == ROOT


# --------------------------------------------------------------------------- inputs


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of what the service images are made of."""
    root = tmp_path / "checkout"
    for part in (*SOURCE_PARTS, SERVICE_CONTEXT, AGENT_CONTEXT):
        source = ROOT / part
        if source.is_file():
            (root / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / part)
        else:
            shutil.copytree(source, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    return root


PINS = {"click": "8.1.7"}


def _inputs(root: Path, runner: str = "sha256:runner", pins: dict[str, str] = PINS) -> str:
    return service_inputs(root, runner, "x86_64", pins)


@pytest.mark.parametrize(
    "changed",
    ["executor/executor.py", "pyproject.toml", "images/runner/Dockerfile", "images/service/Dockerfile",
     "examples/compose-agent/play.py", "examples/compose-agent/events/04-rm-rf.json"],
)
def test_inputs_change_with_what_goes_into_the_images(checkout: Path, changed: str) -> None:
    before = _inputs(checkout)
    with (checkout / changed).open("a") as handle:
        handle.write("\n")
    assert _inputs(checkout) != before


def test_inputs_change_with_a_new_file_the_runner_or_a_pin(checkout: Path) -> None:
    before = _inputs(checkout)
    assert _inputs(checkout, runner="sha256:other-runner") != before
    assert _inputs(checkout, pins={"click": "8.1.8"}) != before
    (checkout / "executor" / "new_module.py").write_text("")
    assert _inputs(checkout) != before


def test_inputs_ignore_bytecode_and_the_mounted_parts_of_the_example(checkout: Path) -> None:
    before = _inputs(checkout)
    (checkout / "executor" / "__pycache__").mkdir(exist_ok=True)
    (checkout / "executor" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0")
    (checkout / "executor" / "stray.pyc").write_bytes(b"\0")
    (checkout / AGENT_CONTEXT / "workspace" / "src" / "app.py").write_text("changed = True\n")
    (checkout / AGENT_CONTEXT / "config" / "config.toml").write_text("")
    assert _inputs(checkout) == before


# --------------------------------------------------------------------------- wheels


def _fake_wheel(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.txt", name)
    return path


class FakePip:
    """Stands in for ``subprocess.run`` of ``python -m pip``: records the calls, makes wheels."""

    def __init__(self, downloads: Sequence[str], fail: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.downloads = downloads
        self.fail = fail

    def __call__(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(cmd)
        verb = cmd[3]
        if self.fail == verb:
            return subprocess.CompletedProcess(cmd, 1, "", "Collecting x\nERROR: No matching distribution found for x==1\n")
        if verb == "wheel":
            _fake_wheel(Path(cmd[cmd.index("--wheel-dir") + 1]), "hookcage-0.1.0-py3-none-any.whl")
        else:
            dest = Path(cmd[cmd.index("--dest") + 1])
            for name in [*self.downloads, "hookcage-0.1.0-py3-none-any.whl"]:
                _fake_wheel(dest, name)
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_wheels_hookcage_apart_its_dependencies_listed_and_pinned(tmp_path: Path) -> None:
    pip = FakePip(["click-8.1.7-py3-none-any.whl", "pydantic_core-2.16.3-cp311-cp311-manylinux_2_17_x86_64.whl"])
    pins = {"click": "8.1.7", "pydantic-core": "2.16.3", "colorama": "0.4.6"}
    lines: list[str] = []
    wheel = fetch_service_wheels(ROOT, tmp_path / "ctx", "x86_64", pins, environ={}, run=pip, log=lines.append)
    assert wheel == tmp_path / "ctx" / "hookcage" / "hookcage-0.1.0-py3-none-any.whl"
    assert sorted(p.name for p in (tmp_path / "ctx" / "deps").iterdir()) == [
        "click-8.1.7-py3-none-any.whl",
        "pydantic_core-2.16.3-cp311-cp311-manylinux_2_17_x86_64.whl",
        "requirements.txt",
    ]
    assert (tmp_path / "ctx" / "deps" / "requirements.txt").read_text() == "click==8.1.7\npydantic-core==2.16.3\n"
    assert any("colorama" in line for line in lines)  # pinned here (Windows only), not in the image
    download = pip.calls[1]
    assert download[3:5] == ["download", "--only-binary=:all:"]
    assert download[download.index("--python-version") + 1] == "3.11"
    assert download[download.index("--abi") + 1] == "cp311"
    assert "manylinux_2_36_x86_64" in download and "manylinux2014_x86_64" in download
    assert str(wheel) in download
    assert "--no-index" not in download  # pip's own configuration applies


def test_a_wheel_pip_brings_that_is_not_pinned_is_refused(tmp_path: Path) -> None:
    pip = FakePip(["click-8.1.7-py3-none-any.whl", "evil-1.0-py3-none-any.whl"])
    with pytest.raises(ImageBuildError, match=r"pip brought evil, which is not installed here"):
        fetch_service_wheels(ROOT, tmp_path / "ctx", "x86_64", {"click": "8.1.7"}, environ={}, run=pip,
                             log=lambda _: None)


def test_the_wheelhouse_is_the_only_index_when_set(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    pip = FakePip(["click-8.1.7-py3-none-any.whl"])
    fetch_service_wheels(ROOT, tmp_path / "ctx", "x86_64", {"click": "8.1.7"},
                         environ={"HOOKCAGE_WHEELHOUSE": str(house)}, run=pip, log=lambda _: None)
    for call in pip.calls:
        assert call[call.index("--no-index"):call.index("--no-index") + 3] == ["--no-index", "--find-links", str(house)]


def test_a_wheelhouse_that_is_not_a_folder_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match=r"HOOKCAGE_WHEELHOUSE=.* is not a folder"):
        fetch_service_wheels(ROOT, tmp_path / "ctx", "x86_64", {}, environ={"HOOKCAGE_WHEELHOUSE": str(tmp_path / "no")},
                             run=FakePip([]), log=lambda _: None)


@pytest.mark.parametrize("verb", ["wheel", "download"])
def test_a_pip_failure_is_one_line_with_pips_error_and_the_fix(tmp_path: Path, verb: str) -> None:
    with pytest.raises(ImageBuildError) as caught:
        fetch_service_wheels(ROOT, tmp_path / "ctx", "x86_64", {"click": "8.1.7"}, environ={},
                             run=FakePip([], fail=verb), log=lambda _: None)
    message = str(caught.value)
    assert "\n" not in message
    assert "ERROR: No matching distribution found for x==1" in message
    assert ("hatchling" if verb == "wheel" else "at the version installed here") in message
