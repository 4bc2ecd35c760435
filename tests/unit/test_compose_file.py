"""compose.yaml: valid for `docker compose` v2 (the official compose-spec schema) and docker-compose v1.

The schema is tests/data/compose-spec.json (source in compose-spec.SOURCE.md).
docker-compose v1 checks the file itself (`docker-compose config` needs no
engine); the test is skipped where it is not installed. What the file must
promise a user is checked on the parsed file: the images this version
builds, the engine socket, the state in a named volume at the image's
HOOKCAGE_HOME, the workspace at the same path in both containers, the token,
and the agent behind a profile.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from executor.provision.service_image import AGENT_IMAGE, SERVICE_IMAGE

pytestmark = pytest.mark.spawns

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
SCHEMA = ROOT / "tests" / "data" / "compose-spec.json"
TOKEN = "0123456789abcdef0123456789abcdef"


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _errors(document: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(document)]


def test_compose_yaml_is_valid_against_the_compose_spec_schema() -> None:
    assert _errors(_compose()) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("services", "hookcage", "imagee"), "typo"),
        (("services", "hookcage", "volumes"), 5),
        (("services", "agent", "depends_on", "hookcage", "condition"), "service_ready"),
        (("services", "agent", "profiles"), "agent"),
        (("volumes", "hookcage-home"), 5),
    ],
)
def test_the_schema_check_catches_a_broken_file(path: tuple[str, ...], value: object) -> None:
    broken = copy.deepcopy(_compose())
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert _errors(broken), f"the schema accepted {'.'.join(path)} = {value!r}"


def _v1(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("docker-compose (v1) is not installed")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKCAGE_", "COMPOSE_"))}
    return subprocess.run(
        [tool, "-f", str(COMPOSE), "-p", "hookcagecheck", *args],
        env={**clean, **env}, capture_output=True, text=True, timeout=60, check=False,
    )


def test_docker_compose_v1_reads_it_and_its_result_is_valid_too(tmp_path: Path) -> None:
    env = {"HOOKCAGE_TOKEN": TOKEN, "HOOKCAGE_WORKSPACE": str(tmp_path), "HOOKCAGE_PORT": "18787"}
    done = _v1("config", env=env)
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    assert _errors(resolved) == []
    hookcage = resolved["services"]["hookcage"]
    assert f"{tmp_path}:{tmp_path}:ro" in hookcage["volumes"]
    assert hookcage["environment"]["HOOKCAGE_TOKEN"] == TOKEN
    assert "127.0.0.1:18787:8787/tcp" in hookcage["ports"]
    agent = _v1("--profile", "agent", "config", "--services", env=env)
    assert agent.returncode == 0, agent.stderr
    assert sorted(agent.stdout.split()) == ["agent", "hookcage"]


@pytest.mark.parametrize("missing", ["HOOKCAGE_TOKEN", "HOOKCAGE_WORKSPACE"])
def test_docker_compose_v1_refuses_to_start_without_token_or_workspace(missing: str, tmp_path: Path) -> None:
    env = {"HOOKCAGE_TOKEN": TOKEN, "HOOKCAGE_WORKSPACE": str(tmp_path)}
    del env[missing]
    done = _v1("config", env=env)
    assert done.returncode != 0
    assert f"set {missing}" in done.stderr


def test_the_images_are_the_ones_this_version_builds() -> None:
    services = _compose()["services"]
    assert services["hookcage"]["image"] == SERVICE_IMAGE
    assert services["agent"]["image"] == AGENT_IMAGE


def _image_env(dockerfile: Path) -> dict[str, str]:
    """The ENV of a Dockerfile's last stage (NAME=VALUE forms, continued lines)."""
    text = dockerfile.read_text(encoding="utf-8").replace("\\\n", " ")
    last_stage = text.rsplit("\nFROM ", 1)[-1]
    env: dict[str, str] = {}
    for line in last_stage.splitlines():
        if line.startswith("ENV "):
            env.update(re.findall(r"(\w+)=(\S+)", line))
    return env


def test_the_service_keeps_its_state_in_a_named_volume_at_its_home() -> None:
    data = _compose()
    home = _image_env(ROOT / "images" / "service" / "Dockerfile")["HOOKCAGE_HOME"]
    volumes = data["services"]["hookcage"]["volumes"]
    named = [v for v in volumes if v.split(":")[0] in data["volumes"]]
    assert [v.split(":")[1] for v in named] == [home]


def test_the_service_reaches_the_engine_and_listens_with_a_token() -> None:
    hookcage = _compose()["services"]["hookcage"]
    assert any(v.endswith(":/var/run/docker.sock") for v in hookcage["volumes"])
    assert hookcage["command"][:2] == ["serve", "--listen"]
    assert hookcage["command"][3:] == ["--project-root", "${HOOKCAGE_WORKSPACE}"], "callers name the workspace only"
    port = hookcage["command"][2].rsplit(":", 1)[1]
    assert hookcage["command"][2] == f"0.0.0.0:{port}"
    assert [p.rsplit(":", 1)[1] for p in hookcage["ports"]] == [port]
    assert all(p.startswith("127.0.0.1:") for p in hookcage["ports"]), "published on loopback only"
    assert f"127.0.0.1:{port}/health" in " ".join(hookcage["healthcheck"]["test"])
    assert "HOOKCAGE_TOKEN" in hookcage["environment"]


def test_the_workspace_is_at_the_same_path_in_the_service_and_the_agent() -> None:
    services = _compose()["services"]
    for name in ("hookcage", "agent"):
        binds = [v for v in services[name]["volumes"] if "HOOKCAGE_WORKSPACE" in v.split(":")[0]]
        assert len(binds) == 1, name
        source, target = re.findall(r"\$\{[^}]*\}", binds[0])[:2]
        assert source.startswith("${HOOKCAGE_WORKSPACE") and target == "${HOOKCAGE_WORKSPACE}", binds[0]


def test_the_example_agent_routes_its_hooks_to_the_service() -> None:
    services = _compose()["services"]
    agent = services["agent"]
    port = services["hookcage"]["command"][2].rsplit(":", 1)[1]
    assert agent["profiles"] == ["agent"]
    assert agent["environment"]["HOOKCAGE_URL"] == f"http://hookcage:{port}"
    assert agent["environment"]["HOOKCAGE_TOKEN"] == services["hookcage"]["environment"]["HOOKCAGE_TOKEN"]
    assert agent["depends_on"]["hookcage"]["condition"] == "service_healthy"
    assert "/var/run/docker.sock" not in " ".join(agent["volumes"]), "the agent never gets the engine"
