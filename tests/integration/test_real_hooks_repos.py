"""Several authors' published hooks in one repository, as users combine them, per agent.

``test_real_hooks.py`` runs one published hook per project. In the wild a
repository carries several authors' hooks side by side: a Claude Code user
copies karanb192's guards and kenryu42's safety net into ``.claude/hooks/``
and wires them in ``.claude/settings.json``; a Copilot user drops
awesome-copilot's tool guardian and 1Password's env-file hook into the
repository with their ``.github/hooks/*.json``. Here:

1. one project per agent is laid out with the authors' files where their
   READMEs say to put them, and the agent's own hook file with the authors'
   own command lines (an adaptation, where one is needed, is made in that
   file and said in a comment, never in the authors' bytes);
2. every payload is run **directly on the host**, as the agent runs its
   hooks: every matching hook of the repository, the payload in the agent's
   own shape on stdin, the project as working directory, a throw-away
   ``HOME``; the answers are folded as the agent folds them (a deny wins);
3. the user adopts the hooks (``hookcage allow`` as suggested, then
   ``hookcage trust --all --yes``) and every payload is dispatched with
   ``hookcage dispatch --agent NAME`` against the real engine;
4. both folded answers must agree (:func:`real_hooks_support.agrees`), or
   differ the way the case says by design (read-only workspace, throw-away
   home, no network), asserted as such and told to the user in one line.

**Where the hooks come from.** Each author is an :class:`Upstream`: the
repository, the commit, its licence (only permissively licensed authors),
and each file's original path with its SHA-256 at that commit. The files are
looked for under ``tests/data/real_hooks/<owner>-<repo>/<original path>``
(``$HOOKCAGE_REAL_HOOKS_DIR`` instead, when set), each author's
``SOURCE.md`` says the same in prose. CI reaches no code host, so the files
must be there ahead of time, byte for byte as upstream has them: a file that
differs fails the test; an author whose files are absent is skipped, with the
reason. Every case's row names its hooks' sources and commits.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from real_hooks_support import (
    Bench,
    Case,
    Hook,
    Run,
    Verdict,
    agrees,
    told_in_one_line,
    verdict_of,
)

pytestmark = pytest.mark.docker

DATA = Path(__file__).resolve().parent.parent / "data" / "real_hooks"


# -- where the hooks come from ---------------------------------------------------------


@dataclass(frozen=True)
class Upstream:
    """One author's repository at one commit: its licence and the files taken from it (path -> SHA-256)."""

    repo: str
    commit: str
    license: str
    files: dict[str, str]

    @property
    def folder(self) -> str:
        return self.repo.replace("/", "-")

    def cite(self, path: str) -> str:
        """``owner/repo@commit7:path``: what a row of the table names."""
        return f"{self.repo}@{self.commit[:7]}:{path}"

    def root(self) -> Path:
        """The folder holding this author's files, checked byte for byte; skips when they are absent."""
        base = Path(os.environ.get("HOOKCAGE_REAL_HOOKS_DIR") or DATA) / self.folder
        missing = [path for path in self.files if not (base / path).is_file()]
        if missing:
            pytest.skip(f"{self.repo}@{self.commit[:7]} is not vendored: {missing[0]} (and {len(missing) - 1} more) "
                        f"absent under {base} (see tests/data/real_hooks/{self.folder}/SOURCE.md)")
        for path, digest in self.files.items():
            got = hashlib.sha256((base / path).read_bytes()).hexdigest()
            assert got == digest, f"{base / path} differs from {self.cite(path)} (sha256 {got}, upstream {digest})"
        return base


