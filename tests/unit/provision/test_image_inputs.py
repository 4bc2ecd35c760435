"""The runner image builder's pure parts (executor.provision.images), with no Docker engine.

The input hashes that decide when the base and the runner are made again,
the wheel pins, fetching the wheels (pip, faked here, or
``$HOOKCAGE_WHEELHOUSE``), taking the binaries out of them, the temporary
build context, and the one-line errors that say how to fix each failure.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import stat
import subprocess
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from executor.errors import SandboxError
from executor.provision import base_image, images
from executor.provision.base_image import build_base_image
from executor.provision.build_context import (
    WHEELHOUSE_ENV,
    extract_binaries,
    fetch_wheels,
    normalize_machine,
    prepare_context,
)
from executor.provision.images import build_runner_image
from executor.provision.recipe import (
    BASE_IMAGE,
    INPUTS_LABEL,
    PACKAGES_LABEL,
    RUNNER_IMAGE,
    RUNNER_PACKAGES,
    RUNNER_WHEELS,
    TOOLS_DIR,
    WheelTool,
    base_inputs,
    runner_context,
    runner_inputs,
)
from executor.sandbox.docker.imagefacts import ImageBuildError

ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"fake binary"


def make_wheel(
    folder: Path,
    project: str = "tool",
    version: str = "1.2.3",
    binaries: Sequence[str] = ("tool",),
    *,
    tag: str = "py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64",
    content: bytes = ELF,
) -> Path:
    """A wheel shaped like uv's and ruff's: the binaries under ``<name>-<version>.data/scripts``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{project}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{project}/__init__.py", "")
        for binary in binaries:
            info = zipfile.ZipInfo(f"{project}-{version}.data/scripts/{binary}")
            info.external_attr = 0o100755 << 16
            archive.writestr(info, content + binary.encode())
        archive.writestr(f"{project}-{version}.dist-info/RECORD", "")
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tool_for(wheel: Path, project: str = "tool", binaries: Sequence[str] = ("tool",)) -> WheelTool:
    """A WheelTool pinned to ``wheel`` (x86_64)."""
    return WheelTool(project, "1.2.3", tuple(binaries), {"x86_64": sha256(wheel)})


def no_pip(*args: object, **kwargs: object) -> Any:
    raise AssertionError("pip must not run")


def fake_pip(
    *, returncode: int = 0, stderr: str = "", drop: Path | None = None
) -> tuple[list[list[str]], Callable[..., subprocess.CompletedProcess[str]]]:
    """A stand-in for subprocess.run: records the command, copies ``drop`` into ``-d``."""
    calls: list[list[str]] = []

    def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(list(cmd))
        if drop is not None:
            shutil.copy(drop, Path(cmd[cmd.index("-d") + 1]) / drop.name)
        return subprocess.CompletedProcess(cmd, returncode, "", stderr)

    return calls, run


def assert_one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    assert isinstance(exc.value, SandboxError)
    return text


# --------------------------------------------------------------------------- packages and pins


def test_dockerfile_packages_are_runner_packages() -> None:
    dockerfile = (runner_context() / "Dockerfile").read_text()
    match = re.search(r'^ARG PACKAGES="([^"]*)"', dockerfile, re.MULTILINE)
    assert match is not None
    assert match.group(1).split() == list(RUNNER_PACKAGES)


def test_the_tools_hooks_run_are_in_the_image() -> None:
    for package in ("nodejs", "npm", "python3", "shellcheck", "gawk", "file", "patch", "git", "jq"):
        assert package in RUNNER_PACKAGES
    assert {tool.project for tool in RUNNER_WHEELS} == {"uv", "ruff"}
    dockerfile = (runner_context() / "Dockerfile").read_text()
    loop = re.search(r"for tool in ([^;]*); do", dockerfile)
    assert loop is not None
    checked = loop.group(1).replace("\\", " ").split()
    for tool in ("sh", "bash", "python3", "node", "npm", "npx", "uv", "uvx", "ruff", "shellcheck"):
        assert tool in checked, tool
    assert f"COPY {TOOLS_DIR}/ /usr/local/bin/" in dockerfile
    for env in (
        "UV_PYTHON_DOWNLOADS=never",
        "UV_NO_PROGRESS=1",
        "NO_UPDATE_NOTIFIER=1",
        "npm_config_fund=false",
        "npm_config_audit=false",
        "npm_config_cache=/tmp/.npm",
        "npm_config_update_notifier=false",
    ):
        assert env in dockerfile, env


