"""The host-side inputs of one run: its request, the reviewed bytes it mounts, and their removal after.

Before a hook runs, :func:`run_request` says what to run (its command, the
environment hookcage gives it, its transcript, labels) and :func:`stage`
writes the reviewed bytes of the files it references into a staging folder
(``run-*``, :mod:`executor.prepare.staging`) that the run mounts read-only
over the workspace: the hook runs exactly what was hashed. After it,
:func:`unstage` removes them (or gives a tree shared by the daemon back).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from executor.core.envnames import IN_HOOK_VAR, PROJECT_DIR_VARS
from executor.core.files import FileState
from executor.core.hooks import HookSpec
from executor.dialects.base import HookInput
from executor.prepare import homes, staging
from executor.prepare.depcache import RunSetup
from executor.prepare.staged_trees import StagedTrees, tree_key
from executor.sandbox.base import RunRequest
from executor.settings import Settings


def run_request(
    hook: HookSpec,
    payload: Mapping[str, Any],
    root: Path,
    hook_input: HookInput,
    session: str,
    files: Sequence[FileState] = (),
    deps: RunSetup | None = None,
    *,
    settings: Settings,
    in_hook: str,
    transcripts: Mapping[str, str] | None,
    trees: StagedTrees | None,
) -> RunRequest:
    """What to run for one hook: its command, environment, mounts and the reviewed files staged for it.

    Args:
        hook_input: what the hook reads (its agent's payload and variables).
        files: the reviewed files, written where the run mounts them (:func:`stage`).
        deps: the dependency cache's binds and variables (:mod:`executor.prepare.depcache`).
        in_hook: the value that proves to a ``hookcage dispatch`` inside the hook that it is in one.
        transcripts: remote mode: the only transcripts mounted (None: the payload's, as given).
        trees: the daemon's staged trees, shared by runs of the same reviewed bytes.
    """
    cwd = payload.get("cwd") or str(root)
    if hook.scope.from_repository:
        # The review resolved every relative path (and what the scripts load) against the
        # root: run there, so `sh .hookcage/x.sh` is the file that was hashed wherever the agent is.
        cwd = str(root)
    # hookcage's own values win over the hook's env (a repository's hook may not set them at all).
    env = dict(hook.env)
    env.update(hook_input.env)  # what the hook's agent sets for it (never the host's)
    env.update({name: str(root) for name in PROJECT_DIR_VARS})
    env[IN_HOOK_VAR] = in_hook  # a `hookcage dispatch` inside a hook answers at once
    deps = deps or RunSetup()
    env.update(deps.env or {})
    transcript = payload.get("transcript_path")
    transcript = transcript if isinstance(transcript, str) and transcript else None
    source = None
    if transcript is not None and transcripts is not None:
        source = transcripts.get(transcript)
        transcript = transcript if source is not None else None  # not judged mountable: never mounted
    return RunRequest(
        command=deps.command(hook.command or ""),
        binds=deps.binds,
        stdin=hook_input.stdin,
        cwd=str(cwd),
        env=env,
        timeout=hook.timeout,
        project_dir=str(root),
        transcript_path=transcript,
        transcript_source=source,
        options=hook.sandbox,
        labels={"hookcage.session": str(session)[:128], "hookcage.hook": hook.id},
        output_cap=settings.output_cap,
        overlays=stage(files, root, home=settings.home, trees=trees),
    )


def stage(files: Sequence[FileState], root: Path, *, home: Path, trees: StagedTrees | None) -> dict[str, str]:
    """Write the reviewed bytes of referenced files where the run mounts them read-only.

    The hook then runs exactly what was hashed, whatever the workspace holds
    by the time the container starts (no edit-after-check race).
    """
    present = [f for f in files if f.data is not None]
    if not present:
        return {}
    if trees is not None:
        key = tree_key(present, root) + ":" + str(staging_root(home))
        return trees.lend(key, lambda: _write_tree(present, root, home))
    return _write_tree(present, root, home)[1]


def _write_tree(present: Sequence[FileState], root: Path, home: Path) -> tuple[Path, dict[str, str]]:
    """A new staged folder holding ``present``'s bytes, and the overlays naming them."""
    # The copies mirror the project under one folder (TREE/a/b.sh for ROOT/a/b.sh): the
    # docker backend then lays that folder over the workspace as an overlay file system,
    # which a `git checkout` during the run cannot take away (a bind over a file can be
    # detached by unlinking the file on the host). See sandbox.docker.staged_tree.
    folder = staging.new_folder(staging_root(home), "run")  # owned: swept if this process dies
    tree = folder / "tree"
    tree.mkdir(mode=0o755)
    tree.chmod(0o755)  # the workspace's root in the container: readable by the hook's user
    overlays = {}
    for state in present:
        staged = tree.joinpath(*state.path.split("/"))
        parent = staged.parent
        if not parent.is_dir():
            parent.mkdir(parents=True, mode=0o755)
            for made in (parent, *parent.parents):
                if made == tree:
                    break
                made.chmod(0o755)
        staged.write_bytes(state.data or b"")
        staged.chmod(state.mode)  # the execute bit it was reviewed with, never write
        overlays[str(root / state.path)] = str(staged)
    return folder, overlays


def staging_root(home: Path) -> Path:
    """``home``'s staging folder (made, 0700, if it is not there)."""
    path = home / "staging"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def unstage(runs: Iterable[tuple[RunRequest, homes.RunExtras | None]], trees: StagedTrees | None = None) -> None:
    """Remove the staged copies of reviewed files once their runs are over (or give a shared
    tree back to ``trees``, the daemon's)."""
    for request, extras in runs:
        for target, staged in request.overlays.items():
            # staged is RUN/tree/<path of target under the project> (see stage): remove RUN
            depth = len(Path(os.path.relpath(target, request.project_dir)).parts)
            parents = Path(staged).parents
            ours = depth < len(parents) and parents[depth - 1].name == "tree" and parents[depth].name.startswith("run-")
            if ours and (trees is None or not trees.give_back(parents[depth])):
                shutil.rmtree(parents[depth], ignore_errors=True)
            break
        homes.unstage(extras)
    staging.release()  # the owner lock file too, once nothing of this process is staged