KARANB192 = Upstream("karanb192/claude-code-hooks", "811aeb7279e2517efb86acf800b73ff2089f3da8", "MIT", {
    "LICENSE": "6b62504504986af42306255895e7c1c233ec981718144e4660d2016f85552a2c",  # MIT: copies carry the notice
    "plugins/block-dangerous-commands/block-dangerous-commands.js":
        "eab68c1d17f994c8b60aeb65ecaee0fc2e0a476e9ea7e5ffcfd77f8554cbf3f6",
    "plugins/protect-secrets/protect-secrets.js": "76025621e948ea6069015db7085f2992d1dcc115a05c2bbd6d513b2f347e9fec",
    "plugins/git-safety/git-safety.js": "3829af216e68d4768476d04377837880416b43d0c06158757a7a2853e15a4cb6",
})
SAFETY_NET = Upstream("kenryu42/claude-code-safety-net", "1819ca2d7527e261fbfaee17237bc54d857a726c", "MIT", {
    "LICENSE": "df0114e2b99ca10036a25483aae7e8107fa2b232f267dc7648c13176b4da0ba5",  # MIT: copies carry the notice
    "dist/bin/cc-safety-net.js": "d16f2899cd1b7edbdb58f1801d73cf0468fba361a5f0fb734f34fdaa5527b943",
    "hooks/hooks.json": "6f21b8958370841f26b7b74d210773f649d9fa37831c35209b5af03004f4d8a4",
    ".github/hooks/safety-net.json": "791d4ed04893ef4f491265eff53db830056312df5680a6c1910483aae88d5374",
})
ONEPASSWORD = Upstream("1Password/agent-hooks", "adebf29d542ce057d763713699b96ba01e39807a", "MIT", {
    "LICENSE": "57366e119c63cfe80161619a49c2587c9df082cabe92820ed36470100ebcf469",  # MIT: copies carry the notice
    "bin/run-hook.sh": "fc5d2172731e2f98fc3e4cfa4ef34c9b34f12d45efdbeb1a1cb122a43cc8d79e",
    "lib/json.sh": "c41f0a8c323c697b205106ebf4de2a37a419b8f53e0063a7a8b01dfaaead9384",
    "lib/logging.sh": "a843d5db90d468d9138262b7b35d42f2f4da6253d8bb05b3664aae19910a4754",
    "lib/os.sh": "23a6ade90bca1d19fe849ecc751109764eb860c9b5914d24e0efcd415a7fb4fa",
    "lib/paths.sh": "940693c31401fcf080a1fa1783fd3bad4e0c7f6c43ff381840fee128279f1556",
    "adapters/_lib.sh": "dac1abdd3dc51f2bba9d89a1e2ce3745c5a699c535858d311c771ae94c405aae",
    "adapters/claude-code.sh": "f838cd2dd34daef483ad59613438482e874b0d24df8a4a2768bdef9ef733f8ec",
    "adapters/cursor.sh": "85bd79b936e159e202bc4fcb2124e4b203e406a9eedae5b8ba4a1696eaefdc4e",
    "adapters/generic.sh": "e97a0129811f4d87ed3a1e6823b3d49279511e9887bb3edb51acc5fa54fed72e",
    "adapters/github-copilot.sh": "65b594056142ab9fb351d17f8d0da1827cfe5189326b40d735477d539fc90da2",
    "adapters/windsurf.sh": "aeb4ebed26f8518e11d2164e7b3f67bfd2fca675d95493a7359a7d6a5baf564d",
    "hooks/1password-validate-mounted-env-files/hook.sh":
        "02fb90d90e27de674001345f2d78bc082fbeb6a1c19dd5d90023b2d6c712f005",
    ".claude/settings.json": "4f2526f79860853328f1b2385594ac9e33c7c24cbf8b3268421c71ba835bcd39",
    ".github/hooks/hooks.json": "c2cf7f9e3b9393c45a98c59c1c01054deed657fef5287b73cfae59f4bff8db23",
})
AWESOME_COPILOT = Upstream("github/awesome-copilot", "ab7544d03d4c49fdd07f5958e1888ad39c4118e2", "MIT", {
    "LICENSE": "e32449d23085399adc1222f7a17408b730550258e51627c153cb108ca9955823",  # MIT: copies carry the notice
    "hooks/tool-guardian/guard-tool.sh": "6aa80acf7d5b504247c38470a75cef7bdb05cfe067cbdf1ea5114280a415395b",
    "hooks/tool-guardian/hooks.json": "44a0487683ba1652335648d9fb86f5ce6c5e264b44f4a21003b227176d54d973",
    "hooks/governance-audit/audit-prompt.sh": "800475fe6db59917bbcf9c2c687efc161ff45ce3fcb8c2fd9bad9076368ff850",
    "hooks/governance-audit/audit-session-start.sh": "bb943018e32f390e6b465e54701a85a888441f51521c50ed43bdd404590f9bb2",
    "hooks/governance-audit/audit-session-end.sh": "693d9c302b59755ee7044ab653ed93d15927ee07868b11b8daba9cfd108819a5",
    "hooks/governance-audit/hooks.json": "82112334baf98e77b47f2daff6aaf90a8a1cc8f34aebffe945007aaa56b1edb0",
})
"""Not taken, for want of a licence that allows redistribution (checked at the commits used):
disler/claude-code-hooks-mastery (no licence file) and anthropics/claude-code's ``examples/hooks``
and ``plugins/plugin-dev`` examples ("All rights reserved")."""


