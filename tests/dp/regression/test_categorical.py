"""Category features: one-hot encoding from declared categories, the one-hot row-norm bound in
every sensitivity (property-tested on neighbours), and the three models fitted on them,
in memory and through the streaming engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.engine import logistic_sums_stream, regression_statistics_stream
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.numerics.domains import TargetDomain
from dppub.dp.reference.frame_regression import (
    LinearRegression,
    LogisticRegression,
    TraceRegression,
    predict,
    sufficient_statistics,
)
from dppub.dp.regression import l1_sensitivity, l2_sensitivity
from dppub.dp.regression.encoding import FeatureEncoding
from dppub.dp.regression.logistic import normalised_rows
from dppub.dp.regression.losssums import logistic_sums
from dppub.dp.regression.sensitivity import PARTS
from dppub.dp.regression.statistics import Design
from dppub.dp.schema import ColumnSpec, TableSchema

AGE = ColumnSpec(name="age", type="int", bounds=(20, 60))
SEX = ColumnSpec(name="sex", type="category", categories=("F", "M"))
EDU = ColumnSpec(name="edu", type="category", categories=("low", "mid", "high"))
Y = ColumnSpec(name="y", type="float", bounds=(0.0, 10.0))
SCHEMA = TableSchema(columns=(AGE, SEX, EDU, Y))


def test_names_reference_levels_and_blocks() -> None:
    enc = FeatureEncoding.from_specs([AGE, SEX, EDU], fit_intercept=True)
    assert enc.names == ("age", "sex=M", "edu=mid", "edu=high")
    assert enc.blocks == ((1, 2), (2, 4))
    assert enc.to_dict()["reference_levels"] == {"sex": "F", "edu": "low"}
    # Without an intercept the first category column keeps every level (R's model.matrix).
    no = FeatureEncoding.from_schema(SCHEMA, ["age", "sex", "edu"], fit_intercept=False)
    assert no.names == ("age", "sex=F", "sex=M", "edu=mid", "edu=high")
    assert no.to_dict()["reference_levels"] == {"sex": None, "edu": "low"}


def test_encode_and_the_undeclared_value_policy() -> None:
    enc = FeatureEncoding.from_specs([SEX, EDU, AGE], fit_intercept=True)
    frame = pd.DataFrame(
        {"sex": ["M", "F", "X"], "edu": ["high", "unknown", "low"], "age": [30, 40, 99]}
    )
    # "X" and "unknown" are not declared: no indicator is set (the reference level's encoding);
    # the row is kept, never refused. Numeric values are clipped later, by the domain.
    assert enc.encode(frame).tolist() == [
        [1.0, 0.0, 1.0, 30.0],
        [0.0, 0.0, 0.0, 40.0],
        [0.0, 0.0, 0.0, 99.0],
    ]
    with pytest.raises(InputError, match=r"feature column 'age' is missing"):
        enc.encode({"sex": ["M"], "edu": ["low"]})
    with pytest.raises(ConfigError, match=r"declares one category"):
        FeatureEncoding.from_specs(
            [ColumnSpec(name="c", type="category", categories=("only",))], fit_intercept=True
        )
    with pytest.raises(ConfigError, match=r"must be numeric with declared bounds or a category"):
        FeatureEncoding.from_specs([ColumnSpec(name="z", type="string")], fit_intercept=True)


def test_domain_groups_radius_and_clip() -> None:
    enc = FeatureEncoding.from_specs([AGE, SEX, EDU], fit_intercept=True)
    dsg = Design(
        features=enc.domain(), target=TargetDomain(lower=0.0, upper=10.0), fit_intercept=True
    )
    shifted = dsg.shifted_features
    # age is centred and scaled to [-1, 1]; the indicators are left in {0, 1}.
    assert dsg.feature_shift.tolist() == [40.0, 0.0, 0.0, 0.0]
    assert dsg.feature_scale.tolist() == [20.0, 1.0, 1.0, 1.0]
    assert shifted.group_magnitudes().tolist() == [1.0, 1.0, 1.0]
    assert shifted.radius == pytest.approx(3**0.5)
    # Any row is rounded into the declared structure: at most one indicator per block.
    X = np.array([[70.0, 0.4, 0.7, 0.9], [10.0, 3.0, -1.0, 0.2], [30.0, 0.6, 0.3, 0.4]])
    assert enc.domain().clip(X).tolist() == [
        [60.0, 0.0, 0.0, 1.0],
        [20.0, 1.0, 0.0, 0.0],
        [30.0, 1.0, 0.0, 0.0],
    ]
    with pytest.raises(ConfigError, match=r"one-hot blocks can only be used unshifted"):
        enc.domain().translated(np.ones(4))


def test_one_hot_sensitivity_is_per_column_not_per_indicator() -> None:
    cats = tuple(f"c{i}" for i in range(16))
    specs = [ColumnSpec(name=f"k{j}", type="category", categories=cats) for j in range(3)]
    enc = FeatureEncoding.from_specs(specs, fit_intercept=True)
    target = TargetDomain(lower=-1.0, upper=1.0)
    s1 = l1_sensitivity(enc.domain(), target, fit_intercept=True)
    s2 = l2_sensitivity(enc.domain(), target, fit_intercept=True)
    # Three groups of magnitude 1: L1 ((3)^2 + 3) / 2 = 6, not (45^2 + 45) / 2 = 1035;
    # L2 sqrt((3^2 + 3) / 2); each times 1 + 2^-16, the float64 rounding allowance, which is
    # per group too (a row touches one indicator per block).
    grown = 1.0 + 2.0**-16
    want1, want2 = (6.0, 3.0, 3.0), (6**0.5, 3**0.5, 3**0.5)
    assert (s1.quadratic, s1.feature_sum, s1.cross) == pytest.approx(
        [v * grown for v in want1], rel=1e-12
    )
    assert (s2.quadratic, s2.feature_sum, s2.cross) == pytest.approx(
        [v * grown for v in want2], rel=1e-12
    )
    # Tightness: a row with one indicator per column and y = 1 attains every L1 bound.
    dsg = Design(features=enc.domain(), target=target, fit_intercept=True)
    row = np.zeros((1, enc.dim))
    row[0, [0, 15, 30]] = 1.0
    added = sufficient_statistics(row, np.array([1.0]), dsg).parts()
    for part in PARTS:
        moved = np.abs(added[part]).sum()
        assert moved <= s1.part(part) and moved == pytest.approx(s1.part(part), rel=1e-4), part


# --- property: neighbours move every part by at most its sensitivity, with one-hot blocks -----

_value = st.one_of(
    st.sampled_from([-2.0, 0.0, 0.4, 0.5, 0.6, 1.0, 3.0]), st.floats(-4.0, 4.0, allow_nan=False)
)


# A design and two neighbouring datasets (X, y): the second drops one row of the first.
_Neighbours = tuple[Design, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@st.composite
def _neighbours(draw: st.DrawFn) -> _Neighbours:
    widths = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    n_num = draw(st.integers(0, 2))
    lo = draw(st.lists(st.floats(-3.0, 2.0), min_size=n_num, max_size=n_num))
    specs = [ColumnSpec(name=f"n{j}", type="float", bounds=(v, v + 1.5)) for j, v in enumerate(lo)]
    for j, w in enumerate(widths):
        cats = tuple(f"v{i}" for i in range(w + 1))
        specs.append(ColumnSpec(name=f"c{j}", type="category", categories=cats))
    intercept = draw(st.booleans())
    order = draw(st.permutations(specs))
    enc = FeatureEncoding.from_specs(order, fit_intercept=intercept)
    dsg = Design(
        features=enc.domain(),
        target=TargetDomain(lower=-1.0, upper=draw(st.floats(-0.5, 3.0))),
        fit_intercept=intercept,
        encoding=enc,
    )
    n = draw(st.integers(0, 3))
    # Arbitrary rows, often malformed (fractional or several indicators): the clip must hold.
    rows = st.lists(_value, min_size=enc.dim, max_size=enc.dim)
    X = np.array(draw(st.lists(rows, min_size=n + 1, max_size=n + 1)))
    y = np.array(draw(st.lists(_value, min_size=n + 1, max_size=n + 1)))
    i = draw(st.integers(0, n))
    keep = np.arange(n + 1) != i
    return dsg, (X, y), (X[keep], y[keep])


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_neighbours())
def test_neighbours_move_each_part_by_at_most_its_sensitivity(case: _Neighbours) -> None:
    dsg, (X, y), (X2, y2) = case
    a = sufficient_statistics(X, y, dsg).parts()
    b = sufficient_statistics(X2, y2, dsg).parts()
    s1 = l1_sensitivity(dsg.shifted_features, dsg.shifted_target, fit_intercept=dsg.fit_intercept)
    s2 = l2_sensitivity(dsg.shifted_features, dsg.shifted_target, fit_intercept=dsg.fit_intercept)
    for part in PARTS:  # no tolerance: the bounds hold for the float64 statistics
        diff = a[part] - b[part]
        assert np.abs(diff).sum() <= s1.part(part), part
        assert np.linalg.norm(diff) <= s2.part(part), part
    # Objective perturbation's premise: every normalised row has norm <= 1 (exactly: the
    # rows are on the 2^-16 grid and their integer squared norms are at most 2^32).
    Z, _ = normalised_rows(X, dsg)
    assert np.all(np.einsum("ij,ij->i", Z * 2.0**16, Z * 2.0**16) <= 2.0**32)


# --- the three models on category features -------------------------------------------------


def _census(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    edu = rng.choice(["low", "mid", "high"], n, p=[0.3, 0.5, 0.2])
    age = rng.integers(20, 61, n)
    effect = {"low": 0.0, "mid": 1.5, "high": 3.0}
    y = 2.0 + 1.0 * (sex == "M") + np.vectorize(effect.get)(edu) + 0.05 * (age - 20)
    y = np.clip(y + rng.normal(0.0, 1.0, n), 0.0, 10.0)
    return pd.DataFrame({"age": age, "sex": sex, "edu": edu, "y": y})


def test_linear_auto_recovers_category_effects_and_names_them() -> None:
    frame = _census(20_000, 1)
    enc = FeatureEncoding.from_schema(SCHEMA, ["age", "sex", "edu"], fit_intercept=True)
    model = LinearRegression(2.0, encoding=enc, bounds_y=(0.0, 10.0)).fit(
        enc.encode(frame), frame["y"].to_numpy(), rng=np.random.default_rng(2)
    )
    # Seeded; truth (1.0, 1.5, 3.0) for sex=M, edu=mid, edu=high and 0.05 per year of age.
    np.testing.assert_allclose(model.coef, [0.05, 1.0, 1.5, 3.0], atol=0.25)
    doc = json.loads(json.dumps(model.to_dict()))
    assert doc["features"] == ["age", "sex=M", "edu=mid", "edu=high"]
    assert len(doc["coefficients"]) == 4
    assert doc["intercept"] == pytest.approx(2.0 - 0.05 * 20, abs=0.5)  # data units
    assert doc["feature_bounds"]["one_hot_blocks"] == [[1, 2], [2, 4]]


@pytest.mark.slow
def test_logistic_and_trace_accept_category_features() -> None:
    frame = _census(20_000, 3)
    enc = FeatureEncoding.from_schema(SCHEMA, ["sex", "edu"], fit_intercept=True)
    labels = (frame["y"] > 4.0).to_numpy(np.int64)
    logit = LogisticRegression(1.0, encoding=enc).fit(
        enc.encode(frame), labels, rng=np.random.default_rng(4)
    )
    assert logit.to_dict()["features"] == ["sex=M", "edu=mid", "edu=high"]
    accuracy = float(np.mean(predict(logit, enc.encode(frame)) == labels))
    majority = max(labels.mean(), 1 - labels.mean())
    # Seeded: the non-private fit reaches 0.783 against 0.694 for the majority class.
    assert accuracy > majority + 0.06
    # Trace regression has no intercept: sex keeps both levels (they act as an intercept).
    tenc = FeatureEncoding.from_schema(SCHEMA, ["sex", "edu"], fit_intercept=False)
    tasks = (frame["age"].to_numpy() >= 40).astype(np.int64)
    trace = TraceRegression(2.0, n_tasks=2, encoding=tenc, bounds_y=(-10.0, 10.0)).fit(
        tenc.encode(frame), frame["y"].to_numpy(), tasks=tasks, rng=np.random.default_rng(5)
    )
    assert trace.to_dict()["features"] == ["sex=F", "sex=M", "edu=mid", "edu=high"]
    assert trace.coef.shape == (4, 2)
    with pytest.raises(ConfigError, match=r"encoding was built for fit_intercept=True"):
        TraceRegression(1.0, n_tasks=2, encoding=enc, bounds_y=(-1.0, 1.0))


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    frame = _census(3_000, 6)
    path = tmp_path_factory.mktemp("categorical") / "rows.parquet"
    frame.to_parquet(path, index=False)
    return path, frame


def test_engine_encodes_category_features_as_the_frame_path(
    parquet: tuple[Path, pd.DataFrame],
) -> None:
    path, frame = parquet
    enc = FeatureEncoding.from_schema(SCHEMA, ["age", "sex", "edu"], fit_intercept=True)
    model = LinearRegression(1.0, encoding=enc, bounds_y=(0.0, 10.0))
    [stream] = regression_statistics_stream(
        path,
        SCHEMA,
        features=["age", "sex", "edu"],
        target="y",
        design=model.design(),
        batch_size=257,
    )
    exact = sufficient_statistics(enc.encode(frame), frame["y"].to_numpy(), model.design())
    # Exact sums: bit for bit, not approximately.
    assert stream.gram.tobytes() == exact.gram.tobytes()
    assert stream.moment.tobytes() == exact.moment.tobytes()
    logit = LogisticRegression(1.0, encoding=enc)
    w = np.linspace(-0.5, 0.5, enc.dim + 1)
    got = logistic_sums_stream(
        path,
        SCHEMA,
        features=["age", "sex", "edu"],
        target="y",
        design=logit.design(),
        w=w,
        threshold=4.0,
        batch_size=257,
    )
    Z, _ = normalised_rows(enc.encode(frame), logit.design())
    ref = logistic_sums(Z, np.asarray(frame["y"] > 4.0, dtype=np.float64), w)
    assert (got.loss, got.rows) == (ref.loss, ref.rows)
    assert got.gradient.tobytes() == ref.gradient.tobytes()
    assert got.hessian.tobytes() == ref.hessian.tobytes()
    with pytest.raises(ConfigError, match=r"are not the encoding's columns"):
        regression_statistics_stream(
            path, SCHEMA, features=["age", "sex"], target="y", design=model.design()
        )
    with pytest.raises(ConfigError, match=r"column 'sex' must be numeric \(int or float\) for"):
        regression_statistics_stream(
            path,
            SCHEMA,
            features=["sex"],
            target="y",
            design=LinearRegression(1.0, bounds_X=(0, 1), bounds_y=(0, 10)).design(1),
        )
