"""The build's compiled part: the request path's modules (``domain/compiled.py``) compiled by mypyc
into C extensions beside their source, in the wheel ``pip install .`` builds and, with ``make
install``, in place in the checkout. Everything else is in ``pyproject.toml``.

``TOLLGATE_PURE=1`` at build time builds without them (a pure-Python install, as an editable
install's first step is: ``make install`` compiles afterwards, with the project's own pinned mypy).
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from setuptools import setup


def _compiled_extensions() -> list:  # type: ignore[type-arg]
    if os.environ.get("TOLLGATE_PURE") == "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        # The build backend runs this file once to ask what the build needs, before mypy is there
        # (scripts/build_backend.py asks for it then); a build without it at all is pure Python.
        sys.stderr.write("setup.py: mypy is not installed: building without compiled modules\n")
        return []

    root = Path(__file__).resolve().parent
    listed = runpy.run_path(str(root / "domain" / "compiled.py"))
    paths = [str(listed["source_path"](name).relative_to(root)) for name in listed["COMPILED"]]
    # Their shared library is `domain.compiled__mypyc`: inside a package, so that an installed command
    # run from any directory finds it (by default it is a top-level `<hash>__mypyc`, found only from
    # the checkout). One C file for all (with a package's group name, mypyc's one file a module cannot
    # find the group's header).
    return mypycify(paths, opt_level="3", group_name="domain.compiled")


setup(ext_modules=_compiled_extensions())
