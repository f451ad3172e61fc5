"""A table's config item (one entry of ``tables:``): its keys, measures, rounding, quality
and suppression.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from dppub.dp.errors import ConfigError
from dppub.dp.pipeline.config import Cost, Flag, Integer, Model, Name, Number
from dppub.dp.pipeline.limits import MAX_DOMAIN_CELLS
from dppub.dp.tables.keys import Selection
from dppub.dp.tables.office import Presentation
from dppub.dp.tables.quality import CAUTION, UNRELIABLE
from dppub.dp.tables.split import Measure

QUANTILE_BINS = 1024
"""A quantile column's grid by default: one bin per integer of an int column with at most
this many values, else this many equal-width bins over the declared bounds."""


class KeyModel(Model):
    """One ``by`` key: a column (categories, int values, ``bins`` of a float) or a level."""

    column: str = Field(min_length=1)
    level: Integer | None = Field(default=None, ge=0)
    bins: Integer | None = Field(default=None, ge=1, le=MAX_DOMAIN_CELLS)


class CountModel(Model):
    """``{count: col}``: the rows of the group where ``col`` is present."""

    count: str = Field(min_length=1)


class SumModel(Model):
    sum: str = Field(min_length=1)


class VarianceModel(Model):
    variance: str = Field(min_length=1)


class StdModel(Model):
    std: str = Field(min_length=1)


class MeanModel(Model):
    mean: str = Field(min_length=1)


class QuantileModel(Model):
    quantile: str = Field(min_length=1)
    at: list[Number] = Field(min_length=1, max_length=99)
    bins: Integer | None = Field(default=None, ge=2, le=65536)
    """The fine grid (default :data:`QUANTILE_BINS`)."""

    @field_validator("at")
    @classmethod
    def _probabilities(cls, at: list[float]) -> list[float]:
        bad = [p for p in at if not 0.0 < p < 1.0]
        if bad:
            raise ValueError(f"quantile probabilities must lie in (0, 1), got {bad}")
        return at


MeasureModel = (
    Literal["count", "count_distinct"]
    | CountModel
    | SumModel
    | MeanModel
    | VarianceModel
    | StdModel
    | QuantileModel
)


_MEASURE_MODELS: dict[str, type[Model]] = {
    "count": CountModel,
    "variance": VarianceModel,
    "std": StdModel,
    "sum": SumModel,
    "mean": MeanModel,
    "quantile": QuantileModel,
}


MAX_BASE = 1_000_000_000
"""The largest ``round: {base: N}``."""


class RoundModel(Model):
    """``round: {base: b}``: counts and sums as multiples of ``b`` that still add up."""

    base: Integer = Field(ge=1, le=MAX_BASE)


class QualityModel(Model):
    """``quality:``: the relative standard errors above which a value is flagged."""

    caution: Number = Field(default=CAUTION, gt=0)
    unreliable: Number = Field(default=UNRELIABLE, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> QualityModel:
        if not self.caution < self.unreliable:
            raise ValueError(
                f"quality: caution ({self.caution:g}) must be below unreliable "
                f"({self.unreliable:g})"
            )
        return self


class SuppressModel(Model):
    """``suppress: {below: N}``: withhold cells whose published count is below ``N``."""

    below: Integer = Field(ge=1)


class TableModel(Cost):
    """One ``tables:`` item (module doc)."""

    name: Name
    by: list[str | KeyModel] = Field(min_length=1, max_length=8)
    measures: list[MeasureModel] = Field(min_length=1)
    margins: Flag = False
    round: Literal["none", "integer"] | RoundModel = "none"
    """Controlled rounding of counts and sums (:mod:`dp.tables.rounding`)."""
    quality: QualityModel = QualityModel()
    suppress: SuppressModel | None = None
    # Not a field named ``keys``: Prefect walks a pydantic model with ``dict(model)``, which calls
    # ``model.keys()`` -- a str there (every table run failed with "'str' object is not callable").
    key_policy: Literal["declared", "private"] = Field(default="declared", alias="keys")
    selection: Selection = "auto"
    """``keys: private``: the key selection rule by name, or ``auto`` (:mod:`dp.tables.keys`)."""
    joint: Name | None = None
    """Tables naming the same group are measured once, together (:mod:`dp.tables.joint`)."""
    where: str | None = Field(default=None, min_length=1, max_length=2000)
    """A row filter on declared columns (:mod:`dp.engine.row_filter`), applied to each row
    before contribution bounding."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("measures", mode="before")
    @classmethod
    def _each_measure(cls, value: object) -> object:
        """A mapping measure checked against the model its key names, so a refusal says why
        (the union's error named its first alternative: "Input should be 'count'")."""
        if not isinstance(value, list):
            return value
        out: list[object] = []
        for i, m in enumerate(value):
            kind = next((k for k in _MEASURE_MODELS if isinstance(m, dict) and k in m), None)
            if kind is None:
                out.append(m)
                continue
            try:
                out.append(_MEASURE_MODELS[kind].model_validate(m))
            except ValidationError as exc:
                first = exc.errors()[0]
                if first["type"] == "extra_forbidden":  # the loader names it and what is allowed
                    out.append(m)
                    continue
                where = ".".join(str(p) for p in first["loc"])
                reason = str(first["msg"]).removeprefix("Value error, ")
                raise ValueError(f"measure {i} ({kind}): {where}: {reason}") from None
        return out

    @field_validator("round", mode="before")
    @classmethod
    def _round(cls, value: object) -> object:
        """One clear message for every wrong ``round:`` (not one per form it could take)."""
        base = value.get("base") if isinstance(value, dict) and set(value) == {"base"} else None
        if value in ("none", "integer") or (
            isinstance(base, int) and not isinstance(base, bool) and 1 <= base <= MAX_BASE
        ):
            return value
        raise ValueError(
            f"round must be integer, none or {{base: N}} with a whole N from 1 to {MAX_BASE:,}, "
            f"got {value!r}"
        )

    @model_validator(mode="after")
    def _options(self) -> TableModel:
        if self.key_policy == "declared" and self.delta > 0:
            raise ValueError("delta is spent only by keys: private; declared keys use epsilon")
        if self.key_policy == "private" and self.delta <= 0:
            raise ValueError(f"keys: private needs a delta > 0, got {self.delta!r}")
        if self.key_policy == "declared" and self.selection != "auto":
            raise ValueError(f"selection: {self.selection} chooses private keys; add keys: private")
        if self.key_policy == "private" and self.joint is not None:
            raise ValueError(f"joint: {self.joint} is for declared keys, not keys: private")
        if self.where is not None and self.joint is not None:
            raise ValueError(
                f"where: filters one table; joint: {self.joint} measures its tables together"
            )
        if "count_distinct" in self.measures and (
            self.margins or self.key_policy == "private" or self.joint is not None
        ):
            raise ValueError(
                "count_distinct: distinct units do not add up over groups, so it takes no "
                "margins, and it is for declared keys that are not joint"
            )
        if self.suppress is not None and "count" not in self.measures:
            raise ValueError(
                f"suppress: {{below: {self.suppress.below}}} withholds cells by their published "
                "count; add count to the measures"
            )
        if self.rounding_base is not None and not any(
            m == "count" or isinstance(m, SumModel) for m in self.measures
        ):
            raise ValueError(
                f"round: {self.round_label} rounds counts and sums, and this table has neither "
                "(means and quantiles are rounded to their precision anyway)"
            )
        return self

    @property
    def rounding_base(self) -> int | None:
        """The controlled rounding's base (None: no ``round:``)."""
        if isinstance(self.round, RoundModel):
            return self.round.base
        return 1 if self.round == "integer" else None

    @property
    def round_label(self) -> str:
        """``round:`` as written: ``integer``, ``{base: 5}`` or ``none``."""
        return self.round if isinstance(self.round, str) else f"{{base: {self.round.base}}}"

    def presentation(self) -> Presentation:
        return Presentation(
            caution=self.quality.caution,
            unreliable=self.quality.unreliable,
            suppress_below=None if self.suppress is None else self.suppress.below,
        )

    def key_models(self) -> list[KeyModel]:
        return [KeyModel(column=k) if isinstance(k, str) else k for k in self.by]

    def measure_list(self) -> tuple[Measure, ...]:
        out: list[Measure] = []
        for m in self.measures:
            if m in ("count", "count_distinct"):
                out.append(Measure(m))
            elif isinstance(m, CountModel):
                out.append(Measure("count_present", m.count))
            elif isinstance(m, VarianceModel):
                out.append(Measure("variance", m.variance))
            elif isinstance(m, StdModel):
                out.append(Measure("std", m.std))
            elif isinstance(m, SumModel):
                out.append(Measure("sum", m.sum))
            elif isinstance(m, MeanModel):
                out.append(Measure("mean", m.mean))
            elif isinstance(m, QuantileModel):
                out.append(Measure("quantile", m.quantile, tuple(m.at)))
        if len(set(out)) != len(out):
            raise ConfigError(f"table {self.name!r}: a measure is listed twice")
        return tuple(out)
