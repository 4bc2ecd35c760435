"""Hook files (parse_hook_file, HookSpec, dedupe) and the policy that merges them."""

from __future__ import annotations

from typing import Any

import pytest

from executor.core.events import EVENTS
from executor.core.hookparse import parse_hook_file
from executor.core.hooks import DEFAULT_TIMEOUT, HookFile, HookSpec, Scope, dedupe
from executor.core.policy import merge

ROOT = "/work/proj"
CMD = {"type": "command", "command": "./check.sh"}
H0 = "$.hooks.PreToolUse[0].hooks[0]"


def parse(data: Any, scope: Scope = Scope.PROJECT, source: str = "hooks.json",
          root: str | None = ROOT) -> HookFile:
    return parse_hook_file(data, scope=scope, source=source, project_root=root)


def wrap(*handlers: Any, event: str = "PreToolUse", matcher: Any = "Bash") -> dict[str, Any]:
    return {"hooks": {event: [{"matcher": matcher, "hooks": list(handlers)}]}}


def one(handler: Any, scope: Scope = Scope.PROJECT, root: str | None = ROOT) -> tuple[HookSpec, HookFile]:
    f = parse(wrap(handler), scope, root=root)
    assert len(f.hooks) == 1
    return f.hooks[0], f


def errors(f: HookFile) -> dict[str, str]:
    return {p.path: p.message for p in f.errors}


def warnings(f: HookFile) -> dict[str, str]:
    return {p.path: p.message for p in f.problems if p.severity == "warning"}


def sandboxed(options: Any, scope: Scope = Scope.PROJECT, root: str | None = ROOT) -> tuple[HookSpec, HookFile]:
    return one({**CMD, "sandbox": options}, scope, root)


# -- a valid file ---------------------------------------------------------------------


def test_a_valid_file() -> None:
    data = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [
                    {"type": "command", "command": "guard.sh", "timeout": 5, "name": "guard",
                     "on_error": "deny", "env": {"B": "2", "A": "1"}},
                    {"type": "command", "command": "log.sh", "async": True},
                ]},
                {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "fmt.sh", "once": True}]},
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "test.sh", "enabled": False}]}],
        },
    }
    f = parse(data, Scope.USER, source="/home/u/.hookcage/hooks.json")
    assert f.problems == ()
    assert f.scope is Scope.USER
    assert [(h.event, h.command) for h in f.hooks] == [
        ("PreToolUse", "guard.sh"), ("PreToolUse", "log.sh"), ("PreToolUse", "fmt.sh"), ("Stop", "test.sh"),
    ]
    guard, log, fmt, test = f.hooks
    assert guard.timeout == 5.0
    assert guard.name == "guard" and guard.label == "guard"
    assert guard.on_error == "deny"
    assert guard.env == (("A", "1"), ("B", "2"))
    assert guard.json_path == H0
    assert guard.source == "/home/u/.hookcage/hooks.json"
    assert guard.matcher.source == "Bash"
    assert log.is_async and not log.once and log.label == "log.sh"
    assert fmt.once and fmt.json_path == "$.hooks.PreToolUse[1].hooks[0]"
    assert not test.enabled and test.matcher.matches_all
    assert log.timeout == DEFAULT_TIMEOUT == 60.0
    assert all(h.invalid is None for h in f.hooks)
    assert all(h.sandbox.backend == "docker" and h.sandbox.workspace == "ro" and h.sandbox.network == "none"
               for h in f.hooks)


def test_an_empty_file_and_an_empty_hooks_object_are_fine() -> None:
    assert parse({}).problems == ()
    assert parse({"hooks": {}}).hooks == ()


# -- file and group structure -----------------------------------------------------------


@pytest.mark.parametrize("data", [[], "hooks", None, 3, [{"hooks": {}}]])
def test_top_level_not_an_object(data: Any) -> None:
    f = parse(data)
    assert f.hooks == ()
    assert errors(f) == {"$": "the top level must be a JSON object"}


