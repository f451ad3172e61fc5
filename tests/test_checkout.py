"""A clone is self-contained: nothing in the code, tests, benchmarks or configs names a path
outside the checkout (a user's clone has nothing beside it), and the public data sets the tests
and benchmarks read are in it (``data/public``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dppub.dp.reference.public_data import folder

ROOT = Path(__file__).resolve().parents[1]
SELF = Path(__file__).resolve()
FOLDERS = ("dp", "flows", "tasks", "dppub", "tests", "bench", "configs", "data")
SUFFIXES = frozenset({".py", ".yaml", ".yml", ".toml", ".txt", ".sh", ".j2", ".cfg", ".ini"})

# A folder beside the checkout, or an absolute path into a machine's own folders.
BESIDE = re.compile(r"""\.\./shared\b|["']shared["']\s*/\s*["']bench["']|\bROOT\.parent\b""")
ABSOLUTE = re.compile(r"""["'](?:/work|/root|/home|/srv|/mnt)/""")
# Path(__file__).resolve().parents[N], or .parent.parent...: N levels up from the file's folder.
PARENTS = re.compile(r"__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")
PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\))?((?:\.parent\b)+)")
# A relative path in a config resolves against the config's folder.
RELATIVE = re.compile(r"(?<![\w.])((?:\.\./)+[\w.{}/-]*)")


def outside(path: Path, text: str) -> list[str]:
    """``path:line: text`` for every reference in ``text`` (the content of ``path``, a file in
    the checkout) to a place outside the checkout."""
    top = len(path.relative_to(ROOT).parts) - 1  # parents[top] of the file is the root
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        up = [int(m) for m in PARENTS.findall(line)]
        up += [chain.count(".parent") - 1 for chain in PARENT_CHAIN.findall(line)]
        bad = bool(BESIDE.search(line) or ABSOLUTE.search(line) or any(n > top for n in up))
        if path.suffix in (".yaml", ".yml"):
            bad |= any(
                not (path.parent / rel).resolve().is_relative_to(ROOT)
                for rel in RELATIVE.findall(line)
            )
        if bad:
            found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def _files() -> list[Path]:
    files = [ROOT / "Makefile", ROOT / ".ci" / "run", ROOT / "pyproject.toml"]
    for top in FOLDERS:
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return sorted(p for p in files if p.resolve() != SELF and ".cache" not in p.parts)


def test_nothing_names_a_path_outside_the_checkout() -> None:
    files = _files()
    assert len(files) > 100
    found = [line for path in files for line in outside(path, path.read_text())]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("where", "line", "fires"),
    [
        # What tests and benchmarks read before the data moved into data/public:
        (
            "tests/dp/anonymity/conftest.py",
            'ADULT = Path(__file__).resolve().parents[4] / "shared" / "bench" / "adult"',
            True,
        ),
        ("tests/dp/anonymity/x.py", "DATA = Path(__file__).resolve().parents[4] / 'data'", True),
        ("bench/anonymity.py", 'DATA = ROOT.parent / "shared" / "bench"', True),
        ("bench/regression_census.py", '    ADULT = Path("/work/shared/bench/adult")', True),
        ("bench/x.py", "Data: ``../shared/bench/adult/adult.csv``", True),
        ("tests/x.py", "HERE = Path(__file__).parent.parent.parent", True),
        ("configs/x.yaml", "  path: ../../data/census.parquet", True),
        # ... and what stays inside:
        ("tests/dp/anonymity/conftest.py", "ROOT = Path(__file__).resolve().parents[3]", False),
        ("tests/x.py", "HERE = Path(__file__).parent.parent", False),
        ("configs/x.yaml", "  path: ../data/sample/census.parquet   # relative", False),
        ("tests/x.py", 'Staging(tmp_path, run_id="../escape")', False),
        ("tests/x.py", 'lock = "/tmp/dppub.lock"', False),
    ],
)
def test_the_check_finds_a_path_outside(where: str, line: str, fires: bool) -> None:
    assert bool(outside(ROOT / where, line)) is fires


def test_the_public_data_sets_are_in_the_checkout() -> None:
    adult = (folder("adult") / "adult.csv").read_bytes()
    assert adult.startswith(b"sex;age;race;") and adult.count(b"\r\n") == 30_163  # + header
    assert len(list(folder("adult").glob("adult_hierarchy_*.csv"))) == 9
    fars = (folder("fars") / "fars_int.csv").read_bytes()
    assert fars.startswith(b"iage;irace;") and fars.count(b"\n") == 100_938
    histograms = [np.load(p) for p in sorted(folder("dpbench1d").glob("*.npy"))]
    assert len(histograms) == 18
    assert all(h.shape == (4096,) and h.dtype == np.int64 for h in histograms)
    assert folder("adult").is_relative_to(ROOT)
