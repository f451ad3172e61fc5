"""ARX's own figures on the Adult and FARS files, for ``bench/anonymity.py``.

``ARX_CASES``: expectations from ARX's JUnit suite (the optimum and, where the metric definitions
coincide, its value). ``ARX_LOSS``: ARX's global optimum and its Loss under
``Metric.createLossMetric(0.5, AggregateFunction.GEOMETRIC_MEAN)``, ``KAnonymity(k)`` and
``setSuppressionLimit(sigma)``, every file's column a quasi-identifier with its
``<data>_hierarchy_<column>.csv`` (read by ``CSVHierarchyInput``, ``;``); printed by
``getGlobalOptimum().getHighestScore()`` from ARX 3.9.2 (arx-deidentifier/arx at
aacd487fb77b3af7970d5d6fa1b2f6cca1182b64), built from source on this machine (2026-11-25) and
run on ``data/public``. ARX truncates each attribute's loss to 10 decimals before the mean.
"""

from __future__ import annotations

from typing import Any

# ARX JUnit expectations (arx-deidentifier/arx, src/test/org/deidentifier/arx/test/):
# (file/case, data set, dropped QI, k, sigma, metric, l-diversity, expected levels, ARX value).
# ARX's value is comparable only where the metric definitions coincide (see the test file
# tests/dp/anonymity/test_anon_arx.py); the levels always are.
ARX_CASES: list[tuple[str, str, str | None, int, float, str, Any, list[int], float | None]] = [
    (
        "KAnonymity#0",
        "adult",
        None,
        5,
        0.04,
        "entropy_monotone",
        None,
        [1, 0, 1, 1, 3, 2, 2, 0, 1],
        255559.85455731067,
    ),
    (
        "KAnonymity#1",
        "adult",
        None,
        100,
        0.04,
        "entropy_monotone",
        None,
        [1, 1, 1, 1, 3, 2, 2, 1, 1],
        379417.3460570988,
    ),
    (
        "KAnonymity#2",
        "adult",
        None,
        5,
        0.0,
        "entropy_monotone",
        None,
        [1, 2, 1, 1, 3, 2, 2, 1, 1],
        407289.5388925293,
    ),
    (
        "KAnonymity#3",
        "adult",
        None,
        100,
        0.0,
        "entropy_monotone",
        None,
        [0, 4, 1, 1, 3, 2, 2, 1, 1],
        453196.8932458743,
    ),
    ("KAnonymity#12", "fars", None, 5, 0.04, "dm_star", None, [0, 2, 2, 2, 1, 2, 1, 0], 4469271.0),
    (
        "KAnonymity#13",
        "fars",
        None,
        100,
        0.04,
        "dm_star",
        None,
        [0, 2, 3, 3, 1, 2, 2, 2],
        5.6052481e7,
    ),
    (
        "KAnonymity#14",
        "fars",
        None,
        5,
        0.0,
        "dm_star",
        None,
        [1, 2, 3, 3, 1, 2, 1, 2],
        1.42377891e8,
    ),
    (
        "KAnonymity#15",
        "fars",
        None,
        100,
        0.0,
        "dm_star",
        None,
        [5, 2, 3, 3, 1, 2, 0, 2],
        4.36925397e8,
    ),
    (
        "UtilityMetricsLoss#1",
        "adult",
        "occupation",
        5,
        1.0,
        "loss_rank",
        None,
        [0, 3, 0, 0, 1, 0, 0, 0],
        0.297248193,
    ),
    (
        "LDiversity adult#0",
        "adult",
        "occupation",
        1,
        0.04,
        "entropy",
        {"column": "occupation", "l": 5, "kind": "entropy"},
        [1, 0, 1, 1, 2, 2, 2, 1],
        None,
    ),
    (
        "LDiversity adult#2",
        "adult",
        "occupation",
        1,
        0.0,
        "entropy",
        {"column": "occupation", "l": 5, "kind": "entropy"},
        [1, 1, 1, 1, 3, 2, 2, 1],
        324620.5269918695,
    ),
    (
        "LDiversity fars (4%)",
        "fars",
        "istatenum",
        1,
        0.04,
        "entropy",
        {"column": "istatenum", "l": 5, "kind": "distinct"},
        [0, 2, 1, 1, 0, 2, 0],
        None,
    ),
    (
        "LDiversity fars (0%)",
        "fars",
        "istatenum",
        1,
        0.0,
        "entropy",
        {"column": "istatenum", "l": 5, "kind": "distinct"},
        [0, 2, 3, 3, 1, 2, 2],
        1201007.0880104564,
    ),
]


# (data set, k, sigma, ARX's optimal levels in file column order, ARX's Loss)
ARX_LOSS: list[tuple[str, int, float, str, float]] = [
    ("adult", 5, 0.0, "041132210", 0.5731509655590044),
    ("adult", 5, 0.04, "030111120", 0.26611081915757495),
    ("adult", 5, 0.05, "030021120", 0.2419323650662908),
    ("adult", 5, 0.1, "030021110", 0.22041192847984292),
    ("adult", 5, 1.0, "030021110", 0.22041192847984292),
    ("adult", 10, 0.0, "041132210", 0.5731509655590044),
    ("adult", 10, 0.04, "040121020", 0.32144043001423905),
    ("adult", 10, 0.05, "030121120", 0.2912700156059571),
    ("adult", 10, 0.1, "030121110", 0.2654514418089955),
    ("adult", 10, 1.0, "030021110", 0.261394038912103),
    ("fars", 5, 0.0, "42301222", 0.6634710671629722),
    ("fars", 5, 0.04, "40110020", 0.16319188695741627),
    ("fars", 5, 0.05, "30110020", 0.15398987668474184),
    ("fars", 5, 0.1, "30110010", 0.15285378029058072),
    ("fars", 5, 1.0, "30110010", 0.15285378029058072),
    ("fars", 10, 0.0, "51211232", 0.6980097216826968),
    ("fars", 10, 0.04, "40210020", 0.1919076779986617),
    ("fars", 10, 0.05, "30220010", 0.1882839058094974),
    ("fars", 10, 0.1, "40110020", 0.18241339019326874),
    ("fars", 10, 1.0, "40110020", 0.18241339019326874),
]
