"""The configuration reference (docs/configuration-reference.md), generated from ``domain/settings.py``
and the modules its tables live in (``domain/settings_models.py``).

A hand-written reference drifts from the schema the first time someone adds a key; this one cannot:
every key, type and default comes from the msgspec Structs themselves, and each description from the
``#:`` comment above the field (the convention Sphinx reads too), in the source of whichever module
declares the table. A field without one stops the
script, so an undocumented key fails the tests. ``--check FILE`` exits 1 when the copy in FILE
differs from what the schema generates; ``--write FILE`` replaces it.

    python -m scripts.config_reference                    # print the reference
    python -m scripts.config_reference --write docs/configuration-reference.md  # after changing the settings
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
from msgspec import inspect as mi

from app.clock_shift import CLOCK_DRILL_ENV, CLOCK_OFFSET_ENV
from app.settings_file import CONFIG_ENV
from domain import settings as schema

START = "<!-- config-reference:start -->"
END = "<!-- config-reference:end -->"


class UndocumentedField(Exception):
    """A configuration key with no ``#:`` comment: the reference would have a row with no description."""


@dataclass
class Section:
    """One Struct of the schema: the key paths it is found at, and its fields' rows."""

    struct: type
    paths: list[str] = field(default_factory=list)
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # key, type, default, description


