"""raftka's PEP 517 build backend: setuptools, plus one `.pth` line in editable installs.

Spark finds Python data sources by listing the top-level modules named `pyspark_*`
that `pkgutil.iter_modules()` sees, and it only sees real files on `sys.path`
entries. A wheel puts `pyspark_raftka.py` in site-packages, a real file. An editable
install (`make install`, `pip install -e .`) serves every module through setuptools'
import hook instead, which that listing does not see: `format("raftka")` was then
found only by jobs started from the repository root. So the editable wheel gets one
more file, `raftka-spark-discovery.pth`, naming the folder that holds the shim and
nothing else (`spark_source/autodiscovery/`): a real path entry, in every process
that starts this interpreter (the driver, executors' Python workers, a Connect
server), and no other top-level name becomes importable.

Why plain setuptools configuration cannot do it (tried with the pinned setuptools 65.5,
editable wheels built from a copy of the repository and installed into a scratch venv):

- `editable_mode=compat` writes a static `.pth` naming `package-dir[""]` only, here
  `spark_source/autodiscovery`: Spark lists the shim, but `import raftka` fails
  (ModuleNotFoundError), since the layers' folders (`broker/` for `raftka.broker`, ...)
  are mapped by `package-dir`, which no single path entry can express. Pointing
  `package-dir[""]` at the repository root instead would make `broker`, `log`, `client`
  ... importable as top-level names.
- `editable_mode=strict` (also settable in a setup.cfg `[editable_wheel] mode = strict`)
  builds a tree of per-file links under `build/` and puts that tree on sys.path: Spark
  lists the shim, raftka imports, no stray names. But a module added after the install
  (a new file in `broker/`, a merge that brings one) is an ImportError until the install
  is redone, and deleting `build/` breaks the install: a development loop this project
  cannot ask of its contributors.
- `data-files` can only install files with static contents, relative to `sys.prefix`:
  the `.pth` must name this checkout's absolute path (known only when building), it
  would have to spell `lib/python3.X/site-packages` (version and platform specific),
  and it would go into the regular wheel too, naming the builder's checkout there.
- setuptools' own finder (`__editable___raftka_*_finder.py`) is a meta-path finder;
  `pkgutil.iter_modules()` lists path entries only, so no finder option helps.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (the rest of the PEP 517/660 hooks, unchanged)

PTH_NAME = "raftka-spark-discovery.pth"
SHIM_DIR = Path(__file__).resolve().parents[1] / "spark_source" / "autodiscovery"


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    add_file(Path(wheel_directory) / name, PTH_NAME, f"{SHIM_DIR}\n".encode())
    return name


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def add_file(wheel: Path, arcname: str, data: bytes) -> None:
    """Rewrite `wheel` with one more top-level file, listed in its RECORD."""
    with zipfile.ZipFile(wheel) as old:
        entries = [(info, old.read(info)) for info in old.infolist()]
    (record_info, record) = next((i, d) for i, d in entries
                                 if i.filename.endswith(".dist-info/RECORD"))
    lines = [line for line in record.decode().splitlines() if line]
    lines.append(_record_line(arcname, data))
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as new:
        for info, content in entries:
            if info is not record_info:
                new.writestr(info, content)
        new.writestr(arcname, data)
        new.writestr(record_info, ("\n".join(lines) + "\n").encode())
    tmp.replace(wheel)