# -- the agents' ways of running a repository's hooks -----------------------------------------


@dataclass
class RepoHook:
    """One entry of the agent's hook file, as the agent runs it directly."""

    name: str
    event: str
    """The key in the agent's file: Claude Code's event, or Copilot's (``preToolUse``, ``PreToolUse``)."""
    command: str
    source: str
    matcher: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: int = 60


@dataclass
class RepoCase:
    """One payload sent to the whole repository; ``expect`` is the folded direct verdict."""

    label: str
    event: str
    fields: dict[str, Any]
    expect: str
    by_design: str = ""
    check: Callable[[Run, Run], None] | None = None


PERMISSION_KINDS = ("deny", "ask", "allow")


def fold(verdicts: list[Verdict]) -> Verdict:
    """The agents' fold of several hooks' answers: stop, then deny > ask > allow, then block; reasons joined."""
    for kind in ("stop", "deny", "block", "ask", "allow"):
        deciding = [v for v in verdicts if v.kind == kind]
        if deciding:
            return Verdict(kind, reason="\n".join(v.reason for v in deciding if v.reason),
                           context="\n".join(v.context for v in verdicts if v.context))
    return Verdict("none", context="\n".join(v.context for v in verdicts if v.context),
                   error=any(v.error for v in verdicts))


def copilot_verdict_of(event: str, code: int, stdout: str, stderr: str) -> Verdict:
    """What Copilot CLI does with one hook's answer (or hookcage's, given as Copilot's).

    Copilot CLI's hooks reference (github/docs ``hooks-reference.md``, which superseded
    ``cli-hooks-reference.md``; as quoted in hookcage issue 22, 2026-11): a ``preToolUse``
    command hook that exits non-zero (other than a timeout) denies the call; exit 0 is read
    for ``permissionDecision`` (``deny``/``ask``/``allow``) and its reason, at the top level
    (Copilot's form) or in ``hookSpecificOutput`` (the VS Code-compatible form of a
    PascalCase key); ``continue: false`` stops the agent; other events' failures are logged
    and skipped.
    """
    pre = event in ("preToolUse", "PreToolUse")
    if code != 0:
        if pre:
            return Verdict("deny", reason=(stderr.strip() or stdout.strip()))
        return Verdict("none", error=True, notes=(stderr.strip().splitlines() or [""])[0])
    text = stdout.strip()
    try:
        data = json.loads(text) if text.startswith("{") else {}
    except ValueError:
        data = {}
    specific = data.get("hookSpecificOutput") if isinstance(data.get("hookSpecificOutput"), dict) else {}
    decision = data.get("permissionDecision") or specific.get("permissionDecision")
    reason = str(data.get("permissionDecisionReason") or specific.get("permissionDecisionReason") or "")
    if data.get("continue") is False:
        return Verdict("stop", reason=str(data.get("stopReason") or ""))
    if pre and decision in PERMISSION_KINDS:
        return Verdict(str(decision), reason=reason)
    return Verdict("none", context=str(data.get("additionalContext") or specific.get("additionalContext") or ""))


