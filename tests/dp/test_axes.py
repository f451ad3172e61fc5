import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dppub.dp.axes import category_axis, numeric_axis
from dppub.dp.errors import ConfigError, InputError
from dppub.dp.reference.histogram import histogram
from dppub.dp.schema import ColumnSpec

AGE = ColumnSpec(name="age", type="int", bounds=(0, 9))
INC = ColumnSpec(name="inc", type="float", bounds=(0, 100))
SEX = ColumnSpec(name="sex", type="category", categories=("F", "M"))
AXES = [numeric_axis(AGE), numeric_axis(INC, bins=4), category_axis(SEX)]

rows = st.tuples(st.integers(0, 9), st.floats(0, 100, allow_nan=False), st.sampled_from(["F", "M"]))


def _frame(rs: list[tuple[int, float, str]]) -> pd.DataFrame:
    return pd.DataFrame(rs, columns=["age", "inc", "sex"])


def test_domain_comes_from_declaration_only() -> None:
    assert AXES[0].labels[0] == "0" and AXES[0].size == 10
    assert AXES[1].labels == ("[0, 25)", "[25, 50)", "[50, 75)", "[75, 100)")
    h = histogram(_frame([(9, 100.0, "M"), (0, 0.0, "F")]), AXES)
    assert h.shape == (10 * 4 * 2,) and h.sum() == 2
    # The upper bound falls in the last bin (closed), the lower bound in the first.
    assert h[np.ravel_multi_index((9, 3, 1), (10, 4, 2))] == 1
    assert h[0] == 1


@pytest.mark.slow
@given(st.lists(rows, min_size=1, max_size=30), rows)
def test_neighbours_differ_by_one_in_l1(
    base: list[tuple[int, float, str]], extra: tuple[int, float, str]
) -> None:
    # Declared sensitivity of a histogram: adding one record moves the output by exactly 1 (L1).
    a = histogram(_frame(base), AXES)
    b = histogram(_frame([*base, extra]), AXES)
    assert np.abs(a - b).sum() == 1


def test_errors() -> None:
    with pytest.raises(ConfigError, match="float columns need an explicit 'bins'"):
        numeric_axis(INC)
    with pytest.raises(ConfigError, match="not numeric"):
        numeric_axis(SEX)
    with pytest.raises(InputError, match="outside its declared domain"):
        histogram(pd.DataFrame({"sex": ["X"]}), [category_axis(SEX)])
