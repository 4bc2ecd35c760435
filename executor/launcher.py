"""The launcher ``$HOOKCAGE_HOME/bin/hookcage``: the program ``hookcage install`` routes events to.

An agent spawns one process per event, so that process's start-up is paid on
every tool call. pip's console script starts the interpreter with its site
enabled (every ``.pth`` file of site-packages is read, some import modules:
this machine's imports ``certifi``) and imports ``re`` itself. The launcher
is a text script that ``hookcage install AGENT`` writes:

- its shebang is ``#!<the installing interpreter> -IS``: ``-I`` ignores
  ``PYTHONPATH``, ``PYTHONHOME`` and every other ``PYTHON*`` variable of the
  agent's environment, the user site and the script's own folder; ``-S``
  skips ``site`` (site-packages and its ``.pth`` files). A path the kernel
  cannot take in a shebang (too long, blanks, not ASCII) gets ``/bin/sh``
  and pip's ``'''exec'`` trampoline instead;
- it puts the folder holding the installed ``executor`` package first on
  ``sys.path`` and calls :func:`executor.entry.main`, which answers a
  ``dispatch`` through the daemon importing the standard library only;
- whatever must run in-process (no daemon, any other command) first calls
  :func:`enable_site`, which takes that folder off the front of ``sys.path``
  again and runs ``site.main()``, so hookcage's dependencies are found as
  they are for the console script.

Its name stays ``hookcage``, so ``hookcage dispatch`` routes keep being
recognised as hookcage's routing (:func:`executor.core.hooks.is_self_route`).
Every ``hookcage install`` rewrites it (an upgrade that moved the package or
the interpreter is picked up); it is shared by every agent installed for
this ``HOOKCAGE_HOME`` and removed when the last of them is uninstalled.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

NAME = "hookcage"
"""The launcher's file name: routes must end in ``/hookcage`` to be hookcage's own."""
SHEBANG_MAX = 127
"""Bytes of a ``#!`` line every kernel takes whole (Linux before 5.1 cut at 127)."""
MARKER = "# hookcage launcher"
"""The launcher's second line (how ``uninstall`` and ``doctor`` know it)."""


def package_parent() -> str:
    """The folder that holds the running ``executor`` package (what the launcher puts on ``sys.path``)."""
    import executor

    return os.path.dirname(os.path.dirname(os.path.abspath(executor.__file__)))


def launcher_path(home: str | Path) -> str:
    """``$HOOKCAGE_HOME/bin/hookcage``."""
    return os.path.join(str(home), "bin", NAME)


def _shebang_ok(python: str) -> bool:
    line = f"#!{python} -IS"
    return (python.startswith("/") and line.isascii() and len(line) <= SHEBANG_MAX
            and not any(c.isspace() for c in python))


def script(python: str, parent: str, version: str) -> bytes:
    """The launcher's text.

    Args:
        python: the interpreter (absolute, not resolved: a venv's ``bin/python`` finds its
            ``pyvenv.cfg`` only by its own path).
        parent: the folder holding the ``executor`` package.
        version: hookcage's version, for the reader.

    Raises:
        ValueError: ``python`` is not absolute, or holds a quote or a line break (no safe trampoline).
    """
    if not python.startswith("/") or any(c in python for c in "'\n\r\0"):
        raise ValueError(f"cannot write a launcher for the interpreter {python!r}")
    if _shebang_ok(python):
        head = f"#!{python} -IS\n"
    else:
        # /bin/sh runs the second line; Python reads lines two and three as one string.
        head = f"#!/bin/sh\n'''exec' '{python}' -IS \"$0\" \"$@\"\n' '''\n"
    body = (
        f"{MARKER} (hookcage {version}), written by `hookcage install`; every install rewrites it.\n"
        "# -I: no PYTHONPATH/PYTHONHOME/user site from the agent's environment; -S: no site-packages\n"
        "# at start-up. A dispatch the daemon answers imports the standard library only; whatever runs\n"
        "# in-process enables the site first (executor.launcher.enable_site).\n"
        "import sys\n"
        f"sys.path.insert(0, {parent!r})\n"
        "from executor.entry import main\n"
        "main()\n"
    )
    return (head + body).encode("utf-8")


def is_launcher(content: bytes | None) -> bool:
    """Whether ``content`` is a launcher this module wrote."""
    return content is not None and MARKER.encode() in content[:512]


def broken(content: bytes) -> str | None:
    """Why a launcher cannot run (its interpreter or its package is gone); None when it can.

    A route to a launcher that cannot start fails every event, which an agent lets through
    as a non-blocking error: ``hookcage doctor`` says so.
    """
    import ast

    lines = content.decode("utf-8", "replace").splitlines()
    if not is_launcher(content) or not lines:
        return "it is not hookcage's launcher"
    if lines[0].startswith("#!/bin/sh") and len(lines) > 1:
        python = lines[1].split("'")[5] if lines[1].count("'") >= 6 else ""  # '''exec' 'PYTHON' -IS ...
    else:
        python = lines[0][2:].rsplit(" -IS", 1)[0]
    insert = next((line for line in lines if line.startswith("sys.path.insert(0, ")), "")
    try:
        parent = ast.literal_eval(insert[len("sys.path.insert(0, "):-1])
    except (ValueError, SyntaxError):
        return "it names no package folder"
    if not (python and os.access(python, os.X_OK)):
        return f"its interpreter {python or '?'} is gone"
    if not isinstance(parent, str) or not os.path.isfile(os.path.join(parent, "executor", "__init__.py")):
        return f"hookcage's package is no longer in {parent}"
    return None


def enable_site() -> None:
    """Make hookcage's dependencies importable when the launcher started the interpreter without ``site``.

    A no-op when ``site`` ran at start-up (the console script, ``python -m executor``).
    Otherwise: the package folder the launcher put first on ``sys.path`` is taken off
    the front (site-packages must not come before the standard library), ``site.main()``
    adds site-packages and runs their ``.pth`` files, and the folder is put back at the
    end when the site did not add it. The ``executor`` package already imported stays
    the one the launcher named.
    """
    if "site" in sys.modules or not sys.flags.no_site:
        return
    parent = package_parent()
    if sys.path and sys.path[0] == parent:
        del sys.path[0]
    import site

    site.main()
    if parent not in sys.path:
        if parent == site.getusersitepackages():
            site.addsitedir(parent)  # a `pip install --user` hookcage: its .pth files too
        else:
            sys.path.append(parent)
