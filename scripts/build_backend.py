"""The build backend: setuptools', asking for what mypyc needs to compile ``domain/compiled.py``'s
modules (``setup.py``) — mypy at the version the project pins, and the project's own dependencies,
whose types the compiled code is checked and specialised against. Without them an isolated build
(``pip install .``) would check those modules against nothing. ``TOLLGATE_PURE=1``: setuptools' own."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - the rest of the backend's hooks, as setuptools has them

#: The mypy whose mypyc compiles the build: the version requirements.lock pins for the gate's mypy.
MYPY = "mypy==2.4.1"


def _compiler_requirements() -> list[str]:
    if os.environ.get("TOLLGATE_PURE") == "1":
        return []
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    return [MYPY, *project["project"]["dependencies"]]


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_setuptools.get_requires_for_build_wheel(config_settings), *_compiler_requirements()]


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_setuptools.get_requires_for_build_editable(config_settings), *_compiler_requirements()]
