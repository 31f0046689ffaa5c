"""The per-test memory limit in this process: armed, an allocation past it fails and the
limit goes back between tests; the note only over an allocation that failed while armed."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from testcurator.memlimit import MemoryLimit, data_bytes
from testcurator.vocab import MEMORY_LIMIT_LINE


@pytest.fixture
def limit() -> Iterator[MemoryLimit]:
    before = resource.getrlimit(resource.RLIMIT_DATA)
    yield MemoryLimit(64)
    resource.setrlimit(resource.RLIMIT_DATA, before)


def test_armed_an_allocation_past_the_limit_fails_and_disarmed_it_does_not(limit: MemoryLimit) -> None:
    held = data_bytes()
    assert held is not None and held > 0
    limit.arm()
    assert limit.held_mb == held // 2**20
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    assert soft == held + 64 * 2**20
    with pytest.raises(MemoryError):
        bytearray(256 * 2**20)
    small = bytearray(8 * 2**20)  # within the limit
    limit.disarm()
    assert resource.getrlimit(resource.RLIMIT_DATA)[0] == limit.soft
    assert len(bytearray(256 * 2**20)) == 256 * 2**20 and len(small) == 8 * 2**20


@pytest.mark.parametrize(("armed", "text", "noted"), [
    (True, "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes.", True),
    (True, "MemoryError", True),
    (True, "AssertionError: Tensor-likes are not close!", False),
    (False, "MemoryError", False),  # never armed: the limit had nothing to do with it
])
def test_the_note_is_put_over_an_allocation_that_failed_while_armed(limit: MemoryLimit, armed: bool, text: str,
                                                                    noted: bool) -> None:
    if armed:
        limit.arm()
        limit.disarm()
    out = limit.note(text)
    assert out.startswith(MEMORY_LIMIT_LINE) is noted and out.endswith(text)
    if noted:
        assert "(it may add 64 MB to what its process held when it started; --curate-memory-limit)" in out
