"""The on-disk strategy cache: hits, keys, corrupt entries, concurrent processes, failures."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dppub.dp.matrix as mx
from dppub.dp.matrix import cache
from dppub.dp.matrix.select import candidate_strategies, select_strategy

W = mx.prefix(48)


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the workloads whose strategy was actually computed (not read from disk)."""
    calls: list[str] = []
    real = select_strategy  # what cache.py calls; patched there below

    def counting(workload: mx.Workload, **kwargs: Any) -> mx.Strategy:
        calls.append(workload.name)
        return real(workload, **kwargs)

    monkeypatch.setattr(cache, "select_strategy", counting)
    return calls


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.exists() else []


@pytest.mark.slow
def test_second_call_reads_the_same_strategy_from_disk(tmp_path: Path, computed: list[str]) -> None:
    first = cache.cached_select_strategy(W, directory=tmp_path)
    second = cache.cached_select_strategy(W, directory=tmp_path)
    assert computed == [W.name]
    assert second is not first and second.name == first.name == mx.select_strategy(W).name
    np.testing.assert_array_equal(second.dense(), first.dense())
    (entry,) = _entries(tmp_path)
    assert entry.name == f"{cache.cache_key(W)}.strategy"
    assert entry.stat().st_size > 0


def test_folder_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, computed: list[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.CACHE_ENV, raising=False)
    assert cache.cache_dir() == tmp_path / "xdg" / "dppub"
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"
    cache.cached_select_strategy(W)
    assert len(_entries(tmp_path / "mine")) == 1
    assert (tmp_path / "mine").stat().st_mode & 0o077 == 0  # private to the user


def test_keys_separate_workloads_candidates_and_code_versions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = cache.cache_key(W)
    assert base is not None and base == cache.cache_key(mx.prefix(48))
    assert cache.cache_key(mx.prefix(49)) != base
    assert cache.cache_key(mx.all_range(48)) != base
    assert cache.cache_key(W, candidate_strategies) not in (None, base)
    # Callables that may capture state are never cached.
    assert cache.cache_key(W, lambda w: candidate_strategies(w)) is None
    monkeypatch.setattr(cache, "code_version", lambda: "another version")
    assert cache.cache_key(W) != base


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "other format", "valid but not a strategy", "wrong domain"],
)
def test_a_damaged_entry_is_ignored_recomputed_and_rewritten(
    tmp_path: Path, computed: list[str], damage: str
) -> None:
    cache.cached_select_strategy(W, directory=tmp_path)
    (entry,) = _entries(tmp_path)
    good = entry.read_bytes()
    head, digest, payload = good.split(b"\n", 2)

    def signed(obj: object) -> bytes:
        data = pickle.dumps(obj)
        return head + b"\n" + hashlib.sha256(data).hexdigest().encode() + b"\n" + data

    entry.write_bytes(
        {
            "garbage": b"\x00not an entry",
            "truncated": good[: len(good) // 2],
            "other format": b"dppub-strategy-cache 0\n" + digest + b"\n" + payload,
            "valid but not a strategy": signed({"strategy": "identity"}),
            "wrong domain": signed(mx.identity_strategy(7)),
        }[damage]
    )
    again = cache.cached_select_strategy(W, directory=tmp_path)
    assert computed == [W.name, W.name]
    assert again.name == mx.select_strategy(W).name
    assert entry.read_bytes() == good  # rewritten whole


def test_an_unwritable_folder_only_costs_the_warm_start(
    tmp_path: Path, computed: list[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    for _ in range(2):
        assert cache.cached_select_strategy(W, directory=blocker / "sub").name
    assert computed == [W.name, W.name]


def test_a_write_that_dies_before_the_rename_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, computed: list[str]
) -> None:
    def crash(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)  # the os module cache.py uses
    cache.cached_select_strategy(W, directory=tmp_path)
    assert _entries(tmp_path) == []  # neither an entry nor a temporary file
    monkeypatch.undo()
    cache.cached_select_strategy(W, directory=tmp_path)
    assert len(_entries(tmp_path)) == 1


def _choose(folder: str) -> str:
    return cache.cached_select_strategy(mx.all_range(40), directory=Path(folder)).name


@pytest.mark.slow
def test_concurrent_processes_share_one_folder(tmp_path: Path) -> None:
    # Separate interpreters (spawn) race to compute and write the same entry.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=3, mp_context=ctx) as pool:
        names = list(pool.map(_choose, [str(tmp_path)] * 6))
    assert len(set(names)) == 1 and names[0] == mx.select_strategy(mx.all_range(40)).name
    entries = _entries(tmp_path)
    assert [p.suffix for p in entries] == [".strategy"]  # no temporary file left behind
    assert os.access(entries[0], os.R_OK)
