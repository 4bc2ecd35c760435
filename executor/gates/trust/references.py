"""Which project files a hook command references, and the state of each.

:func:`collect_references` runs the two passes described in :mod:`executor.gates.trust`
(resolve every word inside the project, then read each file with ``O_NOFOLLOW``);
:class:`UnsafeReference` is what it raises when a path is refused.
"""

from __future__ import annotations

import errno
import hashlib
import os
import posixpath
import re
import stat
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from executor import safeio
from executor.core.files import FileState
from executor.errors import HookcageError

MAX_REFERENCED_FILE = 8 * 1024 * 1024
"""Bytes a referenced file may hold; a larger one is refused."""

MAX_REFERENCED_FILES = 1000
"""Paths one command may reference (directories expanded)."""

MAX_REFERENCED_TOTAL = 64 * 1024 * 1024
"""Bytes all the referenced files of one command may hold together."""

MAX_REFERENCE_DEPTH = 64
"""Path components a reference may have, directories expanded (deeper is refused, quickly)."""

MAX_WALKED_PATHS = 5_000
"""Paths (directories included) one command's references may expand to before it is refused."""


_MAX_SYMLINK_HOPS = 40  # as the kernel's MAXSYMLINKS

# "--config=./x.toml", "CONF=./x.toml": the value after "=" is the path.
ASSIGNMENT = re.compile(r"(?:--?[A-Za-z0-9][A-Za-z0-9_.-]*|[A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.DOTALL)
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UnsafeReference(HookcageError):
    """A path a hook command references is refused: it leaves the project, or cannot be read.

    Attributes:
        path: the word (or project-relative path) that was refused.
        reason: why, e.g. ``leaves the project /repo``.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{_show(self.path)}: {self.reason}"


def collect_references(words: Iterable[str], root: str) -> tuple[FileState, ...]:
    """The state of every project file the words of a hook command reference.

    A word is a reference when it is an absolute path inside ``root``, a
    relative path with a ``/`` (resolved against ``root``), a bare word naming
    an existing file (or a symlink to one) at the root or ending in a code
    suffix (``check.sh``, missing or not: :data:`CODE_SUFFIXES`), or the value of
    ``--opt=VALUE`` / ``NAME=VALUE`` that is one of those. Absolute paths
    outside the root name files in the sandbox image and are not references;
    URLs and the root itself are not either. A directory is expanded to every
    path under it.

    Args:
        words: the command's literal words, project-dir variables expanded.
        root: the project root (absolute).

    Returns:
        One state per path, deduplicated and sorted by path.

    Raises:
        UnsafeReference: a path leaves the project, is too large, is not a
            regular file, or cannot be read; raised before any file is read
            when the path itself is the problem.
    """
    refs = _References(root)
    for word in words:
        refs.add_word(word)
    return refs.read()


CODE_SUFFIXES = (".sh", ".bash", ".zsh", ".ksh", ".dash", ".py", ".pyw", ".js", ".mjs", ".cjs",
                 ".ts", ".mts", ".cts", ".rb", ".pl", ".pm", ".php", ".lua", ".tcl", ".r", ".awk",
                 ".jq", ".sed")
"""File names a command or a script runs or loads as code: such a bare word is a
reference even when no file has that name yet (adding it later is a change)."""


def plain_path(word: str) -> bool:
    """A word that may be a file name (not an option, text with blanks, or a path with ``..``)."""
    if not word or word.startswith("-") or any(c.isspace() for c in word) or URL.match(word):
        return False
    return ".." not in word.split("/")


@dataclass
class _Pending:
    """A path found by the first pass, waiting to be read by the second."""

    path: str
    kind: str
    link: str | None
    target: tuple[str, ...] | None  # the real file to read, as parts under the root


_Parts = tuple[str, ...]
_Links = tuple[tuple[_Parts, str], ...]


def _show_path(parts: Sequence[str]) -> str:
    """A long path for a message: its first components, then how many more."""
    if len(parts) <= 8:
        return "/".join(parts)
    return "/".join(parts[:8]) + f"/... ({len(parts) - 8} more components)"


class _References:
    """The two passes of :func:`collect_references` over one project root."""

    def __init__(self, root: str) -> None:
        root = os.path.abspath(root)
        self.root = root
        self.real_root = os.path.realpath(root)
        # Words may name the root as given or by its real path; the longer prefix is tried first.
        self.prefixes = sorted({_parts(root), _parts(self.real_root)}, key=len, reverse=True)
        self.pending: dict[str, _Pending] = {}
        self.walks: dict[_Parts, tuple[_Parts | None, _Links]] = {}
        self.kinds: dict[_Parts, str] = {}
        self.total = 0
        self.walked = 0  # paths expanded so far (MAX_WALKED_PATHS)

    # -- first pass: resolve and check, read nothing --------------------------------

    def add_word(self, word: str) -> None:
        """Resolve one word of the command and record what it references."""
        raw = self._candidate(word)
        if raw is None:
            return
        if len(raw) > MAX_REFERENCE_DEPTH:
            raise UnsafeReference(_show_path(raw), f"has more than {MAX_REFERENCE_DEPTH} path components")
        parts = self._lexical(raw, word)
        if parts:  # the root itself is the workspace, not a reference
            self._add_tree(parts, word)

    def _candidate(self, word: str) -> _Parts | None:
        """The word's path as raw parts under the root, or None when it is no reference."""
        assignment = ASSIGNMENT.match(word)
        if assignment:
            word = assignment.group(1)
        if not word or "\0" in word or URL.match(word):
            return None
        if word.startswith("/"):
            parts = _parts(word)
            for prefix in self.prefixes:
                if parts[: len(prefix)] == prefix:
                    return parts[len(prefix):]
            if self._strip_root(_parts(posixpath.normpath(word))) is not None:
                raise UnsafeReference(word, f"passes outside the project {self.root} to come back in")
            return None
        if "/" in word or word == "..":
            return _parts(word)
        if word == ".":
            return None
        try:
            st = os.lstat(self._abs((word,)))
        except (OSError, ValueError):
            # `sh check.sh` before check.sh exists: adding it later is a change, as for `./check.sh`
            return (word,) if word.lower().endswith(CODE_SUFFIXES) and plain_path(word) else None
        if stat.S_ISREG(st.st_mode):
            return (word,)
        if stat.S_ISLNK(st.st_mode):
            real, _ = self._walk((word,), word)
            if real is None or self._kind(real, word) == "file":
                return (word,)
        return None  # a bare word naming a directory ("test", "src") is an argument, not a script

    def _lexical(self, raw: _Parts, word: str) -> _Parts:
        """Apply ``..`` to the word's own parts; refuse when it leaves the root.

        ``..`` right after a symlink is refused too: the kernel would go to the
        link target's parent, the reviewer would read the lexical path.
        """
        out: list[str] = []
        for part in raw:
            if part != "..":
                out.append(part)
                continue
            if not out:
                raise UnsafeReference(word, f"leaves the project {self.root}")
            if os.path.islink(self._abs(tuple(out))):
                raise UnsafeReference(word, f"has '..' after the symlink {'/'.join(out)}")
            out.pop()
        return tuple(out)

    def _add_tree(self, parts: _Parts, word: str) -> None:
        """Record a path, expanding directories below it (depth first, loops cut)."""
        stack: list[tuple[_Parts, frozenset[_Parts]]] = [(parts, frozenset())]
        while stack:
            lexical, ancestors = stack.pop()
            self.walked += 1
            if self.walked > MAX_WALKED_PATHS:
                raise UnsafeReference(word, f"expands to more than {MAX_WALKED_PATHS} paths")
            if len(lexical) > MAX_REFERENCE_DEPTH:
                raise UnsafeReference(_show_path(lexical), f"nests deeper than {MAX_REFERENCE_DEPTH} directories")
            real, links = self._walk(lexical, word)
            for location, text in links:
                self._add_link(location, text, word)
            kind = self._kind(real, word) if real is not None else "missing"
            try:
                st = os.lstat(self._abs(lexical))
            except OSError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                self._add_link(lexical, self._readlink(lexical), word)
            elif kind == "missing":
                self._put(_Pending("/".join(lexical), "missing", None, None), word)
            elif kind == "file":
                self._put(_Pending("/".join(lexical), "file", None, real), word)
            # A link back to the root is not expanded: the root is the workspace, as above.
            if kind == "dir" and real and real not in ancestors:
                try:
                    names = sorted(os.listdir(self._abs(real)))
                except OSError as exc:
                    raise UnsafeReference("/".join(lexical), f"cannot be listed ({os_reason(exc)})") from exc
                if self.walked + len(stack) + len(names) > MAX_WALKED_PATHS:
                    raise UnsafeReference(word, f"expands to more than {MAX_WALKED_PATHS} paths")
                below = ancestors | {real}
                stack.extend(((*lexical, name), below) for name in reversed(names))

    def _add_link(self, location: _Parts, text: str, word: str) -> None:
        path = "/".join(location)
        if path in self.pending:
            return
        real, _ = self._walk(location, word)
        target = real if real is not None and self._kind(real, word) == "file" else None
        self._put(_Pending(path, "symlink", text, target), word)

    def _put(self, item: _Pending, word: str) -> None:
        if item.path in self.pending:
            return
        if len(self.pending) >= MAX_REFERENCED_FILES:
            raise UnsafeReference(word, f"references more than {MAX_REFERENCED_FILES} files")
        self.pending[item.path] = item

    def _walk(self, parts: _Parts, word: str) -> tuple[_Parts | None, _Links]:
        """Resolve ``parts`` component by component, following symlinks as the kernel does.

        Returns:
            The real path (parts under the root, no symlinks) or None when
            something on the way does not exist; and every symlink passed,
            as (where it is, its text).

        Raises:
            UnsafeReference: a symlink on the way leads out of the project.
        """
        cached = self.walks.get(parts)
        if cached is not None:
            return cached
        queue = deque(parts)
        cur: _Parts = ()
        links: list[tuple[_Parts, str]] = []
        result: _Parts | None = None
        while True:
            if not queue:
                result = cur
                break
            part = queue.popleft()
            if part == "..":  # only link texts bring ".." here
                if not cur:
                    if not links:
                        raise UnsafeReference(word, f"leaves the project {self.root}")
                    raise UnsafeReference(word, self._points_out(*links[-1]))
                cur = cur[:-1]
                continue
            candidate = (*cur, part)
            try:
                st = os.lstat(self._abs(candidate))
            except (FileNotFoundError, NotADirectoryError):
                break
            except OSError as exc:
                raise UnsafeReference("/".join(candidate), f"cannot be examined ({os_reason(exc)})") from exc
            if not stat.S_ISLNK(st.st_mode):
                cur = candidate
                continue
            if len(links) >= _MAX_SYMLINK_HOPS:
                raise UnsafeReference(word, "has too many levels of symbolic links")
            text = self._readlink(candidate)
            links.append((candidate, text))
            if not text:
                break  # an empty link leads nowhere, as for the kernel
            if text.startswith("/"):
                inside = self._strip_root(_parts(text))
                if inside is None:
                    raise UnsafeReference(word, self._points_out(candidate, text))
                cur = ()
                queue.extendleft(reversed(inside))
            else:
                queue.extendleft(reversed(_parts(text)))
        answer = (result, tuple(links))
        self.walks[parts] = answer
        return answer

    def _kind(self, real: _Parts, word: str) -> str:
        """``"file"`` or ``"dir"`` for a resolved path; counts file sizes against the caps."""
        known = self.kinds.get(real)
        if known is not None:
            return known
        path = "/".join(real)
        try:
            st = os.lstat(self._abs(real))
        except OSError as exc:
            raise UnsafeReference(path or word, f"cannot be examined ({os_reason(exc)})") from exc
        if stat.S_ISDIR(st.st_mode):
            kind = "dir"
        elif stat.S_ISREG(st.st_mode):
            kind = "file"
            if st.st_size > MAX_REFERENCED_FILE:
                raise UnsafeReference(path, f"is larger than {mib(MAX_REFERENCED_FILE)} ({st.st_size} bytes)")
            self.total += st.st_size
            if self.total > MAX_REFERENCED_TOTAL:
                raise UnsafeReference(word, f"references more than {mib(MAX_REFERENCED_TOTAL)} of files in all")
        else:
            raise UnsafeReference(path, f"is {safeio.kind(st.st_mode)}, not a regular file or directory: refused")
        self.kinds[real] = kind
        return kind

    def _readlink(self, parts: _Parts) -> str:
        try:
            return os.readlink(self._abs(parts))
        except OSError as exc:
            raise UnsafeReference("/".join(parts), f"cannot be examined ({os_reason(exc)})") from exc

    def _strip_root(self, parts: _Parts) -> _Parts | None:
        for prefix in self.prefixes:
            if parts[: len(prefix)] == prefix:
                return parts[len(prefix):]
        return None

    def _points_out(self, location: _Parts, text: str) -> str:
        return f"{'/'.join(location)} is a symlink to {_show(text)}, outside the project {self.root}"

    def _abs(self, parts: _Parts) -> str:
        return os.path.join(self.real_root, *parts)

    # -- second pass: read each file once ----------------------------------------

    def read(self) -> tuple[FileState, ...]:
        """Read every pending file once and return the states, sorted by path."""
        cache: dict[_Parts, tuple[bytes, bool]] = {}
        total = 0
        states = []
        for path in sorted(self.pending):
            item = self.pending[path]
            data: bytes | None = None
            executable = False
            if item.target is not None:
                read = cache.get(item.target)
                if read is None:
                    read = self._read_beneath(item.target)
                    total += len(read[0])
                    if total > MAX_REFERENCED_TOTAL:
                        raise UnsafeReference(path, f"the references hold more than {mib(MAX_REFERENCED_TOTAL)} in all")
                    cache[item.target] = read
                data, executable = read
            digest = hashlib.sha256(data).hexdigest() if data is not None else None
            states.append(FileState(item.path, item.kind, digest, item.link, data, executable))
        return tuple(states)

    def _read_beneath(self, real: _Parts) -> tuple[bytes, bool]:
        """Read a file by walking down from the root, never following a symlink.

        Returns:
            Its bytes, and whether it has an execute bit (read from the same open file).
        """
        path = "/".join(real)
        try:
            fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | O_CLOEXEC)
        except OSError as exc:
            raise UnsafeReference(self.root, f"cannot be opened ({os_reason(exc)})") from exc
        try:
            for part in real[:-1]:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = child
            # The one opener of repository files: never blocks, refuses anything but a regular file.
            file_fd = safeio.open_regular(real[-1], follow=False, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeReference(path, "changed into a symlink while being read") from exc
            raise UnsafeReference(path, f"cannot be read ({os_reason(exc)})") from exc
        except safeio.Unreadable as exc:
            raise UnsafeReference(path, exc.reason) from exc
        finally:
            os.close(fd)
        try:
            data = safeio.read_fd(file_fd, MAX_REFERENCED_FILE)
            return data, bool(os.fstat(file_fd).st_mode & 0o111)
        except safeio.Unreadable as exc:
            raise UnsafeReference(path, exc.reason) from exc
        except OSError as exc:
            raise UnsafeReference(path, f"cannot be read ({os_reason(exc)})") from exc
        finally:
            os.close(file_fd)


def _parts(path: str) -> _Parts:
    return tuple(p for p in path.split("/") if p not in ("", "."))


def _show(text: str) -> str:
    return text if text and text.isprintable() else repr(text)


def mib(size: int) -> str:
    """A size in whole MiB, for a reason."""
    return f"{size // (1024 * 1024)} MiB"


def os_reason(exc: OSError) -> str:
    """What went wrong in an ``OSError``, for a reason (its strerror when it has one)."""
    return exc.strerror or str(exc)