@pytest.mark.parametrize("hooks", [[], "x", 1, [{"PreToolUse": []}]])
def test_hooks_not_an_object(hooks: Any) -> None:
    f = parse({"hooks": hooks})
    assert f.hooks == ()
    assert list(errors(f)) == ["$.hooks"]


def test_unknown_event_lists_valid_events_with_its_json_path() -> None:
    f = parse({"hooks": {"Nope": [{"hooks": [CMD]}], "Stop": [{"hooks": [CMD]}]}})
    assert [h.event for h in f.hooks] == ["Stop"]
    message = errors(f)["$.hooks.Nope"]
    assert "'Nope'" in message
    assert all(name in message for name in EVENTS)


def test_event_names_are_case_sensitive() -> None:
    assert "$.hooks.pretooluse" in errors(parse({"hooks": {"pretooluse": []}}))


@pytest.mark.parametrize("groups", [{"matcher": "Bash"}, "Bash", None])
def test_groups_not_a_list(groups: Any) -> None:
    assert list(errors(parse({"hooks": {"PreToolUse": groups}}))) == ["$.hooks.PreToolUse"]


@pytest.mark.parametrize("group", ["Bash", ["Bash"], None, 1])
def test_group_not_an_object(group: Any) -> None:
    f = parse({"hooks": {"PreToolUse": [{"hooks": [CMD]}, group]}})
    assert len(f.hooks) == 1
    assert list(errors(f)) == ["$.hooks.PreToolUse[1]"]


@pytest.mark.parametrize("group", [{"matcher": "Bash"}, {"hooks": CMD}, {"hooks": "echo hi"}])
def test_group_hooks_not_a_list(group: dict[str, Any]) -> None:
    f = parse({"hooks": {"Stop": [group]}})
    assert f.hooks == ()
    assert list(errors(f)) == ["$.hooks.Stop[0].hooks"]


@pytest.mark.parametrize("matcher", [1, ["Bash"], {"tool": "Bash"}, True])
def test_matcher_must_be_a_string(matcher: Any) -> None:
    f = parse(wrap(CMD, matcher=matcher))
    assert f.hooks == ()
    assert list(errors(f)) == ["$.hooks.PreToolUse[0].matcher"]


def test_invalid_regex_matcher_is_a_warning_and_the_hook_is_still_parsed() -> None:
    f = parse(wrap(CMD, matcher="Bash("))
    assert f.errors == ()
    assert "$.hooks.PreToolUse[0].matcher" in warnings(f)
    assert len(f.hooks) == 1
    assert f.hooks[0].invalid is None
    assert f.hooks[0].matcher.error is not None


def test_unknown_group_key_is_a_warning() -> None:
    f = parse({"hooks": {"Stop": [{"hooks": [CMD], "comment": "hi"}]}})
    assert f.errors == ()
    assert "$.hooks.Stop[0].comment" in warnings(f)


def test_problems_carry_the_file_and_path_in_their_text() -> None:
    f = parse(wrap({"type": "command"}), source="/p/.hookcage/hooks.json")
    assert str(f.errors[0]).startswith(f"/p/.hookcage/hooks.json: {H0}.command: ")
    assert f.errors[0].event == "PreToolUse"


@pytest.mark.parametrize("key", ["disableAllHooks", "allowManagedHooksOnly"])
def test_switches_must_be_booleans(key: str) -> None:
    f = parse({key: "true"}, Scope.MANAGED)
    assert list(errors(f)) == [f"$.{key}"]
    assert not f.disable_all and not f.managed_only


def test_allowlist_in_a_hook_file_is_a_warning() -> None:
    assert "$.allowlist" in warnings(parse({"allowlist": ["rm"]}))


# -- handlers -------------------------------------------------------------------------


def test_handler_errors_name_the_exact_json_path() -> None:
    f = parse(wrap(CMD, {**CMD, "timeout": 0}))
    assert list(errors(f)) == ["$.hooks.PreToolUse[0].hooks[1].timeout"]
    first, second = f.hooks
    assert first.invalid is None
    assert second.invalid is not None


