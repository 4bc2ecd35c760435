"""A token holder against a real ``hookcage serve --listen`` run by an ordinary user (issue 21, class 2).

The service runs as a throwaway unprivileged user (made here, in the
``docker`` group as an operator would put it, removed at the end; as the
current user when the tests do not run as root), with its own
``HOOKCAGE_HOME``, a token file of mode 0600 and a hook that prints the
transcript it is handed (``echo "transcript: $(cat "$(jq -r .transcript_path)")"``)
into the answer: the service's own (user scope), or the project's, reviewed
with ``hookcage trust``. The attacker holds
the token and writes the requests itself: it names the service's token
file, its ``trust.json``, another tenant's project file, a symbolic link in
its own project pointing at the token file (and a linked folder on the
way) as its transcript. Each is refused (403, one line), runs nothing, and
the secret appears nowhere in the answer; a transcript inside the project
is handed to the hook (the control: the hook really prints what it gets).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import importlib.metadata
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_support import PY
from daemon_support import Daemon as _Daemon
from support import POOL_OWNERS, agent_session, allow, containers_created

from executor import __version__
from executor.gates.trust import TRUST_FORMAT
from executor.service import client

TOKEN = "keepout-token-0123456789abcdef-XYZ"
SERVICE_USER = "hookcage-h21svc"
_ADDRESS = re.compile(rb"answering on (https?)://127\.0\.0\.1:(\d+) \(remote mode")
REPO = Path(__file__).resolve().parents[2]
CAT_TRANSCRIPT = 'echo "transcript: $(cat "$(jq -r .transcript_path)")"'
"""Prints the transcript it gets; never JSON on stdout (which would be read as the hook's answer)."""


def _site_packages_for(base: Path) -> Path:
    """hookcage's dependencies copied where an unprivileged user reads them (this interpreter's
    prefix may sit in a 0700 home: /root/.pyenv)."""
    import tomllib

    wanted: set[str] = set()
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    todo = ["hookcage", *declared]  # the checkout's own list too: the installed metadata may be older
    while todo:
        name = todo.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in wanted:
            continue
        wanted.add(key)
        for requirement in dist.requires or ():
            if "extra ==" in requirement:
                continue
            todo.append(re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0])
    target = base / "site-packages"
    target.mkdir()
    for key in wanted:
        if key == "hookcage":
            continue
        dist = importlib.metadata.distribution(key)
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            if source.is_dir():
                shutil.copytree(source, target / top, dirs_exist_ok=True)
            elif source.is_file():
                shutil.copy2(source, target / top)
    return target


