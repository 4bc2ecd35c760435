"""The runner image and its builder (executor.provision.images), against the real engine.

These tests never run mmdebstrap and never pull: they need the runner image
to exist already (build it once with ``python -m executor.provision.images``, a few
minutes offline) and skip otherwise. ``build_runner_image`` is idempotent by
design: with a current image present (its inputs label matches) it returns
the existing id after one inspect call, and ``rebuild=True`` re-runs ``docker
build`` on the cached layers of the existing base, so both are asserted here
in seconds (the rebuild fetches the pinned wheels with pip, or takes them
from ``$HOOKCAGE_WHEELHOUSE``).

The interpreters and tools real hooks run (node, npm, npx, uv, ruff,
shellcheck, python3, ...) are run through ``DockerSandbox`` with the real run
profile: uid 65534, read-only root, noexec tmpfs ``/tmp`` as ``HOME``, no
network, a read-only workspace.

Every container is labelled ``hookcage.managed=true`` plus a per-module
``hookcage.test`` label and the session's ``hookcage.test-session`` (so that
another test session on the same engine leaves it alone), and a fixture
removes whatever carries the module's label at the end, even when
``containers.run(remove=True)`` could not (failed start, exception while
waiting).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from executor import __version__
from executor.errors import HookcageError, SandboxError, SandboxUnavailable
from executor.provision import base_image, images
from executor.provision.images import build_runner_image
from executor.provision.mirror import DEFAULT_MIRROR, mirror_from_apt_sources, resolve_mirror
from executor.provision.recipe import (
    BASE_IMAGE,
    INPUTS_LABEL,
    PACKAGES_LABEL,
    RUNNER_IMAGE,
    RUNNER_WHEELS,
    base_inputs,
    runner_context,
    runner_inputs,
)
from executor.sandbox.base import RunRequest
from executor.sandbox.docker import DockerSandbox
from executor.sandbox.docker.imagefacts import ImageBuildError, image_exists

TEST_LABEL = "hookcage.test"
RUN_ID = f"test-images-{uuid.uuid4().hex[:8]}"
SESSION_LABELS = {"hookcage.test-session": os.environ.get("HOOKCAGE_TEST_SESSION", RUN_ID)}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A docker-py client, or a skip when no engine answers."""
    try:
        engine = docker.from_env()
        engine.ping()
    except Exception as exc:  # any failure to connect means "no engine here"
        pytest.skip(f"no Docker engine: {exc}")
    yield engine
    for container in engine.containers.list(all=True, filters={"label": f"{TEST_LABEL}={RUN_ID}"}):
        container.remove(force=True)
    engine.close()


@pytest.fixture(scope="module")
def runner(client: Any) -> str:
    """The runner image's id; skips (never builds) when it is absent."""
    if not image_exists(client, RUNNER_IMAGE):
        pytest.skip(f"{RUNNER_IMAGE} is not built: run `python -m executor.provision.images` first")
    return str(client.images.get(RUNNER_IMAGE).id)


@pytest.fixture(scope="module")
def current_runner(client: Any, runner: str) -> str:
    """The runner image's id when it was built from this checkout's inputs; skips otherwise."""
    labels = client.images.get(RUNNER_IMAGE).labels or {}
    if labels.get(INPUTS_LABEL) != runner_inputs(runner_context()):
        pytest.skip(f"{RUNNER_IMAGE} is out of date: run `hookcage image build` first")
    return runner


@pytest.fixture(scope="module")
def sandbox(docker_api: Any, current_runner: str) -> Iterator[DockerSandbox]:
    """The docker backend with its real run profile, as nobody (as when hookcage runs as root)."""
    with DockerSandbox(
        client=docker_api, image=RUNNER_IMAGE, user="65534:65534", reap_on_start=False
    ) as backend:
        yield backend