@pytest.mark.parametrize(
    ("handler", "key"),
    [
        ({"command": "x"}, "type"),
        ({"type": "", "command": "x"}, "type"),
        ({"type": 1, "command": "x"}, "type"),
        ({"type": "command"}, "command"),
        ({"type": "command", "command": ""}, "command"),
        ({"type": "command", "command": "   "}, "command"),
        ({"type": "command", "command": ["ls", "-l"]}, "command"),
        ({"type": "command", "command": "-rf /"}, "command"),
        ({"type": "command", "command": "  --help"}, "command"),
        ({"type": "prompt", "command": 3}, "command"),
        ({**CMD, "timeout": 0}, "timeout"),
        ({**CMD, "timeout": -1}, "timeout"),
        ({**CMD, "timeout": -0.5}, "timeout"),
        ({**CMD, "timeout": "10"}, "timeout"),
        ({**CMD, "timeout": True}, "timeout"),
        ({**CMD, "timeout": None}, "timeout"),
        ({**CMD, "timeout": 10**9}, "timeout"),
        ({**CMD, "timeout": float("nan")}, "timeout"),
        ({**CMD, "timeout": float("inf")}, "timeout"),
        ({**CMD, "async": "yes"}, "async"),
        ({**CMD, "async": 1}, "async"),
        ({**CMD, "once": "true"}, "once"),
        ({**CMD, "enabled": 0}, "enabled"),
        ({**CMD, "enabled": "false"}, "enabled"),
        ({**CMD, "on_error": "block"}, "on_error"),
        ({**CMD, "on_error": "DENY"}, "on_error"),
        ({**CMD, "on_error": True}, "on_error"),
        ({**CMD, "on_error": ["deny"]}, "on_error"),
        ({**CMD, "name": 5}, "name"),
        ({**CMD, "env": ["A=1"]}, "env"),
        ({**CMD, "env": "A=1"}, "env"),
        ({**CMD, "env": {"1ABC": "x"}}, "env.1ABC"),
        ({**CMD, "env": {"A-B": "x"}}, "env.A-B"),
        ({**CMD, "env": {"A B": "x"}}, "env.A B"),
        ({**CMD, "env": {"": "x"}}, "env."),
        ({**CMD, "env": {"A": 1}}, "env.A"),
        ({**CMD, "env": {"A": None}}, "env.A"),
        ({**CMD, "env": {"A": ["x"]}}, "env.A"),
    ],
)
def test_handler_errors(handler: dict[str, Any], key: str) -> None:
    spec, f = one(handler)
    assert f"{H0}.{key}" in errors(f), errors(f)
    assert spec.invalid is not None


def test_env_name_with_a_trailing_newline_is_rejected() -> None:
    # Regression: "^...$" let "FOO\n" through ("$" matches before a final newline).
    spec, f = one({**CMD, "env": {"FOO\n": "x"}})
    assert f"{H0}.env.FOO\n" in errors(f)
    assert spec.env == ()


@pytest.mark.parametrize("raw", ["not a dict", 1, None, ["type", "command"]])
def test_handler_not_an_object(raw: Any) -> None:
    spec, f = one(raw)
    assert list(errors(f)) == [H0]
    assert spec.invalid is not None


def test_an_invalid_handler_keeps_its_first_error_and_is_listed() -> None:
    spec, f = one({"type": "command", "command": "-x", "timeout": -1})
    assert len(f.errors) == 2
    assert spec.invalid == f.errors[0].message


@pytest.mark.parametrize("timeout", [0.001, 1, 30.5, 86400])
def test_valid_timeouts(timeout: float) -> None:
    spec, f = one({**CMD, "timeout": timeout})
    assert f.errors == ()
    assert spec.timeout == float(timeout)


