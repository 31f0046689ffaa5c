"""Atomic writes keep the user's umask (and an existing file's mode)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from testcurator.files import atomic_write_text, current_umask


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664), (0o077, 0o600)])
def test_new_files_follow_the_umask(tmp_path: Path, umask: None, mask: int, expected: int) -> None:
    os.umask(mask)
    assert current_umask() == mask
    target = tmp_path / "sub" / "report.md"
    atomic_write_text(target, "hello\n")
    assert target.read_text() == "hello\n" and mode(target) == expected
    plain = tmp_path / "plain.txt"
    plain.write_text("x")  # what open() gives: the same
    assert mode(plain) == expected


def test_a_replaced_file_keeps_its_mode(tmp_path: Path, umask: None) -> None:
    target = tmp_path / "config.yaml"
    target.write_text("old\n")
    target.chmod(0o640)
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n" and mode(target) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]  # no temporary left behind
