"""``release.json``, typed: what every release states about itself, written once and read back
once (:meth:`dp.pipeline.kinds.base.ReleaseSummary.to_json` and ``from_json``), and its JSON
Schema (:func:`release_file_schema`, committed as ``docs/release.schema.json``).

Its ``details`` are the kind's own :class:`Result` (a pydantic model per kind, sharing the fields
every release may state); the schema's ``details`` is their union, told apart by ``kind``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar, Union, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializationInfo,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    create_model,
    model_serializer,
)

__all__ = [
    "PartFile",
    "PrivacyUnit",
    "ReleaseFile",
    "Result",
    "Stated",
    "UnitGuarantee",
    "release_file_schema",
]

_FROZEN = ConfigDict(
    extra="forbid",
    frozen=True,
    validate_by_name=True,
    validate_by_alias=True,
    serialize_by_alias=True,
)
"""Frozen, no unknown field; a field may have another name in the file than in Python (its
alias: a table's ``keys`` are its ``key_columns``)."""


class Stated(BaseModel):
    """A frozen statement in ``release.json``: a field whose value is None is left out of the
    file, unless the model names it in :attr:`keep_null` (a statement that something is
    absent)."""

    model_config = _FROZEN

    keep_null: ClassVar[frozenset[str]] = frozenset()
    """Fields written as ``null`` when None (the others are left out)."""

    @model_serializer(mode="wrap")
    def _drop_nulls(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        return {k: v for k, v in out.items() if v is not None or k in self.keep_null}

    def to_json(self) -> dict[str, JsonValue]:
        """Its JSON, as ``release.json`` holds it."""
        out: dict[str, JsonValue] = self.model_dump(mode="json")
        return out


class PrivacyUnit(Stated):
    """The privacy unit a release's guarantee is stated for (:mod:`dp.pipeline.units`)."""

    column: str = Field(description="The unit's column.")
    max_rows_per_unit: int = Field(ge=1, description="The bound on one unit's rows.")
    max_partitions_per_unit: int | None = Field(
        default=None, ge=1, description="The bound on the partitions one unit's rows span."
    )
    sensitivity: float | None = Field(
        default=None, description="A unit-level mechanism's sensitivity (all of a unit's rows)."
    )
    row_level_rho: float | None = Field(default=None, description="The rho one row costs.")
    row_level_epsilon: float | None = Field(
        default=None, description="The epsilon the mechanism runs at for one row."
    )
    row_level_delta: float | None = None
    note: str = Field(description="How the unit-level cost follows from the row-level one.")


class UnitGuarantee(Stated):
    """A release's own statement of its guarantee: the unit-level cost for its neighbours
    and, with a privacy unit, the unit (:func:`dp.pipeline.units.zcdp_unit_statement`)."""

    epsilon: float = Field(ge=0)
    delta: float = Field(ge=0, le=1)
    zcdp_rho: float | None = Field(default=None, ge=0)
    neighbours: str | None = None
    privacy_unit: PrivacyUnit | None = None


class Result(Stated):
    """A kind's typed, frozen account of one computed release (public values only): its
    ``release.json``'s ``details``. A kind's result subclasses it, adding its own fields.

    The fields every release may state are here, under one name each (the run's zCDP total and
    the budget table read them typed); the mechanism is ``release.json``'s own ``mechanism``.
    """

    zcdp_rho: float | None = Field(
        default=None, ge=0, description="The unit-level rho-zCDP its noise satisfies, if proven."
    )
    accounting: str | None = Field(
        default=None, description="How its cost was accounted, where the kind says (zCDP...)."
    )
    privacy_unit: PrivacyUnit | None = Field(
        default=None, description="The unit its guarantee is stated for, and its bounds."
    )


class PartFile(BaseModel):
    """One of a release's costs as composition sees them (a disjoint partition it spans)."""

    model_config = _FROZEN

    name: str = Field(description="The part's name in the ledger (``release[label]``).")
    epsilon: float = Field(ge=0)
    delta: float = Field(ge=0, le=1)
    partition: tuple[str, str] | None = Field(
        description="The column and value its rows have, or null for the whole table."
    )


ResultT = TypeVar("ResultT", bound=Result)


class ReleaseFile(BaseModel, Generic[ResultT]):
    """A release's ``release.json``: written when it completed, read back by a later attempt
    of the run (which reuses it, never recomputes it), the manifest and both reports.
    ``ReleaseFile[R]`` reads a kind whose result is ``R``."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="release.json")

    name: str = Field(description="Unique within the run; the release's folder name.")
    kind: str = Field(description="Its kind's label (``workload``, ``k-anonymity``...).")
    mechanism: str = Field(description="What the ledger records (``laplace``...).")
    epsilon: float = Field(ge=0, description="Its own epsilon; 0 for a non-DP release.")
    delta: float = Field(ge=0, le=1)
    is_dp: bool = Field(description="False for a syntactic release (a k-anonymous table).")
    sensitivity: float | None = Field(
        description="The L1 sensitivity the noise was calibrated to, where one number says it."
    )
    parts: list[PartFile] = Field(
        description="Its costs per disjoint partition; empty for one whole-table part."
    )
    files: list[str] = Field(description="Released files, relative to the run folder.")
    output_hash: str = Field(description="SHA-256 of the release's files.")
    neighbours: str = Field(
        default="one row", description="The neighbouring relation its guarantee is stated for."
    )
    details: SerializeAsAny[ResultT] = Field(
        description="The kind's typed result: public facts (strategy, expected error...)."
    )


def release_file_schema(results: Mapping[str, type[Result]]) -> dict[str, Any]:
    """The JSON Schema of ``release.json`` for the kinds ``results`` names (label -> its
    result model): one :class:`ReleaseFile` per kind, told apart by ``kind``."""
    files: list[Any] = []
    for label, model in results.items():
        kind: Any = Literal[label]  # one label per kind: what tells the files apart
        named = getattr(model, "__name__", None) or "Or".join(m.__name__ for m in get_args(model))
        files.append(
            create_model(
                f"{named}File",
                __base__=ReleaseFile[model],  # type: ignore[valid-type]
                kind=(kind, Field(description="Its kind's label.")),
            )
        )
    union: Any = Annotated[Union[tuple(files)], Field(discriminator="kind")]  # noqa: UP007
    adapter: TypeAdapter[Any] = TypeAdapter(union)
    schema: dict[str, Any] = adapter.json_schema()
    schema["title"] = "release.json"
    return schema
