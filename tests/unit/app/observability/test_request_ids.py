"""Request ids key each request's one charge: no two processes may ever hand out the same one."""

from __future__ import annotations

import os
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