def test_unknown_handler_keys_are_warnings_not_errors() -> None:
    spec, f = one({**CMD, "matcher": "Bash", "retries": 3, "statusMessage": "Checking...", "if": "Bash(rm *)"})
    assert f.errors == ()
    assert spec.invalid is None
    w = warnings(f)
    assert f"{H0}.matcher" in w and f"{H0}.retries" in w
    assert f"{H0}.if" not in w  # honoured now (test_conditions.py)
    assert spec.condition is not None and spec.condition.source == "Bash(rm *)"
    assert f"{H0}.statusMessage" not in w  # known from other agents, read but not acted on


def test_other_hook_types_parse_without_a_command() -> None:
    spec, f = one({"type": "prompt", "prompt": "Is this safe?"})
    assert f.errors == ()
    assert spec.type == "prompt"
    assert spec.command is None
    assert spec.label == "<prompt hook>"


# -- sandbox: host ---------------------------------------------------------------------


@pytest.mark.parametrize("scope", [Scope.USER, Scope.MANAGED])
@pytest.mark.parametrize("sandbox", ["host", {"backend": "host"}])
def test_host_sandbox_allowed_for_user_and_managed(scope: Scope, sandbox: Any) -> None:
    spec, f = sandboxed(sandbox, scope)
    assert f.errors == ()
    assert spec.sandbox.backend == "host"


@pytest.mark.parametrize("scope", [Scope.PROJECT, Scope.LOCAL])
@pytest.mark.parametrize("sandbox", ["host", {"backend": "host"}, {"backend": "host", "image": "x"}])
def test_host_sandbox_is_an_error_in_repository_scopes(scope: Scope, sandbox: Any) -> None:
    spec, f = sandboxed(sandbox, scope)
    assert f"{H0}.sandbox" in errors(f)
    assert scope.value in errors(f)[f"{H0}.sandbox"]
    assert spec.invalid is not None
    assert spec.sandbox.backend == "docker"


@pytest.mark.parametrize("sandbox", ["HOST", "podman", 1, True, ["host"]])
def test_sandbox_of_another_kind(sandbox: Any) -> None:
    spec, f = sandboxed(sandbox, Scope.USER)
    assert f"{H0}.sandbox" in errors(f)
    assert spec.sandbox.backend == "docker"


@pytest.mark.parametrize("sandbox", [None, "docker", {}, {"backend": "docker"}])
def test_default_docker_sandbox(sandbox: Any) -> None:
    spec, f = sandboxed(sandbox)
    assert f.errors == ()
    assert spec.sandbox.backend == "docker"


def test_unknown_backend_in_an_options_object() -> None:
    assert f"{H0}.sandbox.backend" in errors(sandboxed({"backend": "podman"}, Scope.USER)[1])


# -- sandbox: options -----------------------------------------------------------------


def test_sandbox_options() -> None:
    spec, f = sandboxed({
        "image": "python:3.12-slim", "workspace": "rw", "network": "bridge",
        "mounts": ["docs", "/work/proj/data/", "./a/../b"], "memory": "512m", "cpus": 1.5, "pids": 128,
        "env": {"MODE": "ci"},
    })
    assert f.problems == ()
    s = spec.sandbox
    assert (s.image, s.workspace, s.network) == ("python:3.12-slim", "rw", "bridge")
    assert s.mounts == ("/work/proj/docs", "/work/proj/data", "/work/proj/b")
    assert (s.memory, s.cpus, s.pids) == ("512m", 1.5, 128)
    assert spec.env == (("MODE", "ci"),)


@pytest.mark.parametrize("workspace", ["ro", "rw", "none"])
def test_workspace_modes(workspace: str) -> None:
    assert sandboxed({"workspace": workspace})[0].sandbox.workspace == workspace


