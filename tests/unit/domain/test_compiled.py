"""When a compiled module's source is imported instead of its extension (domain/compiled.py)."""

from __future__ import annotations

import ast
import os
import runpy
from pathlib import Path

from domain.compiled import COMPILED, source_instead, source_path


def _files(tmp_path: Path, source_age: float, extension_age: float) -> tuple[Path, Path]:
    source, extension = tmp_path / "writer.py", tmp_path / "writer.cpython-311-x86_64-linux-gnu.so"
    source.write_text("x = 1\n")
    extension.write_bytes(b"\x7fELF")
    for path, age in ((source, source_age), (extension, extension_age)):
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    return source, extension


def test_a_current_extension_is_imported(tmp_path):
    source, extension = _files(tmp_path, source_age=60, extension_age=10)
    assert not source_instead(source, extension, pure=False, checkout=True)


def test_an_extension_older_than_its_source_is_not(tmp_path):
    """A module edited since the last build runs as edited, never as it was compiled."""
    source, extension = _files(tmp_path, source_age=10, extension_age=60)
    assert source_instead(source, extension, pure=False, checkout=True)


def test_installed_from_a_wheel_the_extension_is_imported_whatever_the_files_dates(tmp_path):
    """pip writes a wheel's files one after another: their dates say nothing about the build."""
    source, extension = _files(tmp_path, source_age=10, extension_age=60)
    assert not source_instead(source, extension, pure=False, checkout=False)
    assert source_instead(source, extension, pure=True, checkout=False)


def test_tollgate_pure_imports_the_source_of_a_current_extension(tmp_path):
    source, extension = _files(tmp_path, source_age=60, extension_age=10)
    assert source_instead(source, extension, pure=True, checkout=True)


def test_without_an_extension_the_usual_finders_find_the_source(tmp_path):
    source = tmp_path / "writer.py"
    source.write_text("x = 1\n")
    assert not source_instead(source, None, pure=True, checkout=True)


def test_every_listed_module_has_its_source_and_the_build_reads_the_same_list():
    assert all(source_path(name).is_file() for name in COMPILED)
    assert len(set(COMPILED)) == len(COMPILED)
    read_by_setup = runpy.run_path(str(source_path("domain.compiled")))["COMPILED"]
    assert read_by_setup == COMPILED


def test_the_build_compiles_with_the_mypy_the_project_pins():
    """The build backend asks for mypy at the version requirements.lock pins for the gate."""
    root = Path(__file__).resolve().parents[3]
    pinned = next(line for line in (root / "requirements.lock").read_text().splitlines() if line.startswith("mypy=="))
    backend = runpy.run_path(str(root / "scripts" / "build_backend.py"))
    assert backend["MYPY"] == pinned


def _struct_classes(module: str) -> list[str]:
    """The classes the module's source defines on ``msgspec.Struct`` (or ``Struct`` imported from it)."""
    tree = ast.parse(source_path(module).read_text())
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(base) in ("msgspec.Struct", "Struct") for base in node.bases)
    ]


def test_no_compiled_module_defines_a_msgspec_struct():
    """Compiled, a Struct's every field reads as ``type`` (mypyc rewrites the class's annotations), so
    its decoder refuses every value: the chat relay's chunk decoder did, and every streamed chunk
    took the slow path. A Struct lives in a module that is not compiled."""
    assert {module: _struct_classes(module) for module in COMPILED if _struct_classes(module)} == {}


def test_the_struct_check_finds_a_struct():
    """The check above reads class bases as they are written (else it could pass on anything)."""
    assert _struct_classes("app.translate.chat.chunk_shape") == ["Delta", "Choice", "Chunk"]
    assert _struct_classes("domain.credit_lot") == ["Lot"]
