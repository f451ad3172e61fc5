"""No value a caller passes can make a valid ledger unusable (issue 29, item 7).

An epsilon of 1e308 used to be reserved, after which every write found the ledger "damaged"
(every dataset in it, not just the one that reserved). The ledger now refuses any cost or
budget above its range (``MAX_EPSILON``) before writing, keeps every sum finite, and a finite
out-of-range row an older dppub wrote no longer stops it. These tests use the ledger API
directly, as a caller that bypasses the config's bounds would.
"""

import math

import pytest

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import ConfigError
from dppub.dp.ledger import BudgetPolicy, DataIdentity, Ledger, ReleaseRecord
from dppub.dp.ledger.chain import FIELDS, MAX_EPSILON, now, row_hash
from dppub.dp.ledger.summary import spending_summary
from tests.dp.conftest import LedgerFactory

DATA = DataIdentity(name="d", source="/data/d.parquet")
OTHER = DataIdentity(name="e", source="/data/e.parquet")
HUGE = 1e308


def _policy(eps: float) -> BudgetPolicy:
    return BudgetPolicy(total=PrivacyCost(epsilon=eps))


def _reserve(
    led: Ledger, run_id: str, eps: float, *, budget: float = 4.0, data: DataIdentity = DATA
) -> PrivacyCost:
    return led.reserve(
        run_id=run_id,
        data=data,
        policy=_policy(budget),
        cost=PrivacyCost(epsilon=eps),
        config_hash="c",
    )


@pytest.mark.parametrize(("eps", "budget"), [(HUGE, HUGE), (1.0, HUGE), (2 * MAX_EPSILON, HUGE)])
def test_an_extreme_reservation_or_budget_is_refused_before_writing(
    ledger_factory: LedgerFactory, eps: float, budget: float
) -> None:
    led = ledger_factory()
    _reserve(led, "r0", 0.5)
    before = ledger_factory.snapshot()
    with pytest.raises(ConfigError, match=r"above the ledger's range \(at most 1e\+100\)") as err:
        _reserve(led, "r1", eps, budget=budget)
    assert "\n" not in str(err.value) and "nothing was written" in str(err.value)
    assert ledger_factory.snapshot() == before
    # The ledger is as usable as before: the same data and other data reserve and settle.
    _reserve(led, "r2", 0.5)
    _reserve(led, "r3", 1.0, data=OTHER)
    led.abort(run_id="r2")
    assert led.verify().ok
    assert spending_summary(led)["d"]["spent_epsilon"] == 0.5


def test_the_range_edge_is_accepted_and_its_sums_stay_finite(
    ledger_factory: LedgerFactory,
) -> None:
    led = ledger_factory()
    left = _reserve(led, "r1", MAX_EPSILON, budget=MAX_EPSILON)
    assert left == PrivacyCost.zero()
    with pytest.raises(Exception, match="budget exceeded"):
        _reserve(led, "r2", MAX_EPSILON, budget=MAX_EPSILON)
    led.commit(run_id="r1", output_hash="h")
    summary = spending_summary(led)["d"]
    assert summary["lifetime_spent_epsilon"] == MAX_EPSILON
    assert math.isfinite(summary["remaining_epsilon"])


def test_draws_whose_sum_leaves_the_range_are_refused_and_the_run_still_settles(
    ledger_factory: LedgerFactory,
) -> None:
    led = ledger_factory()
    _reserve(led, "r1", MAX_EPSILON, budget=MAX_EPSILON)
    led.draw(run_id="r1", release="a", cost=PrivacyCost(epsilon=0.75 * MAX_EPSILON))
    before = ledger_factory.snapshot()
    with pytest.raises(ConfigError, match="with the run's earlier draws"):
        led.draw(run_id="r1", release="b", cost=PrivacyCost(epsilon=0.75 * MAX_EPSILON))
    with pytest.raises(ConfigError, match="above the ledger's range"):
        led.draw(run_id="r1", release="c", cost=PrivacyCost(epsilon=HUGE))
    assert ledger_factory.snapshot() == before
    assert led.charge(run_id="r1") == PrivacyCost(epsilon=0.75 * MAX_EPSILON)
    assert led.verify().ok