@pytest.mark.parametrize(("memory", "stored"), [("1g", "1g"), ("256M", "256M"), (1048576, "1048576"), ("100", "100")])
def test_memory_sizes(memory: Any, stored: str) -> None:
    assert sandboxed({"memory": memory})[0].sandbox.memory == stored


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"workspace": "RW"}, "workspace"),
        ({"workspace": True}, "workspace"),
        ({"workspace": "host"}, "workspace"),
        ({"network": ""}, "network"),
        ({"network": 0}, "network"),
        ({"network": "--privileged"}, "network"),
        ({"memory": "lots"}, "memory"),
        ({"memory": "0"}, "memory"),
        ({"memory": 0}, "memory"),
        ({"memory": -5}, "memory"),
        ({"memory": True}, "memory"),
        ({"memory": "1t"}, "memory"),
        ({"memory": "512m --privileged"}, "memory"),
        ({"cpus": 0}, "cpus"),
        ({"cpus": -1}, "cpus"),
        ({"cpus": 65}, "cpus"),
        ({"cpus": "2"}, "cpus"),
        ({"cpus": True}, "cpus"),
        ({"pids": 0}, "pids"),
        ({"pids": 1.5}, "pids"),
        ({"pids": True}, "pids"),
        ({"pids": 10**6}, "pids"),
        ({"mounts": "docs"}, "mounts"),
        ({"mounts": [1]}, "mounts"),
        ({"mounts": [""]}, "mounts"),
        ({"mounts": ["docs:/etc"]}, "mounts[0]"),
        ({"mounts": ["docs:rw"]}, "mounts[0]"),
        ({"mounts": ["ok", "-v"]}, "mounts[1]"),
        ({"image": "-v"}, "image"),
        ({"image": "--privileged"}, "image"),
        ({"image": ""}, "image"),
        ({"image": "  "}, "image"),
        ({"image": 5}, "image"),
        ({"colour": "blue"}, "colour"),
        ({"env": {"A-B": "1"}}, "env.A-B"),
    ],
)
def test_bad_sandbox_options(options: dict[str, Any], key: str) -> None:
    spec, f = sandboxed(options, Scope.USER)
    assert f"{H0}.sandbox.{key}" in errors(f), errors(f)
    assert spec.invalid is not None


def test_memory_with_a_trailing_newline_is_rejected() -> None:
    # Regression: "^...$" accepted "512m\n" and handed it to the engine.
    spec, f = sandboxed({"memory": "512m\n"}, Scope.USER)
    assert f"{H0}.sandbox.memory" in errors(f)
    assert spec.sandbox.memory is None


@pytest.mark.parametrize(
    "key",
    ["privileged", "cap_add", "devices", "pid", "ipc", "userns", "security_opt", "volumes", "runtime",
     "user", "capabilities", "binds", "pid_mode", "ipc_mode", "userns_mode", "uts", "sysctls",
     "cgroup_parent", "device", "caps"],
)
@pytest.mark.parametrize("scope", list(Scope))
def test_forbidden_sandbox_keys_are_rejected_naming_the_key(key: str, scope: Scope) -> None:
    spec, f = sandboxed({key: True}, scope)
    path = f"{H0}.sandbox.{key}"
    assert path in errors(f)
    assert "not allowed" in errors(f)[path]
    assert key in str(f.errors[0])
    assert spec.invalid is not None


def test_every_forbidden_key_is_reported_not_just_the_first() -> None:
    _, f = sandboxed({"privileged": True, "cap_add": ["SYS_ADMIN"], "volumes": ["/:/host"]})
    assert {f"{H0}.sandbox.{k}" for k in ("privileged", "cap_add", "volumes")} <= set(errors(f))


@pytest.mark.parametrize("network", ["host", "container:abc", "container:"])
@pytest.mark.parametrize("scope", [Scope.PROJECT, Scope.LOCAL])
def test_host_namespace_networks_rejected_in_repository_scopes(network: str, scope: Scope) -> None:
    spec, f = sandboxed({"network": network}, scope)
    assert f"{H0}.sandbox.network" in errors(f)
    assert spec.sandbox.network == "none"


@pytest.mark.parametrize("network", ["host", "container:abc", "bridge"])
def test_user_scope_may_pick_any_network(network: str) -> None:
    spec, f = sandboxed({"network": network}, Scope.USER)
    assert f.errors == ()
    assert spec.sandbox.network == network


