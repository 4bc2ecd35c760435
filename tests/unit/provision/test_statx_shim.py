"""The runner image's statx shim: its build inputs and label, and what the compiled library does.

gVisor 20221219 (Debian bookworm's runsc) refuses statx() with AT_NO_AUTOMOUNT
(EINVAL), which coreutils' ls and stat always pass. The host-side tests make
the host's kernel behave the same way (a seccomp filter returning EINVAL for
exactly that call, inherited by the program it runs) and check that real
coreutils fail without the shim and work with it preloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from executor.provision import build_context, images
from executor.provision.build_context import build_statx_shim
from executor.provision.recipe import (
    INPUTS_LABEL,
    STATX_SHIM_LIBRARY,
    STATX_SHIM_SOURCE,
    runner_context,
    runner_inputs,
    shim_compiler,
)
from executor.sandbox.docker.imagefacts import STATX_SHIM_LABEL, ImageBuildError

pytestmark = pytest.mark.spawns

CC = shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler on this machine (apt-get install gcc)")

# Runs argv[1:] with a seccomp filter that makes statx(..., flags & AT_NO_AUTOMOUNT, ...) fail
# with EINVAL (gVisor 20221219's behaviour) and lets every other system call through.
REFUSER = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_statx, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x800, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    if (argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        perror("refuser");
        return 125;
    }
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    return 126;
}
"""


def no_log(_: str) -> None:
    pass


def context_copy(tmp_path: Path) -> Path:
    target = tmp_path / "context"
    shutil.copytree(runner_context(), target)
    return target


# --------------------------------------------------------------------------- inputs and label


def test_the_shim_source_and_the_compiler_are_runner_inputs(tmp_path: Path) -> None:
    context = context_copy(tmp_path)
    assert (context / STATX_SHIM_SOURCE).is_file()
    first = runner_inputs(context, statx_shim=True)
    assert runner_inputs(context, statx_shim=False) != first
    assert runner_inputs(context) == runner_inputs(context, statx_shim=shim_compiler() is not None)
    (context / STATX_SHIM_SOURCE).write_text((context / STATX_SHIM_SOURCE).read_text() + "/* x */\n")
    assert runner_inputs(context, statx_shim=True) != first


def test_a_context_without_the_shim_source_is_one_line(tmp_path: Path) -> None:
    context = context_copy(tmp_path)
    (context / STATX_SHIM_SOURCE).unlink()
    with pytest.raises(ImageBuildError, match=STATX_SHIM_SOURCE) as caught:
        runner_inputs(context)
    assert "\n" not in str(caught.value)


def test_shim_compiler_follows_cc_and_path(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "my-cc"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert shim_compiler({"PATH": ""}) is None
    assert shim_compiler({"PATH": str(tool.parent), "CC": "my-cc -m64"}) == str(tool)
    assert shim_compiler({"PATH": str(tool.parent), "CC": "absent-cc"}) is None
    (tool.parent / "cc").symlink_to(tool)
    assert shim_compiler({"PATH": str(tool.parent)}) == str(tool.parent / "cc")


def test_without_a_compiler_the_build_goes_on_and_one_line_says_how_to_get_the_shim(tmp_path: Path) -> None:
    lines: list[str] = []
    built = build_statx_shim(runner_context(), tmp_path / "shim", "x86_64", environ={"PATH": ""}, log=lines.append)
    assert built is False
    assert (tmp_path / "shim").is_dir() and not any((tmp_path / "shim").iterdir())
    assert len(lines) == 1 and "\n" not in lines[0]
    assert all(word in lines[0] for word in ("ls", "gVisor 20221219", "apt-get install gcc", "hookcage image build"))


def test_a_failing_compile_leaves_nothing_and_says_why(tmp_path: Path) -> None:
    broken = tmp_path / "bin" / "cc"
    broken.parent.mkdir()
    # It leaves a half-written output behind (argv: -O2 -fPIC -shared -o OUTPUT SOURCE), as a real one can.
    broken.write_text("#!/bin/sh\necho 'cc: internal error: boom' >&2\n: > \"$5\"\nexit 1\n")
    broken.chmod(0o755)
    lines: list[str] = []
    host = build_context.normalize_machine(os.uname().machine)
    built = build_statx_shim(context_copy(tmp_path), tmp_path / "shim", host,
                             environ={"PATH": str(broken.parent)}, log=lines.append)
    assert built is False and not (tmp_path / "shim" / STATX_SHIM_LIBRARY).exists()
    assert len(lines) == 1 and "boom" in lines[0] and "without the statx shim" in lines[0]


def test_an_engine_of_another_machine_gets_no_shim(tmp_path: Path) -> None:
    lines: list[str] = []
    other = "aarch64" if build_context.normalize_machine(os.uname().machine) != "aarch64" else "x86_64"
    assert not build_statx_shim(runner_context(), tmp_path / "shim", other, log=lines.append)
    assert len(lines) == 1 and other in lines[0]


def test_the_image_label_says_whether_the_context_has_the_shim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, str]] = []

    def fake_build(client: Any, context: Path, **kwargs: Any) -> str:
        seen.append(dict(kwargs["labels"]))
        return "sha256:x"

    monkeypatch.setattr(images, "docker_build", fake_build)
    (tmp_path / "shim").mkdir()
    for present in (False, True):
        if present:
            (tmp_path / "shim" / STATX_SHIM_LIBRARY).write_bytes(b"\x7fELF")
        images._docker_build(None, tmp_path, "base", offline=True, nocache=False, mirror=None,
                             inputs="sha256:in", log=no_log)
    assert seen == [{INPUTS_LABEL: "sha256:in", STATX_SHIM_LABEL: "0"},
                    {INPUTS_LABEL: "sha256:in", STATX_SHIM_LABEL: "1"}]