def test_wheel_pins_are_exact_and_hashed_for_both_machines() -> None:
    for tool in RUNNER_WHEELS:
        assert re.fullmatch(r"\d+\.\d+\.\d+", tool.version), tool
        assert set(tool.sha256) == {"x86_64", "aarch64"}
        for digest in tool.sha256.values():
            assert re.fullmatch(r"[0-9a-f]{64}", digest)
        assert tool.requirement == f"{tool.project}=={tool.version}"
        assert tool.member(tool.binaries[0]) == (
            f"{tool.project}-{tool.version}.data/scripts/{tool.binaries[0]}"
        )
    uv = next(tool for tool in RUNNER_WHEELS if tool.project == "uv")
    assert uv.binaries == ("uv", "uvx")


@pytest.mark.parametrize(
    ("name", "expected"),
    [("x86_64", "x86_64"), ("amd64", "x86_64"), ("AMD64", "x86_64"), ("arm64", "aarch64"),
     ("aarch64", "aarch64"), ("riscv64", "riscv64")],
)  # fmt: skip
def test_normalize_machine(name: str, expected: str) -> None:
    assert normalize_machine(name) == expected


# --------------------------------------------------------------------------- input hashes


def context_copy(tmp_path: Path) -> Path:
    target = tmp_path / "context"
    shutil.copytree(runner_context(), target)
    return target


def test_base_inputs_follow_the_package_set_only() -> None:
    assert base_inputs() == base_inputs(tuple(reversed(RUNNER_PACKAGES)))
    assert base_inputs() != base_inputs((*RUNNER_PACKAGES, "vim"))
    assert base_inputs().startswith("sha256:")


def test_runner_inputs_change_with_each_input(tmp_path: Path) -> None:
    context = context_copy(tmp_path)
    first = runner_inputs(context)
    assert first == runner_inputs(context) == runner_inputs(runner_context())
    (context / "README.md").write_text("docs do not change the image\n")
    assert runner_inputs(context) == first
    assert runner_inputs(context, packages=(*RUNNER_PACKAGES, "vim")) != first
    moved = [WheelTool(t.project, t.version + "1", t.binaries, t.sha256) for t in RUNNER_WHEELS]
    assert runner_inputs(context, wheels=moved) != first
    (context / "Dockerfile").write_text((context / "Dockerfile").read_text() + "# x\n")
    changed = runner_inputs(context)
    assert changed != first
    (context / "slim.sh").write_text((context / "slim.sh").read_text() + "# x\n")
    assert runner_inputs(context) not in (first, changed)


def test_runner_inputs_without_a_dockerfile_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match="Dockerfile") as caught:
        runner_inputs(tmp_path)
    assert_one_line(caught)


# --------------------------------------------------------------------------- extraction