def _matches(matcher: str | None, tool: str) -> bool:
    if not matcher or matcher == "*":
        return True
    return tool in matcher.split("|") if re.fullmatch(r"[\w|]+", matcher) else bool(re.search(matcher, tool))


@dataclass
class RepoBench(Bench):
    """A project carrying several authors' hooks in one agent's files."""

    agent: str = "claude"
    repo_hooks: list[RepoHook] = field(default_factory=list)

    def vendor(self, upstream: Upstream, path: str, relative: str | None = None) -> Path:
        """Copy one of the author's files, byte for byte, to ``relative`` (default: its own path)."""
        return self.put(upstream.root() / path, relative or path)

    def agent_file(self, relative: str, data: dict[str, Any]) -> None:
        """Write the agent's hook file (``.claude/settings.json``, ``.github/hooks/NAME.json``)."""
        self.write(relative, json.dumps(data, indent=2) + "\n")

    # -- direct ------------------------------------------------------------------------

    def agent_payload(self, case: RepoCase, key: str) -> dict[str, Any]:
        """The payload the agent hands a hook registered under ``key``."""
        if self.agent == "claude":
            payload, _ = self.payload_for(case.event, case.fields)
            return payload
        tool, args = case.fields.get("toolName", ""), case.fields.get("toolArgs", {})
        if key[0].isupper():  # the VS Code-compatible form (Copilot's reference, PascalCase keys)
            snake: dict[str, Any] = {"hook_event_name": key, "session_id": self.session, "cwd": str(self.project),
                                     "timestamp": "2026-11-27T12:00:00.000Z"}
            if tool:
                snake.update(tool_name={"bash": "Bash"}.get(tool, tool), tool_input=args)
            if "prompt" in case.fields:
                snake["prompt"] = case.fields["prompt"]
            return snake
        camel: dict[str, Any] = {"timestamp": 1764244800000, "cwd": str(self.project)}
        if tool:
            camel.update(toolName=tool, toolArgs=json.dumps(args))
        if "prompt" in case.fields:
            camel["prompt"] = case.fields["prompt"]
        return camel

    def payload_for(self, event: str, fields: dict[str, Any]) -> tuple[dict[str, Any], Path]:
        return self.payload(Case(Hook("repo", event, "", ""), "", fields, ""), "repo")

    def matching(self, case: RepoCase) -> list[RepoHook]:
        tool = str(case.fields.get("tool_name") or case.fields.get("toolName") or "")
        same = [h for h in self.repo_hooks if h.event.lower() == case.event.lower()
                or (self.agent == "copilot" and {h.event, case.event} == {"userPromptSubmitted", "UserPromptSubmit"})]
        return [h for h in same if not tool or _matches(h.matcher, tool)]

    def direct_repo(self, case: RepoCase) -> tuple[Run, list[str], tuple[str, ...]]:
        """Every matching hook run as the agent runs it: the agent's fold, each hook's ``name: answer``,
        and the commands of the hooks that exited 0 (hookcage must report no failure of theirs)."""
        verdicts, shown, runs = [], [], []
        for hook in self.matching(case):
            payload = self.agent_payload(case, hook.event)
            shell = ["sh", "-c"] if self.agent == "claude" else ["bash", "-c"]
            proc = subprocess.run([*shell, hook.command], input=json.dumps(payload), capture_output=True, text=True,
                                  cwd=self.project, env={**self.host_env(), **hook.env}, timeout=hook.timeout)
            read = verdict_of if self.agent == "claude" else copilot_verdict_of
            verdict = read(hook.event, proc.returncode, proc.stdout, proc.stderr)
            verdicts.append(verdict)
            runs.append(proc)
            shown.append(f"{hook.name}: {verdict.show()}")
        folded = fold(verdicts)
        out = "\n".join(p.stdout for p in runs)
        quiet = tuple(hook.command for hook, proc in zip(self.matching(case), runs, strict=True)
                      if proc.returncode == 0)
        return Run(0, out, "\n".join(p.stderr for p in runs), folded), shown, quiet

    # -- through hookcage -----------------------------------------------------------------

    def dispatch_repo(self, case: RepoCase) -> Run:
        if self.agent == "claude":
            payload, _ = self.payload_for(case.event, case.fields)
        else:
            payload = self.agent_payload(case, case.event)
        proc = self.hookcage("dispatch", "--agent", self.agent, case.event, stdin=json.dumps(payload), check=False)
        assert proc.returncode in (0, 2), f"hookcage dispatch failed: {proc.returncode}: {proc.stderr}"
        if self.agent == "claude":
            verdict = verdict_of(case.event, proc.returncode, proc.stdout, proc.stderr)
            notes = str(json.loads(proc.stdout).get("systemMessage") or "") if proc.stdout.strip().startswith("{") \
                else ""
        else:
            verdict = copilot_verdict_of(case.event, proc.returncode, proc.stdout, proc.stderr)
            notes = proc.stderr.strip()  # Copilot shows no message: hookcage's notes go to stderr
        verdict = Verdict(verdict.kind, verdict.reason, verdict.context, verdict.error, notes)
        return Run(proc.returncode, proc.stdout, proc.stderr, verdict)

    def compare_repo(self, cases: list[RepoCase]) -> None:
        """Run every case directly, adopt the repository's hooks, dispatch every case; compare; print."""
        direct = [self.direct_repo(case) for case in cases]
        self.adopt()
        caged = [self.dispatch_repo(case) for case in cases]
        problems = []
        for case, (host, per_hook, quiet), cage in zip(cases, direct, caged, strict=True):
            reasons = [reason for reason in host.verdict.reason.split("\n") if reason] or [""]
            problems.append(self.judge(
                "; ".join(h.source for h in self.matching(case)) or "(no hook listens)", case.label, host, cage,
                case.expect, by_design=case.by_design, check=case.check, names=quiet, direct="; ".join(per_hook),
                same=lambda host=host, cage=cage, reasons=reasons: all(
                    agrees(Verdict(host.verdict.kind, reason, host.verdict.context), cage.verdict)
                    for reason in reasons)))
        self.conclude(problems)


