"""Private-PGM through the `mbi` package (McKenna, Sheldon & Miklau 2019), behind one module.

mbi 2.0 (the optional extra ``dppub[synth]``) fits a graphical model to noisy marginals
(``MirrorDescent``) and samples rows from it; everything private (the exact answers, noise,
selection, accounting) stays in dppub. mbi and JAX are imported on first use only: a dppub
without the extra runs every other kind, and ``import dp`` stays free of JAX.

What mbi would do slowly is done here in numpy: a candidate's marginal under the model is one
``einsum`` over the exponentiated potentials (mbi's own ``project`` of a clique outside the
model compiles an XLA program per clique, about a second each), and sampling seeds and restores
numpy's global generator around mbi's ``synthetic_data`` (which draws from it).
"""

from __future__ import annotations

import importlib.util
import math
import string
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dppub.dp.errors import ConfigError

__all__ = [
    "Clique",
    "check_installed",
    "combined",
    "fit",
    "model_marginal",
    "model_size",
    "require_mbi",
    "sample",
]

Clique = tuple[str, ...]
FloatArray = npt.NDArray[np.float64]

MISSING = (
    "synthetic data needs the optional extra: pip install 'dppub[synth]' "
    "(mbi>=2.0,<2.1 and JAX; {error})"
)


def check_installed(release: str) -> None:
    """ConfigError naming ``release`` unless the extra's modules can be found, without
    importing them (JAX takes seconds to load): a plan checks this before anything is
    reserved."""
    for name in ("jax", "mbi"):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken install, or a parent that is no package
            found = False
        if not found:
            raise ConfigError(f"{release}: {MISSING.format(error=f'no module named {name!r}')}")


def require_mbi() -> Any:
    """The `mbi` module, with JAX in float64 (mbi warns in float32); ConfigError if missing."""
    try:
        import jax

        config: Any = jax.config
        config.update("jax_enable_x64", True)
        # mbi compiles many small programs; a persistent cache only costs (mbi's own advice).
        config.update("jax_enable_compilation_cache", False)
        import mbi
    except ImportError as exc:
        raise ConfigError(MISSING.format(error=exc)) from None
    return mbi


def _domain(domain: Mapping[str, int]) -> Any:
    mbi = require_mbi()
    return mbi.Domain(tuple(domain), tuple(int(n) for n in domain.values()))


def model_size(domain: Mapping[str, int], cliques: Sequence[Clique]) -> float:
    """The model's size in MB: cells of the junction tree's maximal cliques, 8 bytes each."""
    mbi = require_mbi()
    return float(mbi.junction_tree.hypothetical_model_size(_domain(domain), list(cliques)))


def fit(
    domain: Mapping[str, int],
    measurements: Sequence[tuple[Clique, FloatArray, float]],
    *,
    iters: int,
    warm_start: Any = None,
) -> Any:
    """Private-PGM's estimate from ``(clique, noisy counts, noise std)`` measurements (the
    total estimated from them, minimum variance), warm-started from a previous model."""
    mbi = require_mbi()
    meas = [mbi.LinearMeasurement(y, cl, stddev=sigma) for cl, y, sigma in combined(measurements)]
    return mbi.estimation.MirrorDescent().estimate(
        _domain(domain), meas, iters=iters, warm_start=warm_start
    )


def combined(
    measurements: Sequence[tuple[Clique, FloatArray, float]],
) -> list[tuple[Clique, FloatArray, float]]:
    """One measurement per clique, in the order of first appearance: a clique measured ``k``
    times (``y_i``, std ``s_i``) becomes their inverse-variance weighted mean, std
    ``(sum 1/s_i^2)^-1/2``. Private-PGM's loss ``sum_i |x - y_i|^2 / (2 s_i^2)`` is the merged
    term's plus a constant, and the total's estimate the same, so the fit is unchanged; but
    the jitted program's key is the list of measured cliques, so re-measuring a clique reuses
    the program compiled for it (post-processing of the noisy values)."""
    sums: dict[Clique, tuple[FloatArray, float]] = {}
    for cl, y, sigma in measurements:
        w = 1.0 / float(sigma) ** 2
        values = np.asarray(y, dtype=np.float64) * w
        if cl in sums:
            weighted, weight = sums[cl]
            values, w = weighted + values, weight + w
        sums[cl] = (values, w)
    return [(tuple(cl), v / w, 1.0 / math.sqrt(w)) for cl, (v, w) in sums.items()]


def model_marginal(model: Any, clique: Clique) -> FloatArray:
    """The model's marginal counts on ``clique`` (flattened, C order), by numpy variable
    elimination over the exponentiated log-potentials, normalised to the model's total."""
    attrs = tuple(model.domain.attributes)
    if len(attrs) > len(string.ascii_letters):
        raise ConfigError(f"synthetic data supports at most 52 columns, got {len(attrs)}")
    letter = dict(zip(attrs, string.ascii_letters, strict=False))
    operands: list[FloatArray] = []
    subscripts: list[str] = []
    covered: set[str] = set()
    for factor in model.potentials.tables.values():
        values = np.asarray(factor.values, dtype=np.float64)
        operands.append(np.exp(values - values.max()))
        subscripts.append("".join(letter[a] for a in factor.domain.attributes))
        covered |= set(factor.domain.attributes)
    for a in clique:
        if a not in covered:  # an attribute no potential mentions: a uniform factor
            operands.append(np.ones(model.domain[a]))
            subscripts.append(letter[a])
    out = "".join(letter[a] for a in clique)
    m = np.einsum(",".join(subscripts) + "->" + out, *operands, optimize="greedy")
    return np.asarray(m / m.sum() * float(model.total), dtype=np.float64).ravel()


def sample(model: Any, rows: int, seed: int) -> dict[str, npt.NDArray[np.int64]]:
    """``rows`` rows (codes per attribute) by mbi's randomized rounding, seeded; numpy's global
    generator, which mbi draws from, is restored afterwards."""
    # mbi samples from numpy's legacy global generator; no Generator can be passed in.
    state = np.random.get_state()  # noqa: NPY002
    try:
        np.random.seed(seed)  # noqa: NPY002
        data = model.synthetic_data(rows=max(1, int(rows)))
    finally:
        np.random.set_state(state)  # noqa: NPY002
    columns = data.to_dict()
    return {a: np.asarray(columns[a], dtype=np.int64) for a in model.domain.attributes}