def run_hook(sandbox: DockerSandbox, workspace: Path, command: str) -> tuple[int | None, str, str]:
    """Run ``command`` as a hook of ``workspace`` would run; return (exit code, stdout, stderr)."""
    result = sandbox.run(
        RunRequest(
            command=command,
            cwd=str(workspace),
            env={"CLAUDE_PROJECT_DIR": str(workspace)},
            timeout=60,
            project_dir=str(workspace),
            labels={TEST_LABEL: RUN_ID, **SESSION_LABELS},
        )
    )
    return result.exit_code, result.stdout.decode(), result.stderr.decode()


def run_in_runner(client: Any, script: str, **overrides: Any) -> str:
    """Run ``sh -c script`` in the runner the way the sandbox does; return its output."""
    options: dict[str, Any] = {
        "remove": True,
        "user": "65534:65534",
        "read_only": True,
        "network_disabled": True,
        # The session label keeps other test sessions' sweeps (same engine) off this container.
        "labels": {"hookcage.managed": "true", TEST_LABEL: RUN_ID, **SESSION_LABELS},
        "tmpfs": {"/tmp": ""},
        "environment": {"HOME": "/tmp"},
        "stdout": True,
        "stderr": True,
    }
    options.update(overrides)
    output = client.containers.run(RUNNER_IMAGE, ["sh", "-c", script], **options)
    return bytes(output).decode()


# --------------------------------------------------------------------------- the image


@pytest.mark.docker
@pytest.mark.parametrize(
    ("name", "script", "expected"),
    [
        ("sh", "echo hello", "hello"),
        ("bash", "bash -c 'a=(1 2 3); echo ${#a[@]} $((6 * 7))'", "3 42"),
        (
            "python3",
            "python3 -c 'import json, sys; print(json.dumps({\"v\": sys.version_info[0]}))'",
            '{"v": 3}',
        ),
        ("jq", 'echo \'{"tool_name": "Bash"}\' | jq -r .tool_name', "Bash"),
        (
            "git",
            "cd /tmp && git init -q repo && cd repo && echo x > f && git add f"
            " && git -c user.name=t -c user.email=t@example.invalid commit -qm init"
            " && git rev-list --count HEAD",
            "1",
        ),
        ("coreutils", "id -u; printf 'b\\na\\n' | sort | head -1", "65534\na"),
        ("home", 'echo "$HOME"; touch "$HOME/ok" && echo writable', "/tmp\nwritable"),
        ("procps", "ps -o user= -p 1", "nobody"),
        ("iproute2", "ip -o link show | cut -d: -f2 | tr -d ' '", "lo"),
        ("ca-certificates", "test -s /etc/ssl/certs/ca-certificates.crt && echo yes", "yes"),
    ],
)
def test_tool_works_as_nobody_on_a_read_only_root(
    client: Any, runner: str, name: str, script: str, expected: str
) -> None:
    assert run_in_runner(client, script).strip() == expected, name


# --------------------------------------------------------------------------- the hook tools


@pytest.mark.docker
@pytest.mark.parametrize(
    ("name", "command", "expected"),
    [
        ("node", "node -e 'console.log(1+1, process.getuid())'", "2 65534"),
        ("npm", "npm --version", "9."),
        ("npx", "npx --version", "9."),
        ("npm cache in /tmp", "npm config get cache", "/tmp/.npm"),
        ("uv", "uv --version", "uv "),
        ("uvx", "uvx --version", "uvx "),
        ("ruff", "ruff check --help | head -1", "Run Ruff on the given files or directories"),
        ("shellcheck", "shellcheck --version | sed -n 's/^version: //p'", "0."),
        (
            "python3",
            "python3 -c 'import os, sys; print(sys.version_info[0], os.getuid())'",
            "3 65534",
        ),
        (
            "gawk file patch diff",
            "gawk 'BEGIN{print 6*7}'; file -b README.md; patch --version"
            " | head -1; diff -q README.md README.md && echo same",
            "42\nASCII text\nGNU patch",
        ),
        (
            "root read-only",
            "touch /usr/local/bin/x 2>/dev/null && echo wrote || echo refused",
            "refused",
        ),
    ],
)
def test_hook_tool_runs_as_nobody_in_the_run_profile(
    sandbox: DockerSandbox, workspace: Path, name: str, command: str, expected: str
) -> None:
    code, out, err = run_hook(sandbox, workspace, command)
    assert code == 0, f"{name}: exit {code}: {err}"
    assert out.strip().startswith(expected), f"{name}: {out!r} {err!r}"