def test_project_scope_may_ask_for_a_plain_network() -> None:
    # Allowed, but part of the trust hash the user reviews.
    spec, f = sandboxed({"network": "bridge"})
    assert f.errors == ()
    assert spec.sandbox.network == "bridge"


@pytest.mark.parametrize(
    "mount",
    ["/etc", "/home/me/.ssh", "..", "../other", "docs/../../other", "/work/proj/../secret",
     "/work/project-evil", "/work/proj2", "/"],
)
@pytest.mark.parametrize("scope", [Scope.PROJECT, Scope.LOCAL])
def test_mounts_outside_the_project_rejected_in_repository_scopes(mount: str, scope: Scope) -> None:
    spec, f = sandboxed({"mounts": [mount]}, scope)
    assert f"{H0}.sandbox.mounts[0]" in errors(f)
    assert spec.sandbox.mounts == ()


@pytest.mark.parametrize("mount", ["/work/proj", ".", "sub/dir", "/work/proj/x/../y"])
def test_mounts_inside_the_project_are_fine(mount: str) -> None:
    spec, f = sandboxed({"mounts": [mount]})
    assert f.errors == ()
    assert spec.sandbox.mounts[0].startswith(ROOT)


def test_no_scope_may_mount_outside_the_project() -> None:
    # Extra mounts are for project files; the docker backend refuses others too.
    spec, f = sandboxed({"mounts": ["/opt/data", "../sibling"]}, Scope.USER)
    assert f"{H0}.sandbox.mounts[0]" in errors(f) and f"{H0}.sandbox.mounts[1]" in errors(f)
    assert spec.sandbox.mounts == ()


def test_relative_mount_without_a_project_root() -> None:
    _, f = sandboxed({"mounts": ["docs"]}, Scope.USER, root=None)
    assert f"{H0}.sandbox.mounts[0]" in errors(f)


def test_repository_mounts_without_a_project_root_are_refused() -> None:
    _, f = sandboxed({"mounts": ["/work/proj/docs"]}, Scope.PROJECT, root=None)
    assert f"{H0}.sandbox.mounts[0]" in errors(f)


@pytest.mark.parametrize(
    "mount",
    ["/var/run/docker.sock", "/run/docker.sock", "/var/run", "/run", "/var", "/", "/run/docker",
     "/var/run/./docker.sock", "/tmp/../var/run/docker.sock", "///var/run/docker.sock",
     "/run/docker/plugins"],
)
@pytest.mark.parametrize("scope", list(Scope))
def test_docker_socket_mount_rejected_in_every_scope(mount: str, scope: Scope) -> None:
    spec, f = sandboxed({"mounts": [mount]}, scope)
    assert "Docker socket" in errors(f)[f"{H0}.sandbox.mounts[0]"]
    assert spec.sandbox.mounts == ()


@pytest.mark.parametrize("mount", ["//var/run/docker.sock", "//run", "//"])
@pytest.mark.parametrize("scope", [Scope.USER, Scope.MANAGED])
def test_docker_socket_behind_a_double_leading_slash(mount: str, scope: Scope) -> None:
    # Regression: posixpath.normpath keeps a leading "//", so "//var/run/docker.sock"
    # slipped past the socket check while the kernel opens the socket all the same.
    spec, f = sandboxed({"mounts": [mount]}, scope)
    assert "Docker socket" in errors(f)[f"{H0}.sandbox.mounts[0]"]
    assert spec.sandbox.mounts == ()


def test_relative_docker_socket_mount_from_a_root_project() -> None:
    _, f = sandboxed({"mounts": ["var/run/docker.sock"]}, Scope.PROJECT, root="/")
    assert "Docker socket" in errors(f)[f"{H0}.sandbox.mounts[0]"]


def test_sandbox_env_merges_with_handler_env() -> None:
    spec, f = one({**CMD, "env": {"A": "1"}, "sandbox": {"env": {"B": "2", "A": "1"}}})
    assert f.errors == ()
    assert spec.env == (("A", "1"), ("B", "2"))


