import json
from pathlib import Path

import pandas as pd
import pytest

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError, InvariantError
from dppub.dp.publication import Staging, sha256_files
from tests.dp.conftest import reserved_staging


def test_publish_is_a_single_rename(tmp_path: Path) -> None:
    st = Staging(tmp_path, dataset="d", run_id="r1").create()
    st.write_frame("q", "answers.parquet", pd.DataFrame({"a": [1.0]}))
    done = st.complete("q", {"name": "q", "epsilon": 0.5})
    assert done["files"] == ["q/answers.parquet"] and len(done["output_hash"]) == 64
    assert not (tmp_path / "d" / "r1").exists()  # nothing visible before publication
    final = st.publish(manifest={"run_id": "r1"}, report="# r\n")
    assert final == tmp_path / "d" / "r1"
    assert json.loads((final / "manifest.json").read_text()) == {"run_id": "r1"}
    assert not st.dir.exists()


def test_a_release_with_folders_lists_and_hashes_every_file_and_stays_in_its_staging(
    tmp_path: Path,
) -> None:
    # A joint group publishes each table in its own folder within the group's.
    st = Staging(tmp_path, dataset="d", run_id="r1").create()
    st.write_csv("g/a", "answers.csv", pd.DataFrame({"x": [1]}))
    st.write_csv("g/b", "answers.csv", pd.DataFrame({"x": [2]}))
    done = st.complete("g", {"name": "g"})
    assert done["files"] == ["g/a/answers.csv", "g/b/answers.csv"]
    before = done["output_hash"]
    (st.dir / "g" / "b" / "answers.csv").write_text("x\n3\n")
    assert sha256_files(st.dir / "g") != before  # a table's bytes are in the group's hash
    st.discard()
    with pytest.raises(FileNotFoundError):  # a late writer resurrects no discarded run
        st.release_dir("g/c")
    assert not st.dir.exists()


def test_completed_release_is_reused_not_recomputed(tmp_path: Path) -> None:
    st = reserved_staging(tmp_path, budget=1.0, cost=0.5)
    assert st.attempt("q", PrivacyCost(epsilon=0.1)) is None
    st.write_json("q", "model.json", {"w": 1})
    first = st.complete("q", {"name": "q"})
    assert st.completed("q") == first
    # A re-executed task reuses it, and the ledger records no second draw.
    assert st.attempt("q", PrivacyCost(epsilon=0.1)) == first
    assert st.ledger is not None and len(st.ledger.history()) == 2  # reserve + one draw


def test_discard_and_collisions(tmp_path: Path) -> None:
    st = Staging(tmp_path, dataset="d", run_id="r1").create()
    st.discard()
    assert not st.dir.exists() and not (tmp_path / "d" / "r1").exists()
    (tmp_path / "d" / "r2").mkdir(parents=True)
    with pytest.raises(ConfigError, match="already exists"):
        Staging(tmp_path, dataset="d", run_id="r2").create()
    with pytest.raises(ConfigError, match="run id must be"):
        Staging(tmp_path, dataset="d", run_id="../escape")


def test_hash_covers_names_and_bytes(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    h1 = sha256_files(tmp_path)
    (tmp_path / "a").write_text("y")
    assert sha256_files(tmp_path) != h1


def test_a_release_is_attempted_once_and_never_outside_its_staging(tmp_path: Path) -> None:
    st = reserved_staging(tmp_path, budget=1.0, cost=0.5)
    assert st.attempt("q", PrivacyCost(epsilon=0.1)) is None  # its draw is recorded
    # A second attempt (say a task dask re-ran after losing its worker) must not draw again.
    with pytest.raises(InvariantError, match="already attempted"):
        st.attempt("q", PrivacyCost(epsilon=0.1))
    assert st.attempt("other", PrivacyCost(epsilon=0.1)) is None  # others are unaffected
    st.discard()
    # A late writer after the run was discarded never re-creates its folders.
    with pytest.raises(InvariantError, match="staging folder"):
        st.attempt("late", PrivacyCost(epsilon=0.1))
    with pytest.raises(FileNotFoundError):
        st.write_json("q", "late.json", {})
    assert not st.dir.exists()


def test_a_label_with_a_carriage_return_is_quoted_in_the_csv(tmp_path: Path) -> None:
    # old code: written unquoted (the csv module quotes only the line terminator's characters,
    # and pandas wrote "\n"): CSV readers split the row in two
    import csv

    st = Staging(tmp_path, dataset="d", run_id="r1").create()
    frame = pd.DataFrame({"site": ["a\rb", "c\nd", "e\r\nf", "g"], "answer": [1.5, 2.0, 3.25, 4.0]})
    st.write_table("t", "answers", frame)
    path = st.release_dir("t") / "answers.csv"
    pd.testing.assert_frame_equal(pd.read_csv(path, dtype={"site": str}), frame)
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [
        ["site", "answer"],
        ["a\rb", "1.5"],
        ["c\nd", "2"],
        ["e\r\nf", "3.25"],
        ["g", "4"],
    ]