@pytest.mark.docker
def test_sqlite3_and_bc_work_in_the_run_profile(sandbox: DockerSandbox, workspace: Path) -> None:
    # 1Password's agent hooks read their app's database with sqlite3; shell hooks count with bc.
    code, out, err = run_hook(sandbox, workspace, (
        "sqlite3 /tmp/t.db 'create table t(a); insert into t values (41);' "
        "&& sqlite3 -readonly /tmp/t.db 'select a + 1 from t' && echo '6 * 7.5' | bc"
    ))
    assert code == 0, err
    assert out.split() == ["42", "45.0"], out


@pytest.mark.docker
def test_python_standard_library_is_complete(sandbox: DockerSandbox, workspace: Path) -> None:
    # Every module of the interpreter's own list imports, but the GUI (tk), other systems'
    # (_scproxy, winreg...), the ones Debian moves to packages for building Python itself, and
    # _gdbm (Debian's python3-gdbm: dbm falls back to dbm.ndbm/dbm.dumb); a hook that imports
    # sqlite3, ssl, ctypes, curses, readline, lzma, venv ... gets them.
    script = (
        "import importlib, sys\n"
        "skip = {'tkinter', 'turtle', 'turtledemo', 'idlelib', 'antigravity', 'this', '__phello__',\n"
        "        'msvcrt', 'winreg', 'winsound', 'nt', '_winapi', '_overlapped', '_msi', 'msilib',\n"
        "        '_wmi', 'ensurepip', 'lib2to3', 'distutils', '_tkinter', 'pydoc_data', '_scproxy',\n"
        "        '_gdbm'}\n"
        "bad = []\n"
        "for name in sorted(sys.stdlib_module_names - skip):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as exc:\n"
        "        bad.append(f'{name}: {exc}')\n"
        "print(len(bad)); print(*bad, sep='\\n')\n"
    )
    (workspace / "stdlib_check.py").write_text(script)
    (workspace / "stdlib_check.py").chmod(0o644)
    code, out, err = run_hook(sandbox, workspace, "python3 stdlib_check.py")
    assert code == 0, err
    assert out.splitlines()[0] == "0", out


@pytest.mark.docker
def test_tool_versions_are_the_pinned_ones(sandbox: DockerSandbox, workspace: Path) -> None:
    code, out, err = run_hook(sandbox, workspace, "uv --version; ruff --version")
    assert code == 0, err
    pins = {tool.project: tool.version for tool in RUNNER_WHEELS}
    assert out.split()[:2] == ["uv", pins["uv"]]
    assert f"ruff {pins['ruff']}" in out


@pytest.mark.docker
def test_ruff_checks_a_read_only_workspace(sandbox: DockerSandbox, workspace: Path) -> None:
    # Its default cache (.ruff_cache in the project) is not writable: the image points it at /tmp.
    (workspace / "src" / "bad.py").write_text("import os\nprint( 'x' )\n")
    (workspace / "src" / "bad.py").chmod(0o644)
    code, out, err = run_hook(sandbox, workspace, "ruff check --no-fix src/bad.py")
    assert code == 1, err
    assert "F401" in out and "error" not in err.lower()
    code, out, err = run_hook(sandbox, workspace, "ruff format --check src/main.py")
    assert code == 1, out + err  # the fixture's print('hi'): ruff would use double quotes
    assert "would be reformatted" in out and "error" not in err.lower()


