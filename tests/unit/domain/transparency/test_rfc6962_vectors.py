"""Known answers from the reference implementations: RFC 6962 hashing, the 8-leaf tree's roots and
proofs (transparency-dev/merkle's proof/verify_test.go and rfc6962/rfc6962_test.go), and real proofs
from a production Certificate Transparency log (Google's Argon 2020, as golang.org/x/mod's
sumdb/tlog/ct_test.go keeps them). Each proof is checked both ways: the verifier accepts it, and the
tiled tree built from the same leaves generates exactly it."""

from __future__ import annotations

import base64
import hashlib

import pytest

from domain.transparency.appender import EMPTY_EDGE, append_leaves
from domain.transparency.hashing import EMPTY_ROOT, leaf_hash, merkle_root, node_hash
from domain.transparency.tile_proofs import prove_consistency, prove_inclusion, tree_root
from domain.transparency.verify import ProofError, root_from_inclusion_proof, verify_consistency, verify_inclusion
from tests.unit.domain.transparency.tile_store import TileStore

LEAVES = [
    bytes.fromhex(h)
    for h in ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]
]
ROOTS = [
    bytes.fromhex(h)
    for h in [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ]
]
SOME_HASH = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# (leaf number from 1, tree size, proof): transparency-dev/merkle's inclusionProofs
INCLUSION = [
    (
        1,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        6,
        8,
        [
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (3, 3, [h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")]),
    (
        2,
        5,
        [
            h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
]
# (old size, new size, proof): transparency-dev/merkle's consistencyProofs
CONSISTENCY = [
    (1, 1, []),
    (
        1,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        6,
        8,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (
        2,
        5,
        [
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
    (
        6,
        7,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
]


@pytest.fixture(scope="module")
def eight() -> TileStore:
    store = TileStore()
    store.append([leaf_hash(data) for data in LEAVES])
    return store


def test_the_hashes_are_rfc_6962s():
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert leaf_hash(b"").hex() == "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    assert leaf_hash(b"L123456").hex() == "395aa064aa4c29f7010acfe3f25db9485bbd4b91897b6ad7ad547639252b4d56"
    assert node_hash(b"N123", b"N456").hex() == "aa217fe888e47007fa15edab33c2b492a722cb106c64667fc2b044444de66bbb"


def test_the_roots_of_the_eight_leaf_tree_at_every_size(eight):
    hashes = [leaf_hash(data) for data in LEAVES]
    for size in range(1, 9):
        assert merkle_root(hashes[:size]) == ROOTS[size - 1]
        assert append_leaves(EMPTY_EDGE, hashes[:size]).root == ROOTS[size - 1]
        assert tree_root(eight, size) == ROOTS[size - 1]


@pytest.mark.parametrize(("leaf", "size", "proof"), INCLUSION)
def test_the_known_inclusion_proofs_are_generated_and_verify(eight, leaf, size, proof):
    index, hashed = leaf - 1, leaf_hash(LEAVES[leaf - 1])
    assert list(prove_inclusion(eight, index, size)) == proof
    assert root_from_inclusion_proof(index, size, hashed, proof) == ROOTS[size - 1]
    verify_inclusion(index, size, hashed, proof, ROOTS[size - 1])


def _corrupt_inclusions(index, size, proof, root, leaf):
    """transparency-dev/merkle's corruptInclusionProof: each must fail."""
    probes = [
        (index - 1, size, root, leaf, proof),
        (index + 1, size, root, leaf, proof),
        (index ^ 2, size, root, leaf, proof),
        (index, size * 2, root, leaf, proof),
        (index, size // 2, root, leaf, proof),
        (index, size, root, b"WrongLeaf", proof),
        (index, size, EMPTY_ROOT, leaf, proof),
        (index, size, SOME_HASH, leaf, proof),
        (index, size, root, leaf, [*proof, b""]),
        (index, size, root, leaf, [*proof, root]),
        (index, size, root, leaf, [b"", *proof]),
        (index, size, root, leaf, [root, *proof]),
    ]
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = bytes([flipped[i][0] ^ 8]) + flipped[i][1:]
        probes.append((index, size, root, leaf, flipped))
    if proof:
        probes.append((index, size, root, leaf, proof[:-1]))
    if len(proof) > 1:
        probes.append((index, size, root, leaf, [proof[0], SOME_HASH, *proof[1:]]))
    return probes


@pytest.mark.parametrize(("leaf", "size", "proof"), INCLUSION)
def test_every_corruption_of_a_known_inclusion_proof_fails(leaf, size, proof):
    for probe in _corrupt_inclusions(leaf - 1, size, proof, ROOTS[size - 1], leaf_hash(LEAVES[leaf - 1])):
        with pytest.raises(ProofError):
            verify_inclusion(probe[0], probe[1], probe[3], probe[4], probe[2])


@pytest.mark.parametrize(("index", "size"), [(0, 0), (0, 1), (1, 0), (2, 1)])
def test_an_empty_proof_does_not_prove_a_wrong_root_or_leaf(index, size):
    for leaf, root in ((SOME_HASH, b""), (b"", EMPTY_ROOT), (SOME_HASH, EMPTY_ROOT)):
        with pytest.raises(ProofError):
            verify_inclusion(index, size, leaf, [], root)


def test_a_single_leaf_tree_proves_its_leaf_with_an_empty_proof():
    hashed = leaf_hash(b"data")
    verify_inclusion(0, 1, hashed, [], hashed)
    for leaf, root in ((hashed, b""), (b"", hashed), (b"", b"")):
        with pytest.raises(ProofError):
            verify_inclusion(0, 1, leaf, [], root)


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
def test_the_known_consistency_proofs_are_generated_and_verify(eight, old, new, proof):
    assert list(prove_consistency(eight, old, new)) == proof
    verify_consistency(old, new, ROOTS[old - 1], ROOTS[new - 1], proof)


@pytest.mark.parametrize(("old", "new", "proof"), [c for c in CONSISTENCY if c[2]])
def test_every_corruption_of_a_known_consistency_proof_fails(old, new, proof):
    """transparency-dev/merkle's corruptConsistencyProof: each must fail."""
    r1, r2 = ROOTS[old - 1], ROOTS[new - 1]
    probes = [
        (old - 1, new, r1, r2, proof),
        (old + 1, new, r1, r2, proof),
        (old ^ 2, new, r1, r2, proof),
        (old, new * 2, r1, r2, proof),
        (old, new // 2, r1, r2, proof),
        (old, new, b"WrongRoot", r2, proof),
        (old, new, r1, b"WrongRoot", proof),
        (old, new, r2, r1, proof),
        (old, new, r1, r2, []),
        (old, new, r1, r2, [*proof, b""]),
        (old, new, r1, r2, [*proof, r1]),
        (old, new, r1, r2, [*proof, r2]),
        (old, new, r1, r2, [b"", *proof]),
        (old, new, r1, r2, [r1, *proof]),
        (old, new, r1, r2, [r2, *proof]),
        (old, new, r1, r2, [proof[0], *proof]),
        (old, new, r1, r2, proof[:-1]),
    ]
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = bytes([flipped[i][0] ^ 16]) + flipped[i][1:]
        probes.append((old, new, r1, r2, flipped))
    for size1, size2, root1, root2, wrong in probes:
        with pytest.raises(ProofError):
            verify_consistency(size1, size2, root1, root2, wrong)


CARE1, CARE2 = hashlib.sha256(b"don't care 1").digest(), hashlib.sha256(b"don't care 2").digest()


@pytest.mark.parametrize(
    ("old", "new", "root1", "root2", "proof", "good"),
    [
        (0, 0, CARE1, CARE2, [], False),
        (1, 1, CARE1, CARE2, [], False),
        (0, 0, CARE1, CARE1, [], True),  # sizes that are always consistent
        (0, 1, CARE1, CARE2, [], True),
        (1, 1, CARE2, CARE2, [], True),
        (1, 0, CARE1, CARE2, [], False),  # time travel to the past
        (2, 1, CARE1, CARE2, [], False),
        (1, 2, CARE1, CARE2, [], False),  # an empty proof
        (0, 0, EMPTY_ROOT, CARE2, [], False),  # roots that differ
        (1, 1, EMPTY_ROOT, CARE2, [], False),
        (0, 0, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT], False),  # equal roots, a proof that should be empty
        (0, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT], False),
        (1, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT], False),
    ],
)
def test_the_edge_cases_of_consistency_are_transparency_dev_merkles(old, new, root1, root2, proof, good):
    if good:
        verify_consistency(old, new, root1, root2, proof)
    else:
        with pytest.raises(ProofError):
            verify_consistency(old, new, root1, root2, proof)


# Google's Argon 2020 Certificate Transparency log: get-sth, get-entries?start=10000&end=10000,
# get-proof-by-hash and get-sth-consistency?first=3654490, as golang.org/x/mod/sumdb/tlog/testdata keeps them.
ARGON_SIZE = 961984013
ARGON_ROOT = "dwlueapdd7LaOEnX2W2Wp9v2XE+KzejHRQGHwEx0oaM="
ARGON_OLD_SIZE = 3654490
ARGON_OLD_ROOT = "AuIZ5V6sDUj1vn3Y1K85oOaQ7y+FJJKtyRTl1edIKBQ="
ARGON_LEAF_10000 = (
    "AAAAAAFelPhqUwAAAAViMIIFXjCCBEagAwIBAgIRAOodHzZdqWIFzYyl/SovhCMwDQYJKoZIhvcNAQELBQAwgZAxCzAJBgNVBAYTAkdCMRsw"
    "GQYDVQQIExJHcmVhdGVyIE1hbmNoZXN0ZXIxEDAOBgNVBAcTB1NhbGZvcmQxGjAYBgNVBAoTEUNPTU9ETyBDQSBMaW1pdGVkMTYwNAYDVQQD"
    "Ey1DT01PRE8gUlNBIERvbWFpbiBWYWxpZGF0aW9uIFNlY3VyZSBTZXJ2ZXIgQ0EwHhcNMTcwMjE1MDAwMDAwWhcNMjAwNDE2MjM1OTU5WjBf"
    "MSEwHwYDVQQLExhEb21haW4gQ29udHJvbCBWYWxpZGF0ZWQxHTAbBgNVBAsTFFBvc2l0aXZlU1NMIFdpbGRjYXJkMRswGQYDVQQDDBIqLmxh"
    "bmRsb3Jkcy5jb20uYXUwggEiMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQCtPBKKHj4zdrGlCjgTHzb5gx9JCs97DwvBz60f14gDufF2"
    "haWbOxyJ0a3opAMsZnOr8HkARVCwxdqG/PTfACcb0QM7FOlzvxGqxataTYiChwvkkif8F9GlJw69HuHgzhusPf1Ytfk3ps1PRC14MkyrS4kw"
    "Prk/Le4XdkqRpRw62wG4V6IkbzsNMEOl1H8EgUbfyapdOcVxHjIzvBVy56fBRKG05Fr5wNq3Acak5kYZdNsLhhmlrqAfAjiombW3hb3V5blJ"
    "dRC0BDdYHv2+zKey6LqJ1FDoXo6IzbzPpC+aifZy47YX+/N1U64Qn5xlDg7mOP8JXfkNJHbU1TJZHif5AgMBAAGjggHhMIIB3TAfBgNVHSME"
    "GDAWgBSQr2o6lFoL2JDqElZz30O0Oija5zAdBgNVHQ4EFgQUNQSLjkoz01I+iuuoC5lgEp0anhcwDgYDVR0PAQH/BAQDAgWgMAwGA1UdEwEB"
    "/wQCMAAwHQYDVR0lBBYwFAYIKwYBBQUHAwEGCCsGAQUFBwMCME8GA1UdIARIMEYwOgYLKwYBBAGyMQECAgcwKzApBggrBgEFBQcCARYdaHR0"
    "cHM6Ly9zZWN1cmUuY29tb2RvLmNvbS9DUFMwCAYGZ4EMAQIBMFQGA1UdHwRNMEswSaBHoEWGQ2h0dHA6Ly9jcmwuY29tb2RvY2EuY29tL0NP"
    "TU9ET1JTQURvbWFpblZhbGlkYXRpb25TZWN1cmVTZXJ2ZXJDQS5jcmwwgYUGCCsGAQUFBwEBBHkwdzBPBggrBgEFBQcwAoZDaHR0cDovL2Ny"
    "dC5jb21vZG9jYS5jb20vQ09NT0RPUlNBRG9tYWluVmFsaWRhdGlvblNlY3VyZVNlcnZlckNBLmNydDAkBggrBgEFBQcwAYYYaHR0cDovL29j"
    "c3AuY29tb2RvY2EuY29tMC8GA1UdEQQoMCaCEioubGFuZGxvcmRzLmNvbS5hdYIQbGFuZGxvcmRzLmNvbS5hdTANBgkqhkiG9w0BAQsFAAOC"
    "AQEACyHqxUzrexToY7tOv4+kyGPP2D27P1tQpyzeAl1bPObiMhNK2b9vvBLDWAaqm8c0YL1h+DBdLoWzf3xFsIkTCVCjWJTNSNlcYtgRk6or"
    "1s7jWsfXzWqsnPjPPmTIOCw7EfH7Yme3oxPs3UUsmShAgPwNohAtL9GqlqMiKM6v1WU3NHt01jEoNP23LRa6KeNK6AH6WHJykzL223IlhgXj"
    "HTeuQj6lR+TNrQXJuhwTXYe+20rrpPQxc1Pn7AqnvfWgmicRQ7gdIcr4V6+ecTvLfNOaJ0ZYe5G5giuAAdTm7F57pk04f4gyZNYKrj88mvbk"
    "oriN8b6jcWExtrYO6bm2TwAA"
)
ARGON_AUDIT_PATH = (
    "T46AmJsuOM/gFiGlUp+IJJebp+1Z5qratFNW7U0JyOQ= 9Jj1Feodn42uRYEfffkV4HF/EIPFQ5Zo9IwkxbQ2uhk= "
    "D53/1oCNebF4J59HHgioovKZxrmrKcVuCVhy3Izg8Ck= wSFDgGSrsXRPA+1c8WHoAFCsWeUv8NDyP/Q/SgsyVyY= "
    "516/RcwsgdwdzHn18v1dJHqBkgFUbNhmCIWOGjsMJaE= naTFY2ajLFgrgs5XUl+zJYZnnlJksLGsA1VYwpLfqbY= "
    "mKBRJo6qao+0Kdh/rhGkZUbHUAxMhrtrclrTpIbNjIg= Co4ueOFE7lpifLio94irxxsv1wFMMaK3tPu2ZQkHlro= "
    "yRgy800K6JMYCC05sWfqF2kvCg2riT/pVM+nEa6V5+0= n2O38XJZC8/Wpbwi9HhgVizlUyeUHVZvYyQB1607MRc= "
    "go3tAjuNfNSCj87y2Rg1xOroDknGN1eaf3cgvzObf7Q= 8D0Mj3/J7ySSnFb0afIHYXv6rlOhECnsebY6XKi1IR8= "
    "6rcez46ZU8M5vPiWVMAUfJfAOV0pPP/mch/lYzZhj/M= 2rtIeXrPvSdUyHc5maIgSAVB2BzaKaupWxSAiVayDE4= "
    "nniW/IMFQPN5xw8UsHFn7CRStYbm1gLu7NNa6kkRqJQ= mRPPi7sQS22MduIEyvcNzCNFqIt6kLwYPkNKrVtIcu8= "
    "JvTivzESNS9wHI8aph5a7uieVmtS/p9PciMZ5D6GyOo= UTyQd+Ym0wY4zG+qK806bBORwi1CSVvFQ/KknnqoZj8= "
    "hXODrqN+ff+U6zPqRQ+ZQKs6im1fPcxIerDSfNwflhE= II6GE+WY/DrpZzfHztLwkR46o37zVkNLCyPYlf68zA0= "
    "d609kWWcNBllbA8Jb/ad4XAVVGnScLRmtP8FYyr+Dck= rikBsP0G0gioXRpBFED2CzQdSLrGPvRd0bEcbEZw1rI= "
    "GXIElfmnRuWfbA4z7ubV/UwlpSRUbUeec7oL5HDDnh0= pR0SH/NYP6s9+8azWwaeUXA4Ze/3WCIgMfh5YW6wvcE= "
    "f3GuAKYVrF8RBg3s15jvA/YvV9oAliWtzP/imwPhQVA= WHn8zDxlVgkV+lSlmzaOdfSBrTHoRr5nT3d76q0KKWE= "
    "f2uV2ZxVgULzLPKuZcowRY3ZY7fRlX59iDBjV1R8kNQ= NzQVjJsvQwbi7WStMr9oFkh9VbHfK7LB6o7WwAqwNTs= "
    "C0LttBeYHZHgL+032JIcJC3CTBIyza/hsbmJUgJfmDI= nixU5CWTFVDlF4BGdcU6kA7WSYurEpe9jRWc+F/7sOc="
)
ARGON_CONSISTENCY = (
    "80Sfbj6UQEdVSZCSIgh9NMPj3vCBzcc1A48B2crJSWg= FZcrgAHUk6nNPviJZq8kEK6jCG1d18pJOFE45ZDc1TQ= "
    "Q67reWXmPBo1UfmwBap4Xi9PMPfFdUSSw3WGlRZdG7k= eJ7CyhR4PxzBxDIsWgrVYW1eFUb9ndgf46tFmiqVrxA= "
    "QrDwp062Grm5WY8KdrhFsBuuNjGzRox2Jb8PmVL5OYw= XM4YMjMEdLH/XJam/ZWyaP14k3cmsOtnPsOWQ54lW1s= "
    "SGiBh+jOTGccXU48ZzgQ88lRcBmtB4wz4oSDndv2QTg= WAS6txqNLYKGL1GdBdpqmV42TTfn6cJsuDsqLXuTCNI= "
    "QFmRS0rirUA7ZN3lxFjDncV+E1OCrn3NUB4RCp+5fzc= Hdbp7It2XBNZmNDBpCN/KPd7vfVqxgzwOosqVIaEA9E= "
    "mxvHL0ZiblBdD7j7pIa1jlfB0gSqfJ6oX0UGo7L0VsU= q5hjyvoW6TL/PThgcitpDcSTrnKX2p1+aqscqH2euRA= "
    "jTOWDqt3IHj2NVFeezyBz2ofpru+ztEywqKUAfFclKI= GIRn0w3HqJdvU9j1WVD//eR6lk2AaTVjyzjsJNP8U88= "
    "x52GJvxG81fnQBrgOTbll1A5tz95/LXK0Ag1NhB0r1I= 6/0OqrcTgc3o5dD5PymmoC96lB9yLPFuTHVvLy8fSGk= "
    "Gf+iKLfcXO5l4JEFmsZvSdG5q1uEeWPfYLrds6pmjz0= DGuaco+McyM3AfRSF6qX7RwSetwe2ieYJmxw5e9rVx0= "
    "2tQJ9V32hnYp+fdpP6TcjmgJmLeNVOMKM0Ml1kk4cNU= 3PapK+IkyJr8I9yAErAmzuZezzLMzsg+PfeRCgNW8NQ= "
    "s6xiYeejb+wtqHA+URJZ2I/SCPyIW8coP6aB00FJbMY= z9lSpmdTcr5M5ZzKlc4EPh3SrSypKFdk6JUF/UccaZU= "
    "GXIElfmnRuWfbA4z7ubV/UwlpSRUbUeec7oL5HDDnh0= pR0SH/NYP6s9+8azWwaeUXA4Ze/3WCIgMfh5YW6wvcE= "
    "f3GuAKYVrF8RBg3s15jvA/YvV9oAliWtzP/imwPhQVA= WHn8zDxlVgkV+lSlmzaOdfSBrTHoRr5nT3d76q0KKWE= "
    "f2uV2ZxVgULzLPKuZcowRY3ZY7fRlX59iDBjV1R8kNQ= NzQVjJsvQwbi7WStMr9oFkh9VbHfK7LB6o7WwAqwNTs= "
    "C0LttBeYHZHgL+032JIcJC3CTBIyza/hsbmJUgJfmDI= nixU5CWTFVDlF4BGdcU6kA7WSYurEpe9jRWc+F/7sOc="
)


def _hashes(text: str) -> list[bytes]:
    return [base64.b64decode(item) for item in text.split()]


def test_a_real_certificate_transparency_log_s_inclusion_proof_verifies():
    leaf = leaf_hash(base64.b64decode(ARGON_LEAF_10000))
    proof, root = _hashes(ARGON_AUDIT_PATH), base64.b64decode(ARGON_ROOT)
    verify_inclusion(10000, ARGON_SIZE, leaf, proof, root)
    with pytest.raises(ProofError):
        verify_inclusion(10001, ARGON_SIZE, leaf, proof, root)
    with pytest.raises(ProofError):
        verify_inclusion(10000, ARGON_SIZE * 2, leaf, proof, root)


def test_a_real_certificate_transparency_log_s_consistency_proof_verifies():
    old, new = base64.b64decode(ARGON_OLD_ROOT), base64.b64decode(ARGON_ROOT)
    proof = _hashes(ARGON_CONSISTENCY)
    verify_consistency(ARGON_OLD_SIZE, ARGON_SIZE, old, new, proof)
    with pytest.raises(ProofError):
        verify_consistency(ARGON_OLD_SIZE - 1, ARGON_SIZE, old, new, proof)
    with pytest.raises(ProofError):
        verify_consistency(ARGON_OLD_SIZE, ARGON_SIZE, new, old, proof)
