"""The vendored o200k_base ranks are OpenAI's, byte for byte, and load without a network."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json

from app.tokens.encoding import O200K_SHA256, count_o200k, o200k, vendored_ranks_file
from scripts import vendor_tokenizer


def test_the_vendored_file_has_tiktoken_s_pinned_hash():
    assert hashlib.sha256(vendored_ranks_file()).hexdigest() == O200K_SHA256
    assert vendor_tokenizer.O200K_SHA256 == O200K_SHA256


def test_the_encoder_is_o200k_base():
    encoding = o200k()
    assert encoding.n_vocab == 200019  # 199,998 ranks and the two special tokens above them
    assert encoding.encode_ordinary("hello world") == [24912, 2375]
    assert encoding.encode_ordinary("tiktoken is great!") == [83, 8251, 2488, 382, 2212, 0]  # OpenAI's cookbook
    assert o200k() is encoding  # built once per process


def test_counts_are_exact_and_special_token_text_is_plain_text():
    assert count_o200k("") == 0
    assert count_o200k("hello world") == 2
    assert count_o200k("<|endoftext|>") == len(o200k().encode_ordinary("<|endoftext|>")) > 1
    long = "The quick brown fox jumps over the lazy dog. " * 40  # long enough to be cached
    assert count_o200k(long) == len(o200k().encode_ordinary(long)) == count_o200k(long)


def test_the_script_rebuilds_the_tiktoken_format_from_js_tiktoken_s_layout(tmp_path):
    tokens = [b"a", b"b", b"ab", b" the", b"\xe4\xb8"]
    lines = [
        "a 0 " + " ".join(base64.b64encode(t).decode() for t in tokens[:3]),
        "x 3 " + " ".join(base64.b64encode(t).decode() for t in tokens[3:]),
    ]
    module = {"pat_str": "", "special_tokens": {}, "bpe_ranks": "\n".join(lines)}
    source = "module.exports = " + json.dumps(module) + ";"
    ranks = vendor_tokenizer.ranks_from_js(source)
    assert ranks == {t: i for i, t in enumerate(tokens)}
    assert vendor_tokenizer.tiktoken_file(ranks) == b"".join(
        base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)
    )


def test_the_script_refuses_ranks_that_are_not_openai_s(tmp_path):
    import tarfile

    source = "module.exports = " + json.dumps({"bpe_ranks": "a 0 YQ== Yg=="}) + ";"
    member = tmp_path / "o200k_base.cjs"
    member.write_text(source)
    tarball = tmp_path / "js-tiktoken.tgz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(member, arcname=vendor_tokenizer.RANKS_MEMBER)
    target = tmp_path / "out.tiktoken.gz"
    assert vendor_tokenizer.main(["--tarball", str(tarball), "--target", str(target)]) == 1
    assert not target.exists()


def test_the_vendored_file_is_reproducible_gzip():
    from importlib import resources

    packed = resources.files("app.tokens").joinpath("o200k_base.tiktoken.gz").read_bytes()
    assert packed[4:8] == b"\x00\x00\x00\x00"  # no timestamp: regenerating gives the same bytes
    assert gzip.decompress(packed) == vendored_ranks_file()
