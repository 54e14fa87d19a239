"""C2SP tlog-checkpoint: the body's exact text, strict parsing, and a signed checkpoint opened as a
client opens it."""

from __future__ import annotations

import base64

import pytest

from domain.transparency.checkpoint import (
    MAX_TREE_SIZE,
    Checkpoint,
    MalformedCheckpoint,
    open_checkpoint,
    parse_checkpoint,
    sign_checkpoint,
)
from domain.transparency.hashing import EMPTY_ROOT, leaf_hash
from domain.transparency.keys import (
    InvalidSignature,
    UnverifiedNote,
    parse_signer_key,
    parse_verifier_key,
    signer_from_seed,
)
from domain.transparency.note import MalformedNote

GO_SUM_TREE = "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n"
SPEC_EXAMPLE = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
SPEC_SIGNATURE = (
    "\u2014 example.com/behind-the-sofa "
    "Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)
LOG = signer_from_seed("tollgate.example/ledger", bytes(range(32)))


def test_the_body_is_golang_org_x_mods_tree_note():
    """sumdb/tlog's FormatTree golden text: the hash is RecordHash("hello world"), the RFC 6962 leaf hash."""
    checkpoint = Checkpoint("go.sum database tree", 123456789012, leaf_hash(b"hello world"))
    assert checkpoint.text == GO_SUM_TREE
    assert parse_checkpoint(GO_SUM_TREE) == checkpoint


def test_the_specs_example_parses_and_its_unknown_signature_is_not_trusted():
    checkpoint = parse_checkpoint(SPEC_EXAMPLE)
    assert (checkpoint.origin, checkpoint.size) == ("example.com/behind-the-sofa", 20852163)
    assert base64.b64encode(checkpoint.root_hash).decode() == "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
    with pytest.raises(UnverifiedNote):
        open_checkpoint((SPEC_EXAMPLE + "\n" + SPEC_SIGNATURE).encode(), "example.com/behind-the-sofa", [LOG.verifier])


def test_the_documented_signed_checkpoint_is_exactly_these_bytes():
    """docs/transparency.md's example: the 8-leaf tree of the RFC 6962 vectors, signed by the example key."""
    signer = parse_signer_key(
        "PRIVATE+KEY+tollgate.example/ledger+30f5dc62+AQABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"
    )
    assert signer.verifier.key_string == "tollgate.example/ledger+30f5dc62+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4"
    root = bytes.fromhex("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")
    signed = sign_checkpoint(Checkpoint("tollgate.example/ledger", 8, root), signer)
    assert signed.decode() == (
        "tollgate.example/ledger\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n\n"
        "\u2014 tollgate.example/ledger "
        "MPXcYnDjtyQzGXTQGyN1puCHDcq9e3xqh/E9DOY+xyr58KtXvDH9BImZK8vPR6QIGA1wI0nlhgKCGnlk4ZcfCpkjzwA=\n"
    )
    verifier = parse_verifier_key("tollgate.example/ledger+30f5dc62+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4")
    assert open_checkpoint(signed, "tollgate.example/ledger", [verifier]).root_hash == root


def test_extension_lines_follow_the_root_and_the_empty_tree_is_size_zero():
    checkpoint = Checkpoint("log", 0, EMPTY_ROOT, ("ext one", "ext two"))
    assert checkpoint.text == "log\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\next one\next two\n"
    assert parse_checkpoint(checkpoint.text) == checkpoint


@pytest.mark.parametrize(
    "text",
    [
        "not-" + GO_SUM_TREE[:-1],  # no final newline
        "go.sum database tree\n0xabcdef\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
        "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBTOOBIG=\n",
        "go.sum database tree\n0123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",  # a leading zero
        "go.sum database tree\n+123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
        "go.sum database tree\n-1\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
        "go.sum database tree\n 123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
        f"go.sum database tree\n{MAX_TREE_SIZE + 1}\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
        "go.sum database tree\n123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb1=\n",  # base64 with stray bits
        "go.sum database tree\n123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0\n",  # unpadded
        "go.sum database tree\n123\nTszzRgjTG6xce-z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",  # URL-safe alphabet
        "go.sum database tree\n123\nAAAA\n",  # 3 bytes, not 32
        "go.sum database tree\n123\n",  # two lines
        "\n123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",  # an empty origin
        GO_SUM_TREE + "\n",  # an empty extension line
        GO_SUM_TREE + "ext\n\n",
        GO_SUM_TREE.replace("\n", "\r\n"),
        "",
    ],
)
def test_malformed_checkpoints_are_refused(text):
    with pytest.raises(MalformedCheckpoint):
        parse_checkpoint(text)


def test_a_signed_checkpoint_opens_only_with_the_logs_key_and_origin():
    checkpoint = Checkpoint("tollgate.example/ledger", 1_000_000, leaf_hash(b"root"))
    signed = sign_checkpoint(checkpoint, LOG)
    assert signed.decode().startswith(checkpoint.text + "\n\u2014 tollgate.example/ledger ")
    assert open_checkpoint(signed, "tollgate.example/ledger", [LOG.verifier]) == checkpoint
    with pytest.raises(MalformedCheckpoint):
        open_checkpoint(signed, "another.example/ledger", [LOG.verifier])
    impostor = signer_from_seed("tollgate.example/ledger", bytes(32))
    with pytest.raises(UnverifiedNote):
        open_checkpoint(sign_checkpoint(checkpoint, impostor), "tollgate.example/ledger", [LOG.verifier])
    grown = signed.replace(b"\n1000000\n", b"\n1000001\n")
    with pytest.raises(InvalidSignature):
        open_checkpoint(grown, "tollgate.example/ledger", [LOG.verifier])
    with pytest.raises(MalformedNote):
        open_checkpoint(signed.replace(b"\n\n", b"\n"), "tollgate.example/ledger", [LOG.verifier])


@pytest.mark.parametrize(
    "fields",
    [("", 1, bytes(32)), ("a\nb", 1, bytes(32)), ("log", -1, bytes(32)), ("log", 1, bytes(31)), ("log", 1, bytes(33))],
)
def test_a_checkpoint_that_could_not_be_written_is_refused(fields):
    with pytest.raises(MalformedCheckpoint):
        Checkpoint(*fields)
    with pytest.raises(MalformedCheckpoint):
        Checkpoint("log", 1, bytes(32), ("",))
    with pytest.raises(MalformedCheckpoint):
        _ = Checkpoint("log\t", 1, bytes(32)).text  # a control character cannot stand in a note