class Keeper:
    """A throwaway world: the service user's home and token, the service's home, two tenants' projects."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="hookcage-keepout-"))
        self.base.chmod(0o755)
        self.user: pwd.struct_passwd | None = None
        self.made_user = False

    def setup(self) -> None:
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam(SERVICE_USER)
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                                "--shell", "/usr/sbin/nologin", "--groups", "docker", SERVICE_USER],
                               check=True, capture_output=True)
                self.user, self.made_user = pwd.getpwnam(SERVICE_USER), True
        self.svc_home = self.base / "svc"  # the service user's own HOME
        self.home = self.svc_home / ".config" / "hookcage"  # its HOOKCAGE_HOME
        self.home.mkdir(parents=True)
        self.token_file = self.svc_home / "token"
        self.token_file.write_text(TOKEN + "\n")
        self.token_file.chmod(0o600)
        (self.home / "trust.json").write_text(json.dumps(
            {"format": TRUST_FORMAT, "records": {}, "note": "TRUST-STORE-SECRET"}))
        self.project = self.base / "tenants" / "mine"
        (self.project / "logs").mkdir(parents=True)
        (self.project / "README.md").write_text("mine\n")
        (self.project / "logs" / "session.jsonl").write_text('{"transcript": "MY-OWN-TRANSCRIPT"}\n')
        (self.project / "t.jsonl").symlink_to(self.token_file)
        (self.project / "svc").symlink_to(self.svc_home)
        other = self.base / "tenants" / "other"
        other.mkdir(parents=True)
        self.other_secret = other / "credentials.txt"
        self.other_secret.write_text("OTHER-TENANT-SECRET\n")
        self.managed = self.base / "managed"
        self.managed.mkdir()
        for path in (self.base / "tenants", self.project, self.project / "logs", other):
            path.chmod(0o755)
        for path in (self.project / "README.md", self.project / "logs" / "session.jsonl", self.other_secret):
            path.chmod(0o644)
        self.svc_home.chmod(0o700)
        if self.user is not None:
            for folder, _, files in os.walk(self.svc_home):
                for name in (folder, *(os.path.join(folder, f) for f in files)):
                    os.chown(name, self.user.pw_uid, self.user.pw_gid)
            self.site = _site_packages_for(self.base)
            subprocess.run(["chmod", "-R", "a+rX", str(self.site)], check=True)

    def prefix(self) -> list[str]:
        if self.user is None:
            return [PY]
        return ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}", "--init-groups",
                f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"]

    def cleanup(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)
        if self.made_user:
            subprocess.run(["userdel", SERVICE_USER], check=False, capture_output=True)
            with contextlib.suppress(KeyError):
                import grp

                grp.getgrnam(SERVICE_USER)
                subprocess.run(["groupdel", SERVICE_USER], check=False, capture_output=True)


class Service(_Daemon):
    """``hookcage serve --listen 127.0.0.1:0 --token-file FILE`` as the service user."""

    def __init__(self, world: Keeper) -> None:
        log = world.base / "serve.log"
        super().__init__(world.home, world.managed, world.project, log)
        self.world = world
        self.session = agent_session("keepout")
        self.port = 0

    def start_tcp(self, *args: str) -> None:
        env = {**self.env, "HOME": str(self.world.svc_home)}
        if self.world.user is not None:
            env["PYTHONPATH"] = f"{REPO}{os.pathsep}{self.world.site}"
            env.pop("VIRTUAL_ENV", None)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*self.world.prefix(), "-m", "executor", "serve", "--listen", "127.0.0.1:0",
                 "--token-file", str(self.world.token_file), *args],
                env=env, stdout=log, stderr=log, cwd="/")
        deadline = time.monotonic() + 60
        while (found := _ADDRESS.search(self.log.read_bytes())) is None or (
                health := client.health(str(self.socket), timeout=0.5)) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"the service did not start: {self.log.read_text()}")
            time.sleep(0.05)
        self.port = int(found.group(2))
        self.pid = int(str(health["pid"]))
        POOL_OWNERS.add(str(self.pid))

    def owner(self) -> int:
        assert self.pid is not None
        return os.stat(f"/proc/{self.pid}").st_uid

    def request(self, transcript: str | None, project: Path | None = None,
                **payload: Any) -> tuple[int, dict[str, Any]]:
        stdin = json.dumps({"session_id": self.session, "hook_event_name": "UserPromptSubmit", "prompt": "hi",
                            "cwd": str(self.project), "transcript_path": transcript, **payload}).encode()
        body = json.dumps({"version": __version__, "protocol": 1, "event": None, "agent": None,
                           "payload_b64": base64.b64encode(stdin).decode(),
                           "env": {"CLAUDE_PROJECT_DIR": str(project or self.project)},
                           "cwd": str(self.project)}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            conn.request("POST", "/dispatch", body=body, headers={
                "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()


@pytest.fixture
def world() -> Iterator[Keeper]:
    made = Keeper()
    try:
        made.setup()
        yield made
    finally:
        made.cleanup()


@pytest.fixture
def service(world: Keeper, runner_image: str) -> Iterator[Service]:
    made = Service(world)
    yield made
    made.stop()


SECRETS = ("keepout-token-0123456789abcdef", "TRUST-STORE-SECRET", "OTHER-TENANT-SECRET")


def _hook(service: Service, world: Keeper, scope: str) -> None:
    """The hook that prints its transcript: the service's own (user scope), or the project's, trusted."""
    hooks = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": CAT_TRANSCRIPT}]}]}}
    if scope == "user":
        service.user_hooks(hooks)
    else:
        (world.project / ".claude").mkdir()
        (world.project / ".claude" / "settings.json").write_text(json.dumps(hooks))
        for path in (world.project / ".claude", world.project / ".claude" / "settings.json"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        allow(world.home, [CAT_TRANSCRIPT])
        trusted = subprocess.run([PY, "-m", "executor", "trust", "--yes", "--all", "--agent", "claude",
                        "--project", str(world.project)], env={**service.env, "HOME": str(world.svc_home)},
                       check=False, capture_output=True, text=True, timeout=120)
        assert trusted.returncode == 0, trusted.stdout + trusted.stderr
        store = json.loads((world.home / "trust.json").read_text())
        assert store["records"], store
        store["note"] = "TRUST-STORE-SECRET"  # what an attacker would look for in it
        (world.home / "trust.json").write_text(json.dumps(store))
    if world.user is not None:
        for folder, _, files in os.walk(world.home):
            for name in (folder, *(os.path.join(folder, f) for f in files)):
                os.chown(name, world.user.pw_uid, world.user.pw_gid)


@pytest.mark.docker
@pytest.mark.parametrize("scope", ["user", "project"])
def test_a_token_holder_cannot_read_the_services_secrets_through_the_transcript(
    service: Service, world: Keeper, docker_api: Any, scope: str
) -> None:
    _hook(service, world, scope)
    started = time.time()
    service.start_tcp("--project-root", str(world.base / "tenants"))
    if world.user is not None:
        assert service.owner() == world.user.pw_uid != 0  # an ordinary user runs the service
    # The control: a transcript in the caller's own project reaches the hook, which prints it.
    status, answer = service.request(str(world.project / "logs" / "session.jsonl"))
    assert status == 200, answer
    assert "MY-OWN-TRANSCRIPT" in answer["stdout"], answer
    made = containers_created(docker_api, service.session, started)
    attacks = {
        "the token file": str(world.token_file),
        "trust.json": str(world.home / "trust.json"),
        "another tenant's project": str(world.other_secret),
        "a symlink in the project to the token file": str(world.project / "t.jsonl"),
        "a linked folder in the project": str(world.project / "svc" / "token"),
        "the token file, by /proc": f"/proc/{service.pid}/root{world.token_file}",
    }
    for name, path in attacks.items():
        status, answer = service.request(path)
        assert status == 403, (name, status, answer)
        assert set(answer) == {"detail"} and "\n" not in answer["detail"], name
        assert not any(secret in json.dumps(answer) for secret in SECRETS), (name, answer)
    # The same fields elsewhere in the payload, and the project itself.
    for payload in ({"agent_transcript_path": str(world.home / "trust.json")}, {"cwd": str(world.svc_home)}):
        status, answer = service.request(None, **payload)
        assert status == 403 and not any(secret in json.dumps(answer) for secret in SECRETS), answer
    # The project itself through a symbolic link in it, to the service user's home.
    status, answer = service.request(None, project=world.project / "svc", cwd=str(world.project / "svc"))
    assert status == 403 and "contains" in answer["detail"], answer
    assert containers_created(docker_api, service.session, started) == made  # no container for any attack
    assert [(line["outcome"], line["scope"]) for line in service.log_lines()] == [("ran", scope)]  # the control


@pytest.mark.docker
def test_the_client_a_user_types_reports_the_refusal_in_one_line(service: Service, world: Keeper) -> None:
    _hook(service, world, "user")
    service.start_tcp()
    stdin = json.dumps({"session_id": service.session, "hook_event_name": "UserPromptSubmit", "prompt": "hi",
                        "cwd": str(world.project), "transcript_path": str(world.token_file)}).encode()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKCAGE_")}
    env.update(HOOKCAGE_URL=f"http://127.0.0.1:{service.port}", HOOKCAGE_TOKEN=TOKEN,
               CLAUDE_PROJECT_DIR=str(world.project), HOOKCAGE_HOME=str(world.base / "client-home"))
    proc = subprocess.run([PY, "-m", "executor.entry", "dispatch", "UserPromptSubmit"], input=stdin, capture_output=True,
                          env=env, cwd=world.project, timeout=120)
    assert proc.returncode == 2 and proc.stdout == b""
    [line] = proc.stderr.decode().splitlines()
    assert "HTTP 403" in line and "transcript_path" in line and "keeps to itself" in line
    assert not any(secret.encode() in proc.stderr for secret in SECRETS)
