"""The tags header and the end user as a charge records them, bounded."""

from __future__ import annotations

import pytest

from domain.attribution import (
    MAX_END_USER,
    AttributionError,
    dimension_of,
    dimensions,
    end_user_of,
    parse_tags,
    tags_of_text,
    tags_text,
)
from domain.client_text import ClientTextError


def test_tags_are_name_value_pairs_trimmed_with_empty_items_skipped():
    assert parse_tags(" project=alpha , env=ci,, team.sub:x-y_z = a b=c ,") == {
        "project": "alpha",
        "env": "ci",
        "team.sub:x-y_z": "a b=c",
    }
    assert parse_tags("") == {}
    assert parse_tags(" , ") == {}


def test_tags_have_one_canonical_text_that_reads_back():
    tags = {"z": "1", "a": "x=y", "m": "é ü"}
    assert tags_text(tags) == "a=x=y,m=é ü,z=1"
    assert parse_tags(tags_text(tags)) == tags
    assert tags_of_text(tags_text(tags)) == tags
    assert tags_text({}) == ""


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("project", "is not name=value"),
        ("=alpha", "tag name ''"),
        ("pro ject=alpha", "tag name"),
        ("projekt/x=1", "tag name"),
        ("n" * 65 + "=v", "tag name"),
        ("project=", "value of tag 'project'"),
        ("project=" + "v" * 129, "1 to 128 characters"),
        ("project=a\x01b", "control characters"),
        ("a=1,a=2", "'a' is given twice"),
        (",".join(f"t{i}=v" for i in range(11)), "at most 10 tags"),
    ],
)
def test_a_tag_out_of_bounds_is_refused_saying_what_is_wrong(header, says):
    with pytest.raises(AttributionError) as refused:
        parse_tags(header)
    assert says in str(refused.value)


def test_the_bounds_themselves_are_accepted():
    most = ",".join(f"{i:0>64}={'v' * 128}" for i in range(10))
    assert len(parse_tags(most)) == 10


def test_an_end_user_is_a_string_cut_to_its_bound_and_anything_else_is_nothing():
    assert end_user_of("alice", "user") == "alice"
    assert end_user_of("caf\u00e9 \u5927", "user") == "caf\u00e9 \u5927"
    assert end_user_of("u" * (MAX_END_USER + 50), "user") == "u" * MAX_END_USER
    for value in (None, 42, {"id": "x"}, ["a"], True):
        assert end_user_of(value, "user") == ""


@pytest.mark.parametrize(
    "value", ["evil\u0000user", "a\nb", "a\x85b", "abc\u202edef", "x\u2066y", "\ud800", "u" * 300 + "\u0000"]
)
def test_an_end_user_the_ledger_could_not_record_as_it_is_is_refused_naming_its_field(value):
    with pytest.raises(ClientTextError) as refused:
        end_user_of(value, "metadata.user_id")
    assert refused.value.field == "metadata.user_id"
    assert "must not contain U+" in str(refused.value)


@pytest.mark.parametrize("value", ["a\u0000b", "a\u0085b", "a\u202eb", "a\u200fb", "a\u061cb"])
def test_a_tag_value_with_a_control_or_bidi_character_is_refused(value):
    with pytest.raises(AttributionError, match="control characters"):
        parse_tags(f"project={value}")


def test_dimensions_are_the_end_user_and_each_tag():
    assert dimension_of("user") == "user"
    assert dimension_of("tag:project") == "tag:project"
    for bad in ("tag:", "model", "tag:a b", "", "USER"):
        with pytest.raises(AttributionError, match="unknown dimension"):
            dimension_of(bad)
    assert dimensions({"project": "alpha", "env": "ci"}, "") == [
        ("user", ""),
        ("tag:project", "alpha"),
        ("tag:env", "ci"),
    ]