@pytest.mark.docker
def test_shellcheck_reports_a_finding(sandbox: DockerSandbox, workspace: Path) -> None:
    (workspace / "hook.sh").write_text("#!/bin/sh\necho $1\n")
    (workspace / "hook.sh").chmod(0o644)
    code, out, _ = run_hook(sandbox, workspace, "shellcheck -f gcc hook.sh")
    assert code == 1
    assert "SC2086" in out


@pytest.mark.docker
def test_uv_runs_an_inline_script_with_the_image_python(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    (workspace / "hook.py").write_text(
        '# /// script\n# requires-python = ">=3.11"\n# dependencies = []\n# ///\n'
        "import sys\nprint('uv-script', sys.version_info[0])\n"
    )
    (workspace / "hook.py").chmod(0o644)
    code, out, err = run_hook(sandbox, workspace, "uv run --script hook.py")
    assert code == 0, err
    assert out.strip() == "uv-script 3"


@pytest.mark.docker
def test_fetching_without_a_network_fails_fast(sandbox: DockerSandbox, workspace: Path) -> None:
    # No network: npx and uv must fail well inside a hook's timeout, not retry for a minute.
    started = time.monotonic()
    code, _, err = run_hook(sandbox, workspace, "npx --yes hookcage-no-such-package-x")
    assert code != 0, err
    assert any(reason in err for reason in ("EAI_AGAIN", "ENOTFOUND", "ENETUNREACH")), err
    code, _, err = run_hook(sandbox, workspace, "uvx hookcage-no-such-package-x")
    assert code != 0, err
    assert time.monotonic() - started < 30


@pytest.mark.docker
def test_image_environment_for_the_tools(client: Any, current_runner: str) -> None:
    env = dict(
        item.split("=", 1) for item in client.api.inspect_image(RUNNER_IMAGE)["Config"]["Env"]
    )
    assert env["UV_PYTHON_DOWNLOADS"] == "never"
    assert env["UV_NO_PROGRESS"] == "1"
    assert env["NO_UPDATE_NOTIFIER"] == "1"
    assert env["npm_config_cache"] == "/tmp/.npm"
    assert env["npm_config_update_notifier"] == "false"
    assert env["npm_config_fund"] == "false"
    assert env["npm_config_audit"] == "false"
    assert env["RUFF_CACHE_DIR"].startswith("/tmp/")


@pytest.mark.docker
def test_root_filesystem_stays_read_only(client: Any, runner: str) -> None:
    out = run_in_runner(client, "touch /etc/x 2>/dev/null && echo wrote || echo refused")
    assert out.strip() == "refused"


@pytest.mark.docker
def test_runs_as_an_arbitrary_uid_without_passwd_entry(client: Any, runner: str) -> None:
    out = run_in_runner(
        client,
        "id -u; python3 -c 'import os; print(os.path.expanduser(\"~\"))'; git --version >/dev/null && echo git",
        user="4242:4242",
    )
    assert out.split() == ["4242", "/tmp", "git"]


@pytest.mark.docker
def test_image_metadata(client: Any, runner: str) -> None:
    config = client.api.inspect_image(RUNNER_IMAGE)["Config"]
    labels = config["Labels"]
    assert labels["hookcage.image"] == "runner"
    assert labels["hookcage.version"] == __version__
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.title"]
    assert config["Cmd"] == ["sh"]
    assert config["User"] == "65534:65534"
    assert "HOME=/tmp" in config["Env"]
    assert config.get("Shell") in (None, [])  # derived images keep the default RUN shell


@pytest.mark.docker
def test_images_carry_their_inputs(client: Any, current_runner: str) -> None:
    labels = client.api.inspect_image(RUNNER_IMAGE)["Config"]["Labels"]
    assert labels[INPUTS_LABEL] == runner_inputs(runner_context())
    if image_exists(client, BASE_IMAGE):
        base = client.api.inspect_image(BASE_IMAGE)["Config"]["Labels"]
        assert base[PACKAGES_LABEL] == base_inputs()


@pytest.mark.docker
def test_no_setuid_binaries_and_no_docs(client: Any, runner: str) -> None:
    out = run_in_runner(
        client,
        "find / -xdev -type f -perm /6000 2>/dev/null | wc -l;"
        " ls /usr/share/man | wc -l;"
        " find /usr/share/doc -type f ! -name copyright | wc -l;"
        " ls /var/lib/apt/lists | grep -vc '^partial$' || true",
    )
    assert out.split() == ["0", "0", "0", "0"]


# --------------------------------------------------------------------------- builder API


@pytest.mark.docker
def test_image_exists(client: Any, runner: str) -> None:
    assert image_exists(client, RUNNER_IMAGE)
    assert not image_exists(client, f"hookcage/does-not-exist:{uuid.uuid4().hex[:12]}")


@pytest.mark.docker
def test_build_returns_the_present_image_without_building(
    client: Any, current_runner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*args: object, **kwargs: object) -> str:
        raise AssertionError("must not build when the runner image is present")

    monkeypatch.setattr(images, "_docker_build", no_build)
    monkeypatch.setattr(images, "build_base_image", no_build)
    lines: list[str] = []
    started = time.monotonic()
    assert build_runner_image(client, log=lines.append) == current_runner
    assert time.monotonic() - started < 5
    assert any("nothing to build" in line for line in lines)


@pytest.mark.docker
def test_an_image_of_other_inputs_is_rebuilt(
    client: Any, current_runner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A changed Dockerfile (or package list, or pin) changes the inputs: the present image is stale.
    monkeypatch.setattr(images, "runner_inputs", lambda *a, **k: "sha256:other")
    built: list[str] = []

    def fake_build(*args: object, **kwargs: object) -> str:
        built.append(str(kwargs["inputs"]))
        return current_runner

    monkeypatch.setattr(images, "_docker_build", fake_build)
    monkeypatch.setattr(images, "build_base_image", lambda *a, **k: "sha256:base")
    monkeypatch.setattr(images, "prepare_context", lambda source, dest, *a, **k: dest)
    lines: list[str] = []
    assert build_runner_image(client, offline=True, log=lines.append) == current_runner
    assert built == ["sha256:other"]
    assert any("built from other inputs" in line for line in lines)


@pytest.mark.docker
def test_build_accepts_the_low_level_client(docker_api: Any, current_runner: str) -> None:
    assert image_exists(docker_api, RUNNER_IMAGE)
    assert build_runner_image(docker_api, log=lambda _: None) == current_runner


@pytest.mark.docker
def test_rebuild_reuses_the_base_and_the_layer_cache(
    client: Any, current_runner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = client.api.inspect_image(BASE_IMAGE) if image_exists(client, BASE_IMAGE) else None
    if base is None or base["Config"]["Labels"].get(PACKAGES_LABEL) != base_inputs():
        pytest.skip(f"no current {BASE_IMAGE} (runner built online?); a rebuild would run mmdebstrap")

    def no_mmdebstrap(*args: object, **kwargs: object) -> None:
        raise AssertionError("mmdebstrap must not run when the base image exists")

    monkeypatch.setattr(base_image, "_build", no_mmdebstrap)
    lines: list[str] = []
    rebuilt = build_runner_image(client, offline=True, rebuild=True, log=lines.append)
    assert any(line.startswith("reusing " + BASE_IMAGE) for line in lines)
    assert rebuilt == client.images.get(RUNNER_IMAGE).id
    # Rebuilt again from the layer cache: the very same image. (Compared with a
    # second rebuild, not with the id at the module's start: in a full run an
    # earlier build on this engine may have left an equivalent image of another id.)
    assert build_runner_image(client, offline=True, rebuild=True, log=lines.append) == rebuilt


@pytest.mark.docker
def test_unreachable_engine_is_sandbox_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/hookcage-test.sock")
    with pytest.raises(SandboxUnavailable, match="start Docker, or set DOCKER_HOST"):
        build_runner_image(log=lambda _: None)


@pytest.mark.docker
def test_engine_lost_mid_way_is_sandbox_unavailable() -> None:
    dead = docker.DockerClient(base_url="unix:///nonexistent/hookcage-test.sock", version="1.41")
    try:
        with pytest.raises(SandboxUnavailable, match="DOCKER_HOST") as caught:
            image_exists(dead, RUNNER_IMAGE)
        assert caught.value.__cause__ is not None
    finally:
        dead.close()


@pytest.mark.docker
def test_without_mmdebstrap_nor_apt_it_says_what_to_do(
    client: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # No mmdebstrap installed, none in hookcage's (fresh) cache, and no apt to fetch one.
    monkeypatch.setenv("HOOKCAGE_HOME", str(tmp_path))
    monkeypatch.setattr(images.shutil, "which", lambda *a, **k: None)
    with pytest.raises(ImageBuildError, match=r"neither mmdebstrap nor apt-get") as caught:
        build_runner_image(client, offline=True, force=True, log=lambda _: None)
    assert "install mmdebstrap" in str(caught.value)
    assert isinstance(caught.value, SandboxError)
    assert "\n" not in str(caught.value)


@pytest.mark.docker
def test_mmdebstrap_as_non_root_is_refused(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(images.shutil, "which", lambda *a, **k: "/usr/bin/mmdebstrap")
    monkeypatch.setattr(images.os, "geteuid", lambda: 1000)
    with pytest.raises(HookcageError, match="needs root"):
        build_runner_image(client, offline=True, force=True, log=lambda _: None)


# --------------------------------------------------------------------------- mirror detection


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_mirror_from_deb822_sources(tmp_path: Path) -> None:
    write(
        tmp_path / "sources.list.d" / "debian.sources",
        "Types: deb\n"
        "# http://snapshot.debian.org/archive/debian/20250520T000000Z\n"
        "URIs: http://mirror.example/debian/\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        "\n"
        "Types: deb\n"
        "URIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\n"
        "Components: main\n",
    )
    assert mirror_from_apt_sources(tmp_path) == "http://mirror.example/debian"


def test_mirror_from_one_line_list_with_options(tmp_path: Path) -> None:
    write(
        tmp_path / "sources.list",
        "# deb http://commented.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb http://security.example/debian-security bookworm-security main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] https://list.example/debian bookworm main # trailing\n",
    )
    assert mirror_from_apt_sources(tmp_path) == "https://list.example/debian"


def test_mirror_skips_disabled_entries_and_foreign_files(tmp_path: Path) -> None:
    write(
        tmp_path / "sources.list.d" / "a.sources",
        "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n",
    )
    write(
        tmp_path / "sources.list.d" / "b.list.disabled-by-farm",
        "deb http://farm.example/debian bookworm main\n",
    )
    write(
        tmp_path / "sources.list.d" / "c.sources",
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n",
    )
    assert mirror_from_apt_sources(tmp_path) is None


def test_mirror_of_another_release_is_used_as_a_fallback(tmp_path: Path) -> None:
    write(
        tmp_path / "sources.list.d" / "debian.sources",
        "Types: deb\nURIs: http://trixie.example/debian\nSuites: trixie trixie-updates\n"
        "Components: main\n\n"
        "Types: deb\nURIs: http://ppa.example/ubuntu\nSuites: noble\n",
    )
    assert mirror_from_apt_sources(tmp_path) == "http://trixie.example/debian"


def test_resolve_mirror_order(tmp_path: Path) -> None:
    write(tmp_path / "sources.list", "deb http://apt.example/debian bookworm main\n")
    env = {"HOOKCAGE_DEBIAN_MIRROR": "http://env.example/debian/"}
    assert resolve_mirror("http://arg.example/debian", environ=env, etc_apt=tmp_path) == (
        "http://arg.example/debian"
    )
    assert resolve_mirror(environ=env, etc_apt=tmp_path) == "http://env.example/debian"
    assert resolve_mirror(environ={}, etc_apt=tmp_path) == "http://apt.example/debian"
    assert resolve_mirror(environ={}, etc_apt=tmp_path / "nothing") == DEFAULT_MIRROR
