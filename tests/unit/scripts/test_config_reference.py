"""The configuration reference (docs/configuration-reference.md) matches the schema, and no configuration key
goes undocumented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from msgspec import inspect as mi

from app.settings_file import CONFIG_ENV
from domain import settings as schema
from domain import settings_models
from scripts.config_reference import END, START, UndocumentedField, main, render, replace_section, sections

REFERENCE = Path(__file__).resolve().parents[3] / "docs" / "configuration-reference.md"


def _committed_reference() -> str:
    text = REFERENCE.read_text()
    assert text.count(START) == 1, "docs/configuration-reference.md needs exactly one reference section"
    assert text.count(END) == 1, "docs/configuration-reference.md needs exactly one reference section"
    return text[text.index(START) + len(START) : text.index(END)]


def _every_key(info: mi.StructType, path: str = "") -> list[tuple[str, str, str]]:
    """(the table's path, key, owning class) for every field reachable from ``info``, walked here on
    its own rather than through the script, so that a script that skipped a table would fail."""
    keys = []
    for f in info.fields:
        keys.append((path, f.encode_name, info.cls.__name__))
        t = f.type
        if isinstance(t, mi.UnionType):
            t = next(u for u in t.types if not isinstance(u, mi.NoneType))
        here = f"{path}.{f.encode_name}" if path else f.encode_name
        if isinstance(t, mi.StructType):
            keys += _every_key(t, here)
        elif isinstance(t, mi.ListType) and isinstance(t.item_type, mi.StructType):
            keys += _every_key(t.item_type, here + "[]")
    return keys


def _tables(reference: str) -> dict[str, dict[str, str]]:
    """Each ``### heading`` of the reference, with its rows as ``first cell -> last cell``."""
    tables: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in reference.splitlines():
        if line.startswith("### "):
            current = tables.setdefault(line[4:], {})
        match = re.match(r"^\| (.+?) \| (?:.* \| )?(.+) \|$", line)
        if match and not line.startswith("|---"):
            current[match.group(1)] = match.group(2)
    return tables


def test_the_committed_reference_is_what_the_schema_generates():
    assert _committed_reference() == "\n" + render(), (
        "the configuration reference is stale: run python -m scripts.config_reference --write "
        "docs/configuration-reference.md"
    )
    assert main(["--check", str(REFERENCE)]) == 0


def test_every_settings_key_has_a_row_with_a_description():
    tables = _tables(_committed_reference())
    keys = _every_key(mi.type_info(schema.Settings))  # type: ignore[arg-type]
    assert {"models", "redis_url"} <= {k for p, k, _ in keys if p == ""}
    assert ("models[].upstreams[]", "weight", "Upstream") in keys
    assert ("models[].pricing", "cache_hit", "Pricing") in keys
    for path, key, owner in keys:
        heading = "Top level" if path == "" else next(h for h in tables if f"`{path}`" in h.split(", "))
        assert tables[heading].get(f"`{key}`", "").strip(), (
            f"{owner}.{key} ({path or 'top level'}) is not in the reference"
        )


def test_the_environment_overrides_are_listed():
    environment = _tables(_committed_reference())["Environment variables"]
    for name in (CONFIG_ENV, schema.DATABASE_URL_ENV, schema.REDIS_URL_ENV, "TOLLGATE_ADMIN_KEY"):
        assert any(f"`{name}`" in row for row in environment), name
    assert {"TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL"} == {
        CONFIG_ENV,
        schema.DATABASE_URL_ENV,
        schema.REDIS_URL_ENV,
    }


def test_a_field_without_a_comment_stops_the_script():
    source = Path(schema.__file__).read_text()
    undocumented = source.replace("    #: Credits one US dollar buys", "    # Credits one US dollar buys")
    assert undocumented != source
    with pytest.raises(UndocumentedField, match=r"Settings\.credits_per_usd"):
        sections(source=undocumented)


def test_a_field_without_a_comment_in_the_models_module_stops_the_script_too():
    source = Path(settings_models.__file__).read_text()
    undocumented = source.replace(
        "    #: This deployment's share of first attempts", "    # This deployment's share of first attempts"
    )
    assert undocumented != source
    with pytest.raises(UndocumentedField, match=r"Upstream\.weight has no `#:` comment in domain/settings_models\.py"):
        sections(sources={settings_models.__name__: undocumented})


def test_check_fails_on_a_stale_reference_and_write_repairs_it(tmp_path, capsys):
    stale = tmp_path / "configuration-reference.md"
    stale.write_text(f"# Title\n\n{START}\n| `old_key` | string | unset | gone |\n{END}\n\n## Next\n")
    assert main(["--check", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main(["--write", str(stale)]) == 0
    assert main(["--check", str(stale)]) == 0
    text = stale.read_text()
    assert text.startswith("# Title\n\n")
    assert text.endswith(f"{END}\n\n## Next\n")
    assert "old_key" not in text
    with pytest.raises(ValueError, match="config-reference"):
        replace_section("no markers here", render())


def test_defaults_are_written_as_in_the_file():
    rows = {key: default for s in sections() for key, _, default, _ in s.rows}
    assert rows["database_url"] == '`"sqlite:///tollgate.db"`'
    assert rows["timeout"] == "`600`"
    assert rows["vision"] == "`false`"
    assert rows["redis_url"] == "unset"
    assert rows["id"] == "required"
