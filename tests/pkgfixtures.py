"""Python packages built by hand for the dependency tests: wheels with chosen metadata, and a
source archive whose build backend leaves a marker on the machine that builds it.

No network and no build tool: a wheel is a zip, an sdist a tar.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path


def wheel(folder: Path, name: str, requires: list[str], modules: Mapping[str, str] | None = None) -> Path:
    """A minimal pure-Python wheel whose METADATA names ``requires`` (``modules``: its package's files)."""
    files = {
        **{f"{name}/{file}": text.encode() for file, text in (modules or {"__init__.py": ""}).items()},
        f"{name}-1.0.dist-info/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                           + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
        f"{name}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for path, data in files.items()]
    files[f"{name}-1.0.dist-info/RECORD"] = ("\n".join([*record, f"{name}-1.0.dist-info/RECORD,,"]) + "\n").encode()
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path


def evil_sources(marker: Path) -> dict[str, str]:
    """A source tree whose in-tree build backend writes ``marker`` as soon as it is imported."""
    return {
        "pyproject.toml": "[build-system]\nrequires = []\nbuild-backend = 'backend'\nbackend-path = ['.']\n",
        "backend.py": f"import pathlib\npathlib.Path({str(marker)!r}).write_text('repository code ran')\n"
                      "def prepare_metadata_for_build_wheel(*a, **k): raise SystemExit('no')\n"
                      "def build_wheel(*a, **k): raise SystemExit('no')\n",
        "PKG-INFO": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
    }


def sdist(folder: Path, marker: Path) -> Path:
    path = folder / "evil-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in evil_sources(marker).items():
            data = text.encode()
            info = tarfile.TarInfo(f"evil-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
