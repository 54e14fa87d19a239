"""Regenerate ``app/tokens/o200k_base.tiktoken.gz``, OpenAI's o200k_base ranks, from the npm package js-tiktoken.

Why from npm: tiktoken (PyPI) downloads its BPE files from OpenAI's blob storage the first time an
encoding is used, and a gateway must count tokens offline, with nothing fetched at run time. The npm
package js-tiktoken ships the same ranks inside its tarball in a compact form (one line per run of
consecutive ranks: ``<first token> <first rank> <base64 token> <base64 token> …``). This script
rebuilds tiktoken's own ``.tiktoken`` file from it (``<base64 token> <rank>`` per line, by rank) and
refuses to write anything unless the result's SHA-256 equals the hash tiktoken itself pins for
o200k_base, which proves the vendored file is byte-identical to OpenAI's.

    python -m scripts.vendor_tokenizer                      # runs `npm pack js-tiktoken@1.0.21`
    python -m scripts.vendor_tokenizer --tarball js-tiktoken-1.0.21.tgz
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

#: tiktoken_ext/openai_public.py pins this hash for o200k_base.tiktoken.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
NPM_PACKAGE = "js-tiktoken@1.0.21"
RANKS_MEMBER = "package/dist/ranks/o200k_base.cjs"
TARGET = Path(__file__).resolve().parent.parent / "app" / "tokens" / "o200k_base.tiktoken.gz"


def ranks_from_js(source: str) -> dict[bytes, int]:
    """Parse js-tiktoken's ``module.exports = {"bpe_ranks": "..."}`` into token bytes → rank."""
    payload = json.loads(source[source.index("{") : source.rindex("}") + 1])
    ranks: dict[bytes, int] = {}
    for line in payload["bpe_ranks"].split("\n"):
        if not line:
            continue
        _, offset, *tokens = line.split(" ")
        for i, token in enumerate(tokens):
            ranks[base64.b64decode(token, validate=True)] = int(offset) + i
    return ranks


def tiktoken_file(ranks: dict[bytes, int]) -> bytes:
    """tiktoken's ``.tiktoken`` format: ``base64(token) rank`` per line, ranks ascending."""
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    if [rank for _, rank in ordered] != list(range(len(ordered))):
        raise ValueError("the ranks are not exactly 0..n-1")
    return b"".join(base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for token, rank in ordered)


def read_ranks_source(tarball: Path) -> str:
    with tarfile.open(tarball) as archive:
        member = archive.extractfile(RANKS_MEMBER)
        if member is None:
            raise ValueError(f"{tarball} has no {RANKS_MEMBER}")
        return member.read().decode()


def npm_pack(directory: Path) -> Path:
    subprocess.run(["npm", "pack", NPM_PACKAGE, "--silent"], cwd=directory, check=True, capture_output=True)
    (tarball,) = directory.glob("js-tiktoken-*.tgz")
    return tarball


def vendor(tarball: Path, target: Path = TARGET) -> str:
    """Write ``target`` (gzip, reproducible: no name or time in the header); returns the SHA-256."""
    data = tiktoken_file(ranks_from_js(read_ranks_source(tarball)))
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise ValueError(f"SHA-256 {digest} is not tiktoken's o200k_base hash {O200K_SHA256}: not writing")
    target.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return digest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tarball", type=Path, help="a js-tiktoken .tgz (default: npm pack it)")
    parser.add_argument("--target", type=Path, default=TARGET)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tarball = args.tarball or npm_pack(Path(tmp))
        try:
            digest = vendor(tarball, args.target)
        except ValueError as exc:
            print(f"vendor_tokenizer: {exc}", file=sys.stderr)
            return 1
    print(f"wrote {args.target} (o200k_base, SHA-256 {digest}, identical to OpenAI's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
