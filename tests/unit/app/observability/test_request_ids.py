"""Request ids key each request's one charge: no two processes may ever hand out the same one."""

from __future__ import annotations

import os
import random
import re

from app.observability.request_ids import new_request_id


def test_request_ids_have_the_documented_shape_and_do_not_repeat():
    ids = [new_request_id() for _ in range(50_000)]
    assert all(re.fullmatch(r"req_[0-9a-f]{24}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_forked_child_does_not_repeat_its_parents_ids():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.close(read)
        os.write(write, " ".join(new_request_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(write)
    parents = {new_request_id() for _ in range(100)}
    with os.fdopen(read) as pipe:
        childs = set(pipe.read().split())
    os.waitpid(pid, 0)
    assert len(childs) == 100
    assert not parents & childs


def _untemper(y: int) -> int:
    """The Mersenne Twister's state word behind one 32-bit output (its tempering undone)."""
    y ^= y >> 18
    y ^= (y << 15) & 0xEFC60000
    x = y
    for _ in range(5):
        x = y ^ ((x << 7) & 0x9D2C5680)
    y = x
    x = y
    for _ in range(3):
        x = y ^ (x >> 11)
    return x & 0xFFFFFFFF


def _predicted_next(ids: list[str]) -> str:
    """The id after 208 others, if they came from ``random.Random.getrandbits(96)``: each is three of
    the generator's 32-bit outputs, low word first, and 624 outputs are its whole state."""
    words = []
    for request_id in ids:
        value = int(request_id.removeprefix("req_"), 16)
        words += [(value >> shift) & 0xFFFFFFFF for shift in (0, 32, 64)]
    clone = random.Random()
    clone.setstate((3, (*(_untemper(w) for w in words[-624:]), 624), None))
    return f"req_{clone.getrandbits(96):024x}"


def test_the_attack_recovers_a_mersenne_twister_from_208_ids():
    """The check below is able to fail: against the generator the ids came from before, it predicts."""
    generator = random.Random(os.urandom(32))
    earlier = [f"req_{generator.getrandbits(96):024x}" for _ in range(208)]
    assert _predicted_next(earlier) == f"req_{generator.getrandbits(96):024x}"


def test_the_next_request_id_cannot_be_computed_from_the_ones_before():
    for _ in range(3):  # also across the blocks drawn from the kernel
        earlier = [new_request_id() for _ in range(208)]
        assert _predicted_next(earlier) != new_request_id()