def field_docs(module_source: str) -> dict[tuple[str, str], str]:
    """``(class name, field name) -> description``, from the ``#:`` lines right above each field."""
    lines = module_source.splitlines()
    docs: dict[tuple[str, str], str] = {}
    for node in ast.walk(ast.parse(module_source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            comment: list[str] = []
            i = stmt.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#:"):
                comment.insert(0, lines[i].strip()[2:].strip())
                i -= 1
            if comment:
                docs[(node.name, stmt.target.id)] = " ".join(comment)
    return docs


def sections(
    root: type = schema.Settings, source: str | None = None, sources: Mapping[str, str] | None = None
) -> list[Section]:
    """Every Struct reachable from ``root``, in the order first met, each with a row per field.
    ``source``: the text to read ``domain/settings.py``'s comments from instead of the file's;
    ``sources``: the same by module name, for any module a table lives in (the others are read from
    their files)."""
    given = dict(sources or {})
    if source is not None:
        given[schema.__name__] = source
    docs = _FieldDocs(given)
    found: dict[type, Section] = {}

    def visit(info: mi.StructType, path: str) -> None:
        section = found.get(info.cls)
        if section is not None:  # met again at another path: its tables are found there too
            section.paths.append(path)
            for f in info.fields:
                inner, suffix = _struct_inside(f.type)
                if inner is not None:
                    visit(inner, _join(path, f.encode_name) + suffix)
            return
        section = found[info.cls] = Section(info.cls, [path])
        nested: list[tuple[mi.StructType, str]] = []
        for f in info.fields:
            description = next((text for cls in info.cls.__mro__ if (text := docs.of(cls, f.name))), "")
            if not description:
                raise UndocumentedField(
                    f"{info.cls.__name__}.{f.name} has no `#:` comment in {_module_path(info.cls)}: "
                    "say in one line what the key does"
                )
            section.rows.append((f.encode_name, type_name(f.type), default_text(f), description))
            inner, suffix = _struct_inside(f.type)
            if inner is not None:
                nested.append((inner, _join(path, f.encode_name) + suffix))
        for inner, inner_path in nested:
            visit(inner, inner_path)

    info = mi.type_info(root)
    if not isinstance(info, mi.StructType):
        raise TypeError(f"{root.__name__} is not a msgspec struct")
    visit(info, "")
    return list(found.values())


class _FieldDocs:
    """The ``#:`` comments of the fields of every module a table of the schema is declared in, each
    module's source read once (or given: ``sources``, by module name)."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self._sources = sources
        self._docs: dict[str, dict[tuple[str, str], str]] = {}

    def of(self, cls: type, field_name: str) -> str:
        module = cls.__module__
        if module not in self._docs:
            source = self._sources.get(module)
            if source is None:
                source = _source_of(module)
            self._docs[module] = field_docs(source) if source else {}
        return self._docs[module].get((cls.__name__, field_name), "")


def _source_of(module: str) -> str:
    """A module's Python source (``""``: none, as for msgspec's own base classes, compiled)."""
    path = getattr(sys.modules.get(module), "__file__", None) or ""
    return Path(path).read_text() if path.endswith(".py") else ""


def _module_path(cls: type) -> str:
    """Where ``cls`` is declared, relative to the checkout (``domain/settings.py``)."""
    return cls.__module__.replace(".", "/") + ".py"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _struct_inside(t: mi.Type) -> tuple[mi.StructType | None, str]:
    """The table a key holds, directly (``""``) or as an array of tables (``"[]"``)."""
    t = _without_none(t)
    if isinstance(t, mi.StructType):
        return t, ""
    if isinstance(t, mi.ListType) and isinstance(t.item_type, mi.StructType):
        return t.item_type, "[]"
    if isinstance(t, mi.DictType) and isinstance(t.value_type, mi.StructType):
        return t.value_type, ".NAME"
    return None, ""


def _without_none(t: mi.Type) -> mi.Type:
    if isinstance(t, mi.UnionType):
        rest = [u for u in t.types if not isinstance(u, mi.NoneType)]
        if len(rest) == 1:
            return rest[0]
    return t


_SCALARS = {mi.StrType: "string", mi.IntType: "integer", mi.BoolType: "boolean", mi.DecimalType: "number"}


def type_name(t: mi.Type) -> str:
    """The key's type as a TOML author sees it."""
    t = _without_none(t)
    if type(t) in _SCALARS:
        return _SCALARS[type(t)]
    if isinstance(t, mi.StructType):
        return "table"
    if isinstance(t, mi.ListType):
        return "array of tables" if isinstance(t.item_type, mi.StructType) else f"array of {type_name(t.item_type)}s"
    if isinstance(t, mi.DictType) and isinstance(t.key_type, mi.StrType):
        return "tables by name" if isinstance(t.value_type, mi.StructType) else f"{type_name(t.value_type)}s by name"
    raise TypeError(f"scripts/config_reference.py cannot name the type {t!r}: teach type_name() about it")


def default_text(f: mi.Field) -> str:
    if f.required:
        return "required"
    value = f.default_factory() if f.default is msgspec.NODEFAULT else f.default
    return "unset" if value is None else f"`{toml_value(value)}`"


def toml_value(value: Any) -> str:
    """A default written as it would be in the file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return msgspec.json.encode(value).decode()
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, msgspec.Struct):
        items = msgspec.structs.asdict(value).items()
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in items) + "}"
    raise TypeError(f"scripts/config_reference.py cannot write the default {value!r}: teach toml_value() about it")


def environment_rows() -> list[tuple[str, str]]:
    admin_env = next(f.default for f in msgspec.structs.fields(schema.Settings) if f.name == "admin_key_env")
    return [
        (f"`{CONFIG_ENV}`", "The configuration file, for a command given no `--config`."),
        (f"`{schema.DATABASE_URL_ENV}`", "Overrides `database_url` (so the password need not be in the file)."),
        (f"`{schema.REDIS_URL_ENV}`", "Overrides `redis_url`."),
        (
            f"`{admin_env}`, or the variable `admin_key_env` names",
            (
                "The admin API's configured key (an operator's): at least 32 characters, or the gateway refuses "
                "to start; while it is unset, only named admin keys (`tollgate admin-key issue`) open the admin API."
            ),
        ),
        ("the variable each `api_key_env` names", "That deployment's provider key."),
        (
            f"`{CLOCK_OFFSET_ENV}`",
            (
                "Seconds to run the ledger clock, which charges are timestamped and budgets' "
                f"periods judged by, ahead of the wall clock: 0 to 2,678,400 (31 days), and only "
                f"beside `{CLOCK_DRILL_ENV}=1` (drills and tests; unset in production)."
            ),
        ),
        (
            f"`{CLOCK_DRILL_ENV}`",
            (f"`1` lets `{CLOCK_OFFSET_ENV}` shift the clock; without it a process given an offset refuses to start."),
        ),
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    out = [
        (
            "Generated from `domain/settings.py` by `python -m scripts.config_reference --write "
            "docs/configuration-reference.md`; do not edit by hand. Keys are relative to the table named in each "
            "heading; `[]` marks an array of tables (`[[models]]`, `upstreams = [{...}]`)."
        ),
        "",
    ]
    for section in sections():
        heading = "Top level" if section.paths == [""] else ", ".join(f"`{p}`" for p in section.paths)
        out += [f"### {heading}", "", "| key | type | default | description |", "|---|---|---|---|"]
        out += [f"| `{key}` | {kind} | {_cell(default)} | {_cell(text)} |" for key, kind, default, text in section.rows]
        out.append("")
    out += ["### Environment variables", "", "| variable | what it does |", "|---|---|"]
    out += [f"| {name} | {_cell(text)} |" for name, text in environment_rows()]
    return "\n".join(out) + "\n"


def replace_section(readme: str, reference: str) -> str:
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the file has no {START} … {END} section")
    return readme[: start + len(START)] + "\n" + reference + readme[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.config_reference", description=__doc__.split("\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--check", metavar="FILE", help="exit 1 if this file's reference is not what the schema generates"
    )
    action.add_argument("--write", metavar="FILE", help="replace this file's reference with the generated one")
    args = parser.parse_args(argv)
    reference = render()
    target = args.check or args.write
    if target is None:
        sys.stdout.write(reference)
        return 0
    path = Path(target)
    text = path.read_text()
    try:
        updated = replace_section(text, reference)
    except ValueError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        return 2
    if args.write:
        if updated != text:
            path.write_text(updated)
            print(f"{path}: configuration reference updated.")
        return 0
    if updated != text:
        print(
            f"{path}: the configuration reference is out of date; run "
            f"python -m scripts.config_reference --write {target}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
