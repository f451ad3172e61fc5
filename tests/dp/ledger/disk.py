"""A real full disk for the tests: a small tmpfs mounted in the test's folder (as root)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["SmallDisk", "mounted_small_disk"]


def _write_forever(fd: int) -> None:
    while True:
        os.write(fd, b"\0" * 4096)


class SmallDisk:
    """A 1 MiB tmpfs mounted at ``path``; :meth:`fill` takes every free byte, :meth:`free`
    gives them back."""

    def __init__(self, path: Path) -> None:
        self.path, self._filler = path, path / "filler"

    def fill(self) -> None:
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            with pytest.raises(OSError, match="No space left on device"):
                _write_forever(fd)
        finally:
            os.close(fd)
        assert os.statvfs(self.path).f_bavail == 0

    def free(self) -> None:
        self._filler.unlink()


@contextmanager
def mounted_small_disk(path: Path) -> Iterator[SmallDisk]:
    """A 1 MiB tmpfs at ``path`` (created), unmounted at the end."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], check=True)
    try:
        yield SmallDisk(path)
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=True)