# --------------------------------------------------------------------------- the library itself


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CC is None:
        pytest.skip("no C compiler on this machine (apt-get install gcc)")
    folder = tmp_path_factory.mktemp("shim")
    assert build_statx_shim(runner_context(), folder, build_context.normalize_machine(os.uname().machine), log=no_log)
    return folder / STATX_SHIM_LIBRARY


@pytest.fixture(scope="module")
def refuser(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CC is None:
        pytest.skip("no C compiler on this machine (apt-get install gcc)")
    folder = tmp_path_factory.mktemp("refuser")
    (folder / "refuser.c").write_text(REFUSER)
    subprocess.run([CC, "-O2", "-o", str(folder / "refuser"), str(folder / "refuser.c")], check=True)
    return folder / "refuser"


def test_the_library_needs_only_old_glibc_symbols(shim: Path) -> None:
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump is missing (apt-get install binutils)")
    table = subprocess.run([objdump, "-T", str(shim)], capture_output=True, text=True, check=True).stdout
    versions = {word.strip("()") for line in table.splitlines() for word in line.split() if "GLIBC_" in word}
    assert versions, table
    for version in versions:
        number = tuple(int(part) for part in version.removeprefix("GLIBC_").split("."))
        assert number <= (2, 28), f"{shim.name} needs {version}: bookworm's 2.36 may not have it"
    assert any(line.endswith(" statx") and ".text" in line for line in table.splitlines()), table


def run_refused(refuser: Path, shim: Path | None, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    if shim is not None:
        env["LD_PRELOAD"] = str(shim)
    return subprocess.run([str(refuser), *argv], capture_output=True, text=True, env=env, check=False)


def test_coreutils_ls_fails_like_under_gvisor_without_the_shim(refuser: Path, tmp_path: Path) -> None:
    # The simulation is faithful: coreutils passes AT_NO_AUTOMOUNT and fails as under runsc 20221219.
    result = run_refused(refuser, None, "ls", "-l", str(tmp_path))
    assert result.returncode != 0 and "Invalid argument" in result.stderr


def test_with_the_shim_ls_and_stat_answer_as_without_the_bug(refuser: Path, shim: Path, tmp_path: Path) -> None:
    (tmp_path / "a file").write_text("twelve bytes")
    (tmp_path / "link").symlink_to("a file")
    expected = subprocess.run(["ls", "-la", str(tmp_path)], capture_output=True, text=True,
                              env={"LC_ALL": "C", "PATH": os.environ.get("PATH", "")}, check=True).stdout
    listed = run_refused(refuser, shim, "ls", "-la", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == expected
    stat = run_refused(refuser, shim, "stat", "-c", "%n %s %F", str(tmp_path / "a file"), str(tmp_path / "link"))
    assert stat.returncode == 0, stat.stderr
    assert stat.stdout.splitlines() == [f"{tmp_path / 'a file'} 12 regular file", f"{tmp_path / 'link'} 6 symbolic link"]


def test_the_shim_keeps_real_errors(refuser: Path, shim: Path, tmp_path: Path) -> None:
    # A missing file is still ENOENT (the retry answers only EINVAL), under the refusal and without it.
    for runner in ([str(refuser), "ls"], ["ls"]):
        result = subprocess.run([*runner, str(tmp_path / "absent")], capture_output=True, text=True,
                                env={"LD_PRELOAD": str(shim), "LC_ALL": "C", "PATH": os.environ.get("PATH", "")},
                                check=False)
        assert result.returncode == 2 and "No such file or directory" in result.stderr