@pytest.mark.parametrize(
    ("cost", "sensitivity", "message"),
    [
        (PrivacyCost(epsilon=HUGE), 1.0, "epsilon must be in"),
        (PrivacyCost(epsilon=0.5), math.inf, "sensitivity must be finite"),
        (PrivacyCost(epsilon=0.5), math.nan, "sensitivity must be finite"),
    ],
)
def test_a_release_row_out_of_range_is_refused_before_writing(
    ledger_factory: LedgerFactory, cost: PrivacyCost, sensitivity: float, message: str
) -> None:
    led = ledger_factory()
    _reserve(led, "r1", 1.0)
    before = ledger_factory.snapshot()
    record = ReleaseRecord(
        name="x", kind="workload", mechanism="laplace", cost=cost, sensitivity=sensitivity
    )
    with pytest.raises(ConfigError, match=message) as err:
        led.record_releases(run_id="r1", releases=[record])
    assert "\n" not in str(err.value)
    assert ledger_factory.snapshot() == before
    led.abort(run_id="r1")
    assert led.verify().ok


def test_an_amendment_to_an_extreme_budget_is_refused(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    _reserve(led, "r1", 1.0)
    before = ledger_factory.snapshot()
    with pytest.raises(ConfigError, match="above the ledger's range"):
        led.amend(data=DATA, policy=_policy(HUGE), who="ana", why="more")
    assert ledger_factory.snapshot() == before


def _append_as_the_old_code_did(led: Ledger, **values: object) -> None:
    """Append a row the way dppub did before the range check (a valid hash and checkpoint)."""
    with led.store.transaction() as con:
        last = con.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        assert last is not None
        row: dict[str, object] = dict.fromkeys(FIELDS)
        row.update(values, seq=last["seq"] + 1, ts=now(), prev_hash=last["hash"])
        digest = row_hash(row)
        columns = ", ".join((*FIELDS, "hash"))
        marks = ", ".join("?" * (len(FIELDS) + 1))
        con.execute(f"INSERT INTO entries ({columns}) VALUES ({marks})", [*row.values(), digest])
        con.execute(
            "UPDATE meta SET value = ? WHERE key = 'checkpoint'", (f"{row['seq']}:{digest}",)
        )


def test_a_ledger_the_old_code_left_with_a_huge_reservation_stays_usable(
    ledger_factory: LedgerFactory,
) -> None:
    led = ledger_factory()
    _reserve(led, "first", 1.0, data=OTHER)
    (declared,) = led.declarations()
    # The old code's sequence for `epsilon: 1e308`: declare the data, reserve 1e308.
    note = '{"budget":{"delta":0.0,"epsilon":1e308},"path":"/data/d.parquet"}'
    common = {"dataset": "d", "source": DATA.source, "delta": 0.0, "is_dp": 1}
    _append_as_the_old_code_did(
        led, event="declare", epsilon=0.0, budget_epsilon=HUGE, budget_delta=0.0,
        period="all", note=note, **common,
    )  # fmt: skip
    _append_as_the_old_code_did(
        led, event="reserve", scope="all", run_id="huge", epsilon=HUGE, budget_epsilon=HUGE,
        budget_delta=0.0, period="all", location="", config_hash="c", **common,
    )  # fmt: skip
    assert led.verify().ok
    # Other data keeps working (the old code called the whole ledger damaged here).
    _reserve(led, "second", 1.0, data=OTHER)
    # The huge run gets one clear line instead of "damaged", and settles.
    with pytest.raises(ConfigError, match=r"epsilon=1e\+308, above the ledger's range"):
        led.draw(run_id="huge", release="x", cost=PrivacyCost(epsilon=HUGE))
    with pytest.raises(ConfigError, match=r"budget has epsilon=1e\+308, above the ledger's"):
        _reserve(led, "again", 1.0, budget=HUGE)
    held = spending_summary(led)["d"]  # the audit reads it: the hold counts, nothing is left
    assert (held["spent_epsilon"], held["remaining_epsilon"]) == (HUGE, 0.0)
    led.abort(run_id="huge")
    summary = spending_summary(led)
    assert summary["e"]["spent_epsilon"] == 2.0 and summary["d"]["spent_epsilon"] == 0.0
    assert led.verify().ok
    assert declared.name == "e"
