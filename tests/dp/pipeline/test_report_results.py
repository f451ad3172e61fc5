"""``report.md`` shows each release's results, not only its costs and file names: the first
rows of its published files (a workload's answers, a model's coefficients, the cluster centres,
the k-anonymous table), with the digits their noise supports (``report.html`` shows them in
its plots' tables). Old code: no row of any released file appeared in ``report.md``."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from dppub.dp.pipeline.kinds.previews import Preview, preview_lines
from tests.dp.pipeline.published_run import Demo


def _section(report: str, name: str) -> str:
    start = report.index(f"### {name} (")
    end = report.find("\n### ", start + 1)
    return report[start : end if end > 0 else len(report)]


def _rows(section: str) -> list[list[str]]:
    """The body rows of the section's last pipe table."""
    tables = re.findall(r"((?:^\|.*\|\n)+)", section, flags=re.M)
    lines = tables[-1].strip().splitlines()[2:]
    return [[c.strip() for c in ln.strip().strip("|").split(" | ")] for ln in lines]


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_report_shows_the_first_rows_of_each_release(demo: Demo) -> None:
    folder = demo.published.folder
    report = (folder / "report.md").read_text()

    # A linear model: every coefficient, within half its shown digit of the published one.
    published = _csv(folder / "income_model" / "coefficients.csv")
    shown = _rows(_section(report, "income_model"))
    assert [r[0] for r in shown] == [r["feature"] for r in published]
    for row, file in zip(shown, published, strict=True):
        se = float(file["std_error"])
        digit = 10.0 ** math.floor(math.log10(se / 10.0))  # the precision rule's power of ten
        assert abs(float(row[1]) - float(file["coefficient"])) <= digit / 2 + 1e-9

    # A workload: its first answers, under their labels.
    answers = _csv(folder / "age_cdf" / "answers.csv")
    section = _section(report, "age_cdf")
    assert f"First 5 of {len(answers)} rows of `answers.csv`" in section
    assert [r[0] for r in _rows(section)] == [a["label"] for a in answers[:5]]

    # The cluster centres and their sizes.
    clusters = _csv(folder / "work_patterns" / "clusters.csv")
    rows = _rows(_section(report, "work_patterns"))
    assert [r[0] for r in rows] == [c["cluster"] for c in clusters]
    for row, file in zip(rows, clusters, strict=True):
        assert math.isclose(float(row[1]), float(file["age"]), rel_tol=1e-5)

    # The k-anonymous table's first rows, as released.
    table = _csv(folder / "k_anonymous_table" / "table.csv")
    first = _rows(_section(report, "k_anonymous_table"))[0]
    assert first == list(table[0].values())


def test_a_preview_skips_what_was_not_published_and_names_its_columns(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "answers.csv").write_text("a,b,c\n1,2.123456789,x\n")
    wanted = Preview(file="answers.csv", columns=("c", "b", "missing"))
    lines = preview_lines("r", tmp_path, (Preview(file="absent.csv"), wanted))
    assert lines[0] == (
        "The only row of `answers.csv` (shown: other decimals to 6 significant digits; the "
        "file has every digit):"
    )
    assert lines[2:] == ["| c | b |", "|---|---:|", "| x | 2.12346 |"]
    assert preview_lines("r", tmp_path, (Preview(file="absent.csv"),)) == []