def test_sandbox_env_conflicting_with_handler_env() -> None:
    spec, f = one({**CMD, "env": {"A": "1"}, "sandbox": {"env": {"A": "2"}}})
    assert f"{H0}.sandbox.env.A" in errors(f)
    assert spec.invalid is not None


# -- id and dedupe --------------------------------------------------------------------


def spec_of(handler: dict[str, Any], scope: Scope = Scope.USER, source: str = "u.json",
            event: str = "Stop") -> HookSpec:
    f = parse({"hooks": {event: [{"hooks": [handler]}]}}, scope, source)
    return f.hooks[0]


def test_id_is_stable() -> None:
    a, b = spec_of(CMD), spec_of(dict(CMD))
    assert a.id == b.id
    assert a.id.startswith("h") and len(a.id) == 12


@pytest.mark.parametrize(
    "other",
    [
        {"handler": {**CMD, "command": "./other.sh"}},
        {"scope": Scope.MANAGED},
        {"source": "other.json"},
        {"event": "SubagentStop"},
        {"handler": {**CMD, "sandbox": {"network": "bridge"}}},
        {"handler": {**CMD, "sandbox": {"workspace": "rw"}}},
        {"handler": {**CMD, "sandbox": "host"}},
        {"handler": {**CMD, "env": {"A": "1"}}},
    ],
)
def test_id_is_distinct_when_what_runs_or_where_differs(other: dict[str, Any]) -> None:
    args: dict[str, Any] = {"handler": CMD, "scope": Scope.USER, "source": "u.json", "event": "Stop", **other}
    assert spec_of(args.pop("handler"), **args).id != spec_of(CMD).id


def test_id_ignores_the_name() -> None:
    assert spec_of({**CMD, "name": "pretty"}).id == spec_of(CMD).id


def test_dedupe_keeps_the_first_of_identical_handlers_from_several_files() -> None:
    user = spec_of({**CMD, "on_error": "deny"}, Scope.USER, "user.json")
    project = spec_of({**CMD, "on_error": "allow"}, Scope.PROJECT, "project.json")
    local = spec_of(CMD, Scope.LOCAL, "local.json")
    assert dedupe([user, project, local]) == [user]


def test_dedupe_keeps_handlers_that_differ_in_what_or_where() -> None:
    a = spec_of(CMD)
    b = spec_of({**CMD, "sandbox": {"network": "bridge"}}, Scope.PROJECT, "p.json")
    c = spec_of({**CMD, "command": "./other.sh"})
    d = spec_of(CMD, event="SubagentStop")
    assert dedupe([a, b, c, d]) == [a, b, c, d]


def test_dedupe_keeps_config_order() -> None:
    a, b = spec_of({**CMD, "command": "a"}), spec_of({**CMD, "command": "b"})
    assert dedupe([b, a, b, a]) == [b, a]


# -- policy.merge --------------------------------------------------------------------


def file_of(scope: Scope, command: str = "x", **top: bool) -> HookFile:
    data = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"{scope.value}-{command}"}]}]}, **top}
    return parse(data, scope, source=f"{scope.value}.json")


def test_merge_orders_scopes_managed_user_project_local_regardless_of_input() -> None:
    files = [file_of(Scope.LOCAL), file_of(Scope.PROJECT), file_of(Scope.MANAGED), file_of(Scope.USER)]
    hookset = merge(files)
    assert [h.scope for h in hookset.hooks] == [Scope.MANAGED, Scope.USER, Scope.PROJECT, Scope.LOCAL]
    assert [f.scope for f in hookset.files] == [Scope.MANAGED, Scope.USER, Scope.PROJECT, Scope.LOCAL]
    assert all(hookset.skip(h) is None for h in hookset.hooks)


def test_merge_appends_lists_rather_than_replacing() -> None:
    hookset = merge([file_of(Scope.USER, "a"), file_of(Scope.USER, "b"), file_of(Scope.PROJECT, "c")])
    assert [h.command for h in hookset.for_event("Stop")] == ["user-a", "user-b", "project-c"]
    assert hookset.for_event("PreToolUse") == []


