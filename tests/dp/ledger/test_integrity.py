"""The budget is a lifetime total on the data, and a damaged ledger is never trusted."""

import json
import multiprocessing as mp
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dppub.dp.budget import PrivacyCost
from dppub.dp.errors import BudgetExceededError, ConfigError, LedgerError
from dppub.dp.ledger import BudgetPolicy, DataIdentity, Ledger, ReleaseRecord, chain
from dppub.dp.ledger.summary import spending_summary
from tests.dp.conftest import LedgerFactory

ONE = PrivacyCost(epsilon=1.0)
DATA = DataIdentity(name="d", source="/data/d.parquet")


def _reserve(
    led: Ledger,
    run_id: str,
    *,
    data: DataIdentity = DATA,
    policy: BudgetPolicy | None = None,
    eps: float = 1.0,
    when: datetime | None = None,
) -> PrivacyCost:
    return led.reserve(
        run_id=run_id,
        data=data,
        policy=policy or BudgetPolicy(total=ONE),
        cost=PrivacyCost(epsilon=eps),
        config_hash="c",
        when=when,
    )


# -- config edits never reset spending ---------------------------------------------------------

EDITS = {
    "per minute": BudgetPolicy(total=ONE, per="minute", renew=True),
    "a cap": BudgetPolicy(total=ONE, per="month", cap=ONE),
    "a bigger budget": BudgetPolicy(total=PrivacyCost(epsilon=8.0)),
    "a delta": BudgetPolicy(total=PrivacyCost(epsilon=1.0, delta=1e-6)),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_config_edit_is_refused_with_one_line_naming_it(
    ledger_factory: LedgerFactory, edit: str
) -> None:
    led = ledger_factory()
    _reserve(led, "r1")
    with pytest.raises(ConfigError, match="differs from what the ledger recorded: ") as err:
        _reserve(led, "r2", policy=EDITS[edit])
    assert "\n" not in str(err.value) and "dppub budget amend" in str(err.value)


def test_renaming_or_repointing_the_data_is_refused(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    _reserve(led, "r1")
    with pytest.raises(ConfigError, match=r"name 'd' -> 'renamed'"):
        _reserve(led, "r2", data=DataIdentity(name="renamed", source=DATA.source))
    with pytest.raises(ConfigError, match="is recorded for /data/d.parquet, the config reads"):
        _reserve(led, "r3", data=DataIdentity(name="d", source="/data/other.parquet"))


def test_eight_runs_of_epsilon_one_under_every_edit_spend_one(
    ledger_factory: LedgerFactory,
) -> None:
    # The attack of the report: budget 1, eight runs of epsilon 1 under edited configs.
    led = ledger_factory()
    attempts = [
        (DATA, BudgetPolicy(total=ONE)),
        (DATA, BudgetPolicy(total=ONE, per="minute", renew=True)),
        (DATA, BudgetPolicy(total=ONE, per="year", cap=ONE)),
        (DataIdentity(name="renamed", source=DATA.source), BudgetPolicy(total=ONE)),
        (DATA, BudgetPolicy(total=ONE)),
        (DATA, BudgetPolicy(total=ONE, per="day", cap=ONE)),
        (DataIdentity(name="d2", source=DATA.source), BudgetPolicy(total=ONE)),
        (DATA, BudgetPolicy(total=ONE)),
    ]
    granted = 0
    for i, (data, policy) in enumerate(attempts):
        try:
            _reserve(led, f"r{i}", data=data, policy=policy)
            granted += 1
        except (BudgetExceededError, ConfigError):
            pass
    assert granted == 1
    assert spending_summary(led)["d"]["lifetime_spent_epsilon"] == pytest.approx(1.0)


def test_an_amendment_is_recorded_and_keeps_the_spending(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    _reserve(led, "r1", eps=0.75)
    bigger = BudgetPolicy(total=PrivacyCost(epsilon=2.0))
    renamed = DataIdentity(name="census", source=DATA.source)
    done = led.amend(data=renamed, policy=bigger, who="ana", why="board approved 2.0")
    assert (done.name, done.policy) == ("census", bigger)
    with pytest.raises(BudgetExceededError, match="spent epsilon=0.75"):
        _reserve(led, "r2", data=renamed, policy=bigger, eps=1.5)
    _reserve(led, "r3", data=renamed, policy=bigger, eps=1.25)
    summary = spending_summary(led)
    assert list(summary) == ["census"]
    (amendment,) = summary["census"]["amendments"]
    assert amendment["who"] == "ana" and amendment["why"] == "board approved 2.0"
    assert amendment["changes"] == ["name 'd' -> 'census'", "epsilon 1 -> 2"]
    assert summary["census"]["lifetime_spent_epsilon"] == pytest.approx(2.0)
    assert led.verify().ok
    with pytest.raises(LedgerError, match="matches the ledger already"):
        led.amend(data=renamed, policy=bigger, who="ana", why="again")
    with pytest.raises(LedgerError, match="nothing to amend"):
        led.amend(data=DataIdentity(name="x", source="/y"), policy=bigger, who="a", why="b")


def test_a_cap_limits_a_period_and_the_lifetime_total_still_binds(
    ledger_factory: LedgerFactory,
) -> None:
    led = ledger_factory()
    policy = BudgetPolicy(total=PrivacyCost(epsilon=1.5), per="month", cap=PrivacyCost(epsilon=1.0))
    nov, dec, jan = (datetime(y, m, 3, tzinfo=UTC) for y, m in ((2026, 11), (2026, 12), (2027, 1)))
    _reserve(led, "a", policy=policy, eps=0.75, when=nov)
    with pytest.raises(BudgetExceededError, match="in period 2026-11: .*opens 2026-12-01"):
        _reserve(led, "b", policy=policy, eps=0.5, when=nov)
    _reserve(led, "c", policy=policy, eps=0.5, when=dec)
    with pytest.raises(BudgetExceededError, match="for dataset 'd': budget epsilon=1.5"):
        _reserve(led, "d", policy=policy, eps=0.5, when=jan)  # a new month, the lifetime is spent


def test_a_renewing_budget_is_per_period_of_disjoint_data(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    data = DataIdentity(name="d", source="/data/{period}/d.parquet")
    policy = BudgetPolicy(total=ONE, per="month", renew=True)
    nov, dec = datetime(2026, 11, 3, tzinfo=UTC), datetime(2026, 12, 3, tzinfo=UTC)
    _reserve(led, "a", data=data, policy=policy, when=nov)
    with pytest.raises(BudgetExceededError, match="in period 2026-11"):
        _reserve(led, "b", data=data, policy=policy, eps=0.1, when=nov)
    _reserve(led, "c", data=data, policy=policy, when=dec)
    summary = spending_summary(led)["d"]
    assert summary["lifetime_spent_epsilon"] == pytest.approx(2.0)
    assert set(summary["periods"]) == {"2026-11", "2026-12"}


def test_policies_that_do_not_say_what_a_period_does_are_refused() -> None:
    with pytest.raises(ConfigError, match="either caps spending inside it"):
        BudgetPolicy(total=ONE, per="month")
    with pytest.raises(ConfigError, match="need a period"):
        BudgetPolicy(total=ONE, renew=True)
    with pytest.raises(ConfigError, match="cap exceeds the lifetime total"):
        BudgetPolicy(total=ONE, per="day", cap=PrivacyCost(epsilon=2.0))


def test_a_delta_zero_budget_refuses_any_delta(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    with pytest.raises(BudgetExceededError, match="requested epsilon=0.1 delta=1e-12"):
        led.reserve(
            run_id="r",
            data=DATA,
            policy=BudgetPolicy(total=ONE),
            cost=PrivacyCost(epsilon=0.1, delta=1e-12),
            config_hash="c",
        )


# -- a damaged ledger is never trusted ------------------------------------------------------------


def test_a_sign_flipped_cost_is_refused(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    _reserve(led, "r1", eps=0.5)
    _reserve(led, "r2", eps=0.25)
    # Flip the first reservation to -0.5: without the checks it would free a whole epsilon.
    ledger_factory.sql("UPDATE entries SET epsilon = -epsilon WHERE run_id = 'r1'")
    with pytest.raises(LedgerError, match="is damaged .*negative or non-finite cost"):
        _reserve(led, "r3", eps=0.25)
    # Repaired, then the last (checkpoint) row edited to a small positive cost: its hash.
    ledger_factory.sql("UPDATE entries SET epsilon = 0.5 WHERE run_id = 'r1'")
    ledger_factory.sql("UPDATE entries SET epsilon = 0.01 WHERE run_id = 'r2'")
    with pytest.raises(LedgerError, match="contents do not match its hash|missing or altered"):
        _reserve(led, "r3", eps=0.25)


def test_a_cut_off_tail_is_refused(ledger_factory: LedgerFactory) -> None:
    led = ledger_factory()
    _reserve(led, "r1", eps=0.5)
    _reserve(led, "r2", eps=0.5)
    ledger_factory.sql("DELETE FROM entries WHERE run_id = 'r2'")  # the chain alone still verifies
    assert led.verify().ok
    with pytest.raises(LedgerError, match="verified row .* is missing or altered"):
        _reserve(led, "r3", eps=0.5)


def test_an_empty_file_or_a_file_as_parent_names_the_cause(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(LedgerError, match=r"empty file \(0 bytes\)"):
        Ledger(empty)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(LedgerError, match="afile is not a folder"):
        Ledger(tmp_path / "afile" / "l.sqlite")


def _first_run(
    path: str, run_id: str, barrier: "mp.synchronize.Barrier", out: "mp.Queue[str]"
) -> None:
    barrier.wait()
    try:
        led = Ledger(path)
        _reserve(led, run_id, policy=BudgetPolicy(total=PrivacyCost(epsilon=2.0)))
        out.put("granted")
    except BudgetExceededError:
        out.put("refused")
    except LedgerError as exc:
        out.put(f"error: {exc}")


@pytest.mark.slow
def test_eight_first_runs_at_once_on_a_missing_ledger(ledger_factory: LedgerFactory) -> None:
    path = ledger_factory.location
    ctx = mp.get_context("fork")
    n = 8
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_first_run, args=(path, f"r{i}", barrier, out)) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    results = sorted(out.get(timeout=5) for _ in range(n))
    assert results == ["granted"] * 2 + ["refused"] * 6
    assert Ledger(path).verify().ok
    if ledger_factory.backend == "sqlite":
        assert not [p for p in Path(path).parent.iterdir() if p.name.endswith(".tmp")]


def test_an_integer_sensitivity_keeps_the_chain_verifiable(
    ledger_factory: LedgerFactory,
) -> None:
    # A REAL column reads back 2 as 2.0: the hash must be of the stored value, not the given one.
    led = ledger_factory()
    _reserve(led, "r1", eps=0.5)
    release = ReleaseRecord(
        name="q", kind="workload", mechanism="laplace", cost=PrivacyCost(epsilon=0.5), sensitivity=2
    )
    led.record_releases(run_id="r1", releases=[release])
    assert led.verify().ok
    led.commit(run_id="r1", output_hash="h")  # a write re-verifies the rows since the checkpoint


_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(_SCALAR, max_size=24))
def test_the_row_encoder_is_the_canonical_json(row: list[object]) -> None:
    assert chain._encode_row(row) == chain._ENCODER.encode(row)


def test_without_the_c_encoder_rows_use_the_plain_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    assert chain._row_encoder() == chain._ENCODER.encode


def test_a_head_is_checked_wherever_it_is_in_the_chain() -> None:
    rows = []
    heads: list[tuple[int, str]] = []
    prev = chain.GENESIS
    for seq in range(1, 6):
        values = [seq, *[None] * (len(chain.FIELDS) - 2), prev]
        prev = chain._hash_values(values)
        rows.append((*values, prev))
        heads.append((seq, prev))
    assert all(chain.verify_rows(rows, expected_head=h).ok for h in heads)
    assert not chain.verify_rows(rows, expected_head=(3, heads[2][1][::-1])).ok
    assert not chain.verify_rows(rows[:2], expected_head=heads[2]).ok
    assert chain.verify_rows(rows, expected_head=(0, chain.GENESIS)).ok