@pytest.fixture
def claude_repo(tmp_path: Path, runner_image: str) -> RepoBench:
    return RepoBench(tmp_path, agent="claude")


@pytest.fixture
def copilot_repo(tmp_path: Path, runner_image: str) -> RepoBench:
    return RepoBench(tmp_path, agent="copilot")


def need_node() -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed on this host: these hooks are run directly with it")


def bash_call(command: str) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "toolu_01"}


def copilot_call(tool: str, **args: Any) -> dict[str, Any]:
    return {"toolName": tool, "toolArgs": args}


# -- Claude Code: .claude/hooks/ with karanb192's guards, kenryu42's safety net, 1Password's hook --


def test_claude_repository_of_three_authors(claude_repo: RepoBench) -> None:
    """karanb192's README ("the classic way": copy `plugins/<name>/<name>.js` to a hooks folder, wire
    `node .../<name>.js` in settings.json) next to safety-net's plugin hook (`node
    "${CLAUDE_PLUGIN_ROOT}/dist/bin/cc-safety-net.js" --claude-code`, the plugin root a folder of
    `.claude/hooks/`) and 1Password's `.claude/settings.json` entry (`bin/run-hook.sh
    1password-validate-mounted-env-files`, its files at the repository root as in its own repository).
    Every hook writes its log under the home directory: a throw-away one both ways."""
    need_node()
    repo = claude_repo
    guards = {name: f"plugins/{name}/{name}.js" for name in ("block-dangerous-commands", "protect-secrets",
                                                               "git-safety")}
    for name, path in guards.items():
        repo.vendor(KARANB192, path, f".claude/hooks/{name}.js")
    # The bundle is an ES module: node 20+ guesses so from its syntax, the runner's node 18 does not, and
    # the plugin's package.json ("type": "module") would make hookcage fetch its npm dependencies, which the
    # bundle already holds. So the copy is named .mjs (same bytes; the command line names it).
    repo.vendor(SAFETY_NET, "dist/bin/cc-safety-net.js", ".claude/hooks/safety-net/cc-safety-net.mjs")
    for path in ONEPASSWORD.files:
        if not path.startswith("."):
            repo.vendor(ONEPASSWORD, path)
    repo.write(".env", "STRIPE_SECRET_KEY=sk_test_placeholder\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo.project)], check=True)
    repo.readable()

    def karan(name: str, matcher: str) -> RepoHook:
        return RepoHook(name, "PreToolUse", f'node "$CLAUDE_PROJECT_DIR/.claude/hooks/{name}.js"',
                        KARANB192.cite(guards[name]), matcher=matcher)

    net = RepoHook("safety-net", "PreToolUse",
                   'node "$CLAUDE_PROJECT_DIR/.claude/hooks/safety-net/cc-safety-net.mjs" --claude-code',
                   SAFETY_NET.cite("hooks/hooks.json"), matcher="Bash")
    onepassword = RepoHook("1password", "PreToolUse", "bin/run-hook.sh 1password-validate-mounted-env-files",
                           ONEPASSWORD.cite(".claude/settings.json"), matcher="Bash")
    repo.repo_hooks = [karan("block-dangerous-commands", "Bash"), karan("git-safety", "Bash"), net, onepassword,
                       karan("protect-secrets", "Read|Edit|Write|Bash")]
    groups: dict[str, list[dict[str, Any]]] = {}
    for hook in repo.repo_hooks:
        groups.setdefault(hook.matcher or "", []).append({"type": "command", "command": hook.command})
    repo.agent_file(".claude/settings.json", {"hooks": {"PreToolUse": [
        {"matcher": matcher, "hooks": handlers} for matcher, handlers in groups.items()]}})
    env = str(repo.project / ".env")
    repo.compare_repo([
        RepoCase("Bash `rm -rf /`", "PreToolUse", bash_call("rm -rf /"), "deny"),
        RepoCase("Write .env", "PreToolUse",
                 {"tool_name": "Write", "tool_input": {"file_path": env, "content": "X=1\n"}}, "deny"),
        RepoCase("Read ../../../root/.aws/credentials (traversal)", "PreToolUse",
                 {"tool_name": "Read", "tool_input": {"file_path": f"{repo.project}/../../../root/.aws/credentials"}},
                 "deny"),
        RepoCase("Bash `cat ~/.ssh/id_rsa`", "PreToolUse", bash_call("cat ~/.ssh/id_rsa"), "deny"),
        RepoCase("Bash `git push --force origin main`", "PreToolUse", bash_call("git push --force origin main"),
                 "deny"),
        RepoCase("Bash `ls`", "PreToolUse", bash_call("ls"), "none"),
        RepoCase("prompt", "UserPromptSubmit", {"prompt": "list the files"}, "none"),
        RepoCase("Stop", "Stop", {"stop_hook_active": False}, "none"),
    ])


# -- Copilot CLI: .github/hooks/ with awesome-copilot's guardian and audit, 1Password, safety-net ---


def test_copilot_repository_of_three_authors(copilot_repo: RepoBench) -> None:
    """awesome-copilot's README: `cp -r hooks/tool-guardian your-repo/hooks/` with its hooks.json in
    `.github/hooks/`, and `cp -r hooks/governance-audit .github/hooks/` + `chmod +x`; 1Password's
    `.github/hooks/hooks.json` (a PascalCase `PreToolUse` with `command` and `timeout`) and its files at the
    root; safety-net's `.github/hooks/safety-net.json`, whose `npx -y cc-safety-net --copilot-cli` needs
    the npm registry: the test's copy runs the same package's bundled `dist/bin/cc-safety-net.js` with
    node instead (no registry here, nor in the sandbox).

    Needs the h22-copilot branch: Copilot's fail-closed `preToolUse` (tool-guardian exits 1 on every
    call Copilot CLI makes: it reads `toolInput`, Copilot sends `toolArgs`, and its `grep` fallback
    fails under `set -o pipefail`), and the `command`/`timeout` keys of 1Password's file.
    """
    need_node()
    repo = copilot_repo
    repo.vendor(AWESOME_COPILOT, "hooks/tool-guardian/guard-tool.sh")
    repo.vendor(AWESOME_COPILOT, "hooks/tool-guardian/hooks.json", ".github/hooks/tool-guardian.json")
    for name in ("audit-prompt.sh", "audit-session-start.sh", "audit-session-end.sh"):
        script = repo.vendor(AWESOME_COPILOT, f"hooks/governance-audit/{name}", f".github/hooks/governance-audit/{name}")
        script.chmod(0o755)  # the README's `chmod +x .github/hooks/governance-audit/*.sh`
    repo.vendor(AWESOME_COPILOT, "hooks/governance-audit/hooks.json", ".github/hooks/governance-audit.json")
    for path in ONEPASSWORD.files:
        if not path.startswith(".claude"):
            repo.vendor(ONEPASSWORD, path)
    repo.vendor(SAFETY_NET, "dist/bin/cc-safety-net.js", ".github/hooks/safety-net/cc-safety-net.mjs")
    net_command = "node .github/hooks/safety-net/cc-safety-net.mjs --copilot-cli"
    repo.agent_file(".github/hooks/safety-net.json", {"version": 1, "hooks": {"preToolUse": [
        {"type": "command", "bash": net_command, "cwd": ".", "timeoutSec": 15}]}})
    repo.readable()
    guardian = RepoHook("tool-guardian", "preToolUse", "hooks/tool-guardian/guard-tool.sh",
                        AWESOME_COPILOT.cite("hooks/tool-guardian/hooks.json"), env={"GUARD_MODE": "block"}, timeout=10)
    onepassword = RepoHook("1password", "PreToolUse", "bin/run-hook.sh 1password-validate-mounted-env-files",
                           ONEPASSWORD.cite(".github/hooks/hooks.json"), timeout=15)
    net = RepoHook("safety-net", "preToolUse", net_command,
                   SAFETY_NET.cite(".github/hooks/safety-net.json") + " (npx -> node, see docstring)", timeout=15)
    audit = RepoHook("governance-audit", "userPromptSubmitted", ".github/hooks/governance-audit/audit-prompt.sh",
                     AWESOME_COPILOT.cite("hooks/governance-audit/hooks.json"),
                     env={"GOVERNANCE_LEVEL": "standard", "BLOCK_ON_THREAT": "false"}, timeout=10)
    repo.repo_hooks = [guardian, onepassword, net, audit]

    def audit_log_lost_and_said(host: Run, cage: Run) -> None:
        assert (repo.project / "logs" / "copilot" / "governance" / "audit.log").is_file(), "run directly, it logs"
        assert cage.verdict.kind == host.verdict.kind == "none", "a prompt audit that cannot log blocks nothing"
        told_in_one_line(cage, "audit-prompt")

    repo.compare_repo([
        RepoCase("bash `rm -rf /`", "preToolUse", copilot_call("bash", command="rm -rf /"), "deny"),
        RepoCase("create .env", "preToolUse",
                 copilot_call("create", path=str(repo.project / ".env"), file_text="X=1\n"), "deny"),
        RepoCase("view ../../etc/shadow (traversal)", "preToolUse",
                 copilot_call("view", path=f"{repo.project}/../../etc/shadow"), "deny"),
        RepoCase("bash `ls` (tool-guardian exits 1 on every call)", "preToolUse", copilot_call("bash", command="ls"),
                 "deny"),
        RepoCase("bash `git push --force origin main`", "preToolUse",
                 copilot_call("bash", command="git push --force origin main"), "deny"),
        RepoCase("prompt (audited)", "userPromptSubmitted", {"prompt": "list the files"}, "none",
                 by_design="the workspace is read-only: the audit log is not written, the user is told",
                 check=audit_log_lost_and_said),
    ])