def disabled_scopes(switch_scope: Scope, key: str = "disableAllHooks") -> set[Scope]:
    files = [file_of(s, "x", **({key: True} if s is switch_scope else {})) for s in Scope]
    hookset = merge(files)
    skipped = set()
    for h in hookset.hooks:
        skip = hookset.skip(h)
        if skip is not None:
            assert skip.reason == "disabled"
            assert f"{switch_scope.value}.json" in skip.detail
            skipped.add(h.scope)
    return skipped


def test_disable_all_in_managed_disables_everything() -> None:
    assert disabled_scopes(Scope.MANAGED) == set(Scope)


def test_disable_all_in_user_spares_managed() -> None:
    assert disabled_scopes(Scope.USER) == {Scope.USER, Scope.PROJECT, Scope.LOCAL}


@pytest.mark.parametrize("scope", [Scope.PROJECT, Scope.LOCAL])
def test_disable_all_in_a_repository_never_disables_the_users_guards(scope: Scope) -> None:
    assert disabled_scopes(scope) == {Scope.PROJECT, Scope.LOCAL}


def test_allow_managed_hooks_only_in_managed() -> None:
    assert disabled_scopes(Scope.MANAGED, "allowManagedHooksOnly") == {Scope.USER, Scope.PROJECT, Scope.LOCAL}


@pytest.mark.parametrize("scope", [Scope.USER, Scope.PROJECT, Scope.LOCAL])
def test_allow_managed_hooks_only_elsewhere_is_a_warning_and_ignored(scope: Scope) -> None:
    f = file_of(scope, allowManagedHooksOnly=True)
    assert not f.managed_only
    assert "$.allowManagedHooksOnly" in warnings(f)
    assert f.errors == ()
    assert disabled_scopes(scope, "allowManagedHooksOnly") == set()


def test_skip_invalid() -> None:
    hookset = merge([parse(wrap({"type": "command", "command": "-x"}), Scope.USER)])
    skip = hookset.skip(hookset.hooks[0])
    assert skip is not None
    assert skip.reason == "invalid"
    assert "'-'" in skip.detail


def test_skip_disabled_by_enabled_false() -> None:
    hookset = merge([parse(wrap({**CMD, "enabled": False}), Scope.USER)])
    skip = hookset.skip(hookset.hooks[0])
    assert skip is not None and skip.reason == "disabled"


@pytest.mark.parametrize("hook_type", ["prompt", "agent", "http", "Command"])
def test_skip_unsupported_type(hook_type: str) -> None:
    hookset = merge([parse(wrap({"type": hook_type, "command": "x"}), Scope.USER)])
    skip = hookset.skip(hookset.hooks[0])
    assert skip is not None
    assert skip.reason == "unsupported_type"
    assert repr(hook_type) in skip.detail


def test_invalid_wins_over_disabled() -> None:
    hookset = merge([parse(wrap({**CMD, "enabled": False, "timeout": 0}), Scope.USER)])
    skip = hookset.skip(hookset.hooks[0])
    assert skip is not None and skip.reason == "invalid"


def test_problems_for_an_event() -> None:
    data = {
        "disableAllHooks": "yes",  # an error of no event in particular
        "hooks": {
            "PreToolUse": [{"matcher": "Bash(", "hooks": [{"type": "command"}]}],  # warning + error
            "Stop": [{"hooks": [{"type": "command", "command": "-x"}]}],
            "Nope": [],
        },
    }
    hookset = merge([parse(data, Scope.USER)])
    pre = [p.path for p in hookset.problems_for("PreToolUse")]
    assert pre == ["$.disableAllHooks", f"{H0}.command", "$.hooks.Nope"]
    stop = [p.path for p in hookset.problems_for("Stop")]
    assert stop == ["$.disableAllHooks", "$.hooks.Stop[0].hooks[0].command", "$.hooks.Nope"]
    assert all(p.severity == "error" for p in hookset.problems_for("PreToolUse"))
    assert any(p.severity == "warning" for p in hookset.problems)