def test_extract_binaries_writes_executables(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w", "uv", "1.2.3", ("uv", "uvx"))
    tool = WheelTool("uv", "1.2.3", ("uv", "uvx"), {"x86_64": sha256(wheel)})
    written = extract_binaries(wheel, tool, tmp_path / "bin")
    assert [p.name for p in written] == ["uv", "uvx"]
    for path in written:
        assert path.read_bytes() == ELF + path.name.encode()
        assert stat.S_IMODE(path.stat().st_mode) == 0o755


def test_extract_binaries_of_the_wrong_wheel(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w", "ruff", "1.2.3", ("ruff",))
    with pytest.raises(ImageBuildError, match=r"has no uv-1\.2\.3\.data/scripts/uv") as caught:
        extract_binaries(wheel, WheelTool("uv", "1.2.3", ("uv",), {}), tmp_path / "bin")
    assert_one_line(caught)


def test_extract_binaries_refuses_a_non_elf(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w", content=b"#!/bin/sh\necho hi\n")
    with pytest.raises(ImageBuildError, match="not a Linux executable") as caught:
        extract_binaries(wheel, tool_for(wheel), tmp_path / "bin")
    assert_one_line(caught)


def test_extract_binaries_of_a_broken_zip(tmp_path: Path) -> None:
    wheel = tmp_path / "tool-1.2.3-py3-none-any.whl"
    wheel.write_bytes(b"not a zip")
    with pytest.raises(ImageBuildError, match="cannot extract tool") as caught:
        extract_binaries(wheel, WheelTool("tool", "1.2.3", ("tool",), {}), tmp_path / "bin")
    assert_one_line(caught)


# --------------------------------------------------------------------------- the wheelhouse


def test_wheelhouse_is_used_without_pip(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "house")
    make_wheel(tmp_path / "house", "other", "9.9.9", ("other",))
    tool = tool_for(wheel)
    found = fetch_wheels(
        tmp_path / "dl",
        "x86_64",
        tools=[tool],
        environ={WHEELHOUSE_ENV: str(tmp_path / "house")},
        run=no_pip,
        log=lambda _: None,
    )
    assert found == {"tool": wheel}


def test_wheelhouse_wheel_with_another_hash_is_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "house")
    pinned = WheelTool("tool", "1.2.3", ("tool",), {"x86_64": "0" * 64})
    with pytest.raises(ImageBuildError) as caught:
        fetch_wheels(
            tmp_path / "dl",
            "x86_64",
            tools=[pinned],
            environ={WHEELHOUSE_ENV: str(wheel.parent)},
            run=no_pip,
            log=lambda _: None,
        )
    text = assert_one_line(caught)
    assert f"{WHEELHOUSE_ENV}={wheel.parent} holds no tool 1.2.3 wheel for x86_64" in text
    assert "pinned sha256" in text
    assert "pip download --no-deps --only-binary=:all: --platform manylinux2014_x86_64" in text
    assert f"-d {wheel.parent} tool==1.2.3" in text


def test_wheelhouse_that_is_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match=f"{WHEELHOUSE_ENV}=.* is not a folder") as caught:
        fetch_wheels(
            tmp_path / "dl",
            "x86_64",
            environ={WHEELHOUSE_ENV: str(tmp_path / "nowhere")},
            run=no_pip,
            log=lambda _: None,
        )
    assert "uv==" in assert_one_line(caught)


def test_the_real_pins_are_found_in_a_wheelhouse_by_hash(tmp_path: Path) -> None:
    # A wheel named like uv's but with other bytes is not the pinned one.
    make_wheel(tmp_path / "house", "uv", RUNNER_WHEELS[0].version, ("uv", "uvx"))
    with pytest.raises(ImageBuildError, match="holds no uv"):
        fetch_wheels(
            tmp_path / "dl",
            "x86_64",
            environ={WHEELHOUSE_ENV: str(tmp_path / "house")},
            run=no_pip,
            log=lambda _: None,
        )


def test_no_pin_for_the_engines_machine(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match="architecture riscv64") as caught:
        fetch_wheels(tmp_path / "dl", "riscv64", environ={}, run=no_pip, log=lambda _: None)
    assert "RUNNER_WHEELS" in assert_one_line(caught)


# --------------------------------------------------------------------------- pip


def test_pip_downloads_in_hash_checking_mode(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "index")
    tool = tool_for(wheel)
    calls, run = fake_pip(drop=wheel)
    found = fetch_wheels(
        tmp_path / "dl", "x86_64", tools=[tool], environ={}, run=run, log=lambda _: None
    )
    assert found == {"tool": tmp_path / "dl" / wheel.name}
    (cmd,) = calls
    assert cmd[1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in cmd and "--only-binary=:all:" in cmd
    assert cmd[cmd.index("--platform") + 1] == "manylinux2014_x86_64"
    requirements = Path(cmd[cmd.index("-r") + 1]).read_text()
    assert requirements == f"tool==1.2.3 --hash=sha256:{sha256(wheel)}\n"


def test_pip_failure_is_one_line_naming_the_wheelhouse(tmp_path: Path) -> None:
    _, run = fake_pip(
        returncode=1,
        stderr="Looking in links: /opt/wheels\n"
        "WARNING: Retrying ... connection refused\n"
        "ERROR: Could not find a version that satisfies the requirement uv==0.13.9\n"
        "ERROR: No matching distribution found for uv==0.13.9\n",
    )
    with pytest.raises(ImageBuildError) as caught:
        fetch_wheels(tmp_path / "dl", "x86_64", environ={}, run=run, log=lambda _: None)
    text = assert_one_line(caught)
    assert text.startswith("downloading the uv ")
    assert "No matching distribution found for uv==0.13.9" in text
    assert f"set {WHEELHOUSE_ENV} to a folder holding the wheels" in text


def test_pip_that_cannot_start(tmp_path: Path) -> None:
    def missing(*args: object, **kwargs: object) -> Any:
        raise FileNotFoundError(2, "No such file or directory", "python")

    with pytest.raises(ImageBuildError, match=WHEELHOUSE_ENV) as caught:
        fetch_wheels(tmp_path / "dl", "x86_64", environ={}, run=missing, log=lambda _: None)
    assert_one_line(caught)


def test_pip_leaving_another_wheel_is_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "index")
    pinned = WheelTool("tool", "1.2.3", ("tool",), {"x86_64": "f" * 64})
    _, run = fake_pip(drop=wheel)
    with pytest.raises(ImageBuildError, match="pinned sha256") as caught:
        fetch_wheels(tmp_path / "dl", "x86_64", tools=[pinned], environ={}, run=run, log=print)
    assert_one_line(caught)


# --------------------------------------------------------------------------- the build context


def test_prepare_context_leaves_the_source_untouched(tmp_path: Path) -> None:
    # Any context folder works: a checkout's images/runner or the wheel's _images/runner.
    source = tmp_path / "site-packages" / "executor" / "_images" / "runner"
    shutil.copytree(runner_context(), source)
    (source / TOOLS_DIR).mkdir()
    (source / TOOLS_DIR / "stale").write_text("left by hand")
    before = sorted(p.relative_to(source) for p in source.rglob("*"))
    wheel = make_wheel(tmp_path / "house", "uv", "1.2.3", ("uv", "uvx"))
    tool = WheelTool("uv", "1.2.3", ("uv", "uvx"), {"x86_64": sha256(wheel)})
    lines: list[str] = []
    dest = prepare_context(
        source,
        tmp_path / "build" / "runner",
        "x86_64",
        tools=[tool],
        environ={WHEELHOUSE_ENV: str(wheel.parent)},
        run=no_pip,
        log=lines.append,
    )
    assert sorted(p.relative_to(source) for p in source.rglob("*")) == before
    assert (dest / "Dockerfile").read_bytes() == (source / "Dockerfile").read_bytes()
    assert (dest / "slim.sh").read_bytes() == (source / "slim.sh").read_bytes()
    assert sorted(p.name for p in (dest / TOOLS_DIR).iterdir()) == ["uv", "uvx"]
    assert runner_inputs(dest) == runner_inputs(source)
    assert any("extracted uv, uvx" in line for line in lines)


def test_prepare_context_fails_before_anything_is_built(tmp_path: Path) -> None:
    _, run = fake_pip(returncode=1, stderr="ERROR: network is unreachable\n")
    with pytest.raises(ImageBuildError, match="network is unreachable"):
        prepare_context(
            runner_context(), tmp_path / "ctx", "x86_64", environ={}, run=run, log=lambda _: None
        )


def test_prepare_main_refuses_a_full_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x").write_text("")
    assert images.main(["--prepare", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("hookcage: error: ")
        and err.count("\n") == 1
        and "not an empty folder" in err
    )


def test_prepare_main_with_an_empty_wheelhouse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "house").mkdir()
    monkeypatch.setenv(WHEELHOUSE_ENV, str(tmp_path / "house"))
    assert images.main(["--prepare", str(tmp_path / "ctx"), "--machine", "amd64"]) == 1
    *_, error = capsys.readouterr().err.splitlines()
    assert error.startswith("hookcage: error: ") and "holds no uv" in error
    assert f"{WHEELHOUSE_ENV}=" in error
    assert not (tmp_path / "ctx").exists()  # no half-made context left


# --------------------------------------------------------------------------- reuse decisions


class FakeEngine:
    """Just enough of docker-py's APIClient: images by tag with their labels."""

    def __init__(self, images: dict[str, tuple[str, dict[str, str]]]) -> None:
        self.images = images
        self.removed: list[str] = []

    def inspect_image(self, tag: str) -> dict[str, Any]:
        import docker.errors  # type: ignore[import-untyped, unused-ignore]

        for name, (image_id, labels) in self.images.items():
            if tag in (name, image_id):
                return {"Id": image_id, "Config": {"Labels": labels}, "Size": 1}
        raise docker.errors.NotFound(f"no such image: {tag}")

    def info(self) -> dict[str, str]:
        return {"Architecture": "x86_64"}

    def remove_image(self, image_id: str) -> None:
        self.removed.append(image_id)


class Stop(Exception):
    pass


def test_current_base_is_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = FakeEngine({BASE_IMAGE: ("sha256:base", {PACKAGES_LABEL: base_inputs()})})
    monkeypatch.setattr(base_image, "_require_mmdebstrap", no_pip)
    lines: list[str] = []
    assert build_base_image(engine, log=lines.append) == "sha256:base"
    assert lines == [f"reusing {BASE_IMAGE} (sha256:base)"]


@pytest.mark.parametrize("labels", [{}, {PACKAGES_LABEL: "sha256:old"}])
def test_base_of_another_package_list_is_made_again(
    monkeypatch: pytest.MonkeyPatch, labels: dict[str, str]
) -> None:
    engine = FakeEngine({BASE_IMAGE: ("sha256:base", labels)})

    def mmdebstrap(**kwargs: object) -> str:
        raise Stop

    monkeypatch.setattr(base_image, "_require_mmdebstrap", mmdebstrap)
    lines: list[str] = []
    with pytest.raises(Stop):
        build_base_image(engine, log=lines.append)
    assert "made for another package list" in lines[0]


def test_current_runner_is_returned_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = runner_inputs(runner_context())
    engine = FakeEngine({RUNNER_IMAGE: ("sha256:runner", {INPUTS_LABEL: inputs})})
    monkeypatch.setattr(images, "prepare_context", no_pip)
    lines: list[str] = []
    assert build_runner_image(engine, log=lines.append) == "sha256:runner"
    assert "nothing to build" in lines[-1]


@pytest.mark.parametrize("labels", [{}, {INPUTS_LABEL: "sha256:old"}])
def test_stale_runner_is_rebuilt_and_replaced(
    monkeypatch: pytest.MonkeyPatch, labels: dict[str, str]
) -> None:
    engine = FakeEngine(
        {
            RUNNER_IMAGE: ("sha256:old-runner", labels),
            BASE_IMAGE: ("sha256:old-base", {}),
            "debian:bookworm-slim-absent": ("sha256:x", {}),
        }
    )
    seen: dict[str, Any] = {}

    def prepare(source: Path, dest: Path, machine: str, **kwargs: object) -> Path:
        seen["machine"] = machine
        dest.mkdir(parents=True)
        return dest

    def base(*args: object, **kwargs: object) -> str:
        engine.images[BASE_IMAGE] = ("sha256:new-base", {PACKAGES_LABEL: base_inputs()})
        return "sha256:new-base"

    def docker_build(client: object, context: Path, base: str, **kwargs: Any) -> str:
        seen["inputs"], seen["base"] = kwargs["inputs"], base
        seen["context_is_temporary"] = context != runner_context()
        engine.images[RUNNER_IMAGE] = ("sha256:new-runner", {INPUTS_LABEL: kwargs["inputs"]})
        return "sha256:new-runner"

    monkeypatch.setattr(images, "prepare_context", prepare)
    monkeypatch.setattr(images, "build_base_image", base)
    monkeypatch.setattr(images, "_docker_build", docker_build)
    lines: list[str] = []
    assert build_runner_image(engine, offline=True, log=lines.append) == "sha256:new-runner"
    assert "built from other inputs" in lines[0]
    assert seen == {
        "machine": "x86_64",
        "inputs": runner_inputs(runner_context()),
        "base": BASE_IMAGE,
        "context_is_temporary": True,
    }
    assert engine.removed == ["sha256:old-runner", "sha256:old-base"]
