"""Globally optimal full-domain generalization: a bounded search over the level lattice.

The lattice holds one node per combination of levels (one level per QI). A node is *admissible*
if the records of classes violating k (or l) -- the ones suppressed -- number at most the limit.
For k-anonymity and distinct-l diversity the suppressed count never grows along a lattice edge:
generalizing merges classes, and a record suppressed at a node is suppressed at every finer node.
So a node's count bounds those of all its predecessors from below, and a non-admissible node
proves its predecessors non-admissible (the monotonicity behind Flash, Kohlmayer et al. 2012, and
ARX). The metric with suppression is *not* monotone along edges, so scores are pruned only with
lower bounds: the score without suppression (which is monotone, see
:mod:`dp.anonymity.metrics`), tightened by the suppression inherited from the successors.

Search, in three steps:

1. Greedy descent from the top node (always admissible when ``n >= k``) along admissible
   predecessors with the best score: a cheap upper bound ``UB``.
2. Candidates are the nodes whose lower bound is below ``UB``. They are visited from the highest
   bound down (ties: higher nodes first), so every candidate successor of a node is visited
   before it and hands it a lower bound on its suppressed count, without counting its classes.
3. A candidate is counted only if that inherited bound neither exceeds the limit nor lifts the
   node's score bound to the best score so far.

The result is the exact optimum over the lattice (ties keep the first node found). Beyond the
exact-search limits only step 1 runs, and the result says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["Outcome", "exhaustive", "greedy", "optimal"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class _Ordered(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


# A score: a float, or a tuple compared lexicographically (ARX's "rank" aggregate).
S = TypeVar("S", bound=_Ordered)
# Evaluate a node (a tuple of levels): its suppressed count, and its score if admissible.
Evaluate = Callable[[tuple[int, ...]], tuple[int, S | None]]
# Tighten a node's score bound given a lower bound on its suppressed count.
Refine = Callable[[list[int], float, int], S]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome(Generic[S]):
    """Where a search ended."""

    levels: tuple[int, ...] | None
    """The best anonymous node found, or ``None`` if no node is anonymous."""
    score: S | None
    """Its score (``None`` if no node is anonymous)."""
    checked: int
    """Nodes whose classes were counted."""
    optimal: bool
    """Whether ``levels`` is proven optimal over the whole lattice."""


def lattice_nodes(heights: tuple[int, ...]) -> IntArray:
    """All nodes as an ``(N, d)`` array in mixed-radix order (the last attribute varies fastest)."""
    grids = np.meshgrid(*(np.arange(h) for h in heights), indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)


def greedy(
    heights: tuple[int, ...], evaluate: Evaluate[S]
) -> tuple[Outcome[S], dict[tuple[int, ...], tuple[int, S | None]]]:
    """Descend from the top node while some direct predecessor stays anonymous (best score first).

    Bounded: at most ``sum(h - 1) * d`` evaluations. Returns the outcome and every node seen.
    """
    seen: dict[tuple[int, ...], tuple[int, S | None]] = {}

    def look(node: tuple[int, ...]) -> S | None:
        if node not in seen:
            seen[node] = evaluate(node)
        return seen[node][1]

    current = tuple(h - 1 for h in heights)
    best_score = look(current)
    if best_score is None:
        return Outcome(levels=None, score=None, checked=len(seen), optimal=False), seen
    best = current
    while True:
        options: list[tuple[S, int, tuple[int, ...]]] = []
        for a, lvl in enumerate(current):
            if lvl > 0:
                pred = (*current[:a], lvl - 1, *current[a + 1 :])
                score = look(pred)
                if score is not None:
                    options.append((score, sum(pred), pred))
        if not options:
            break
        score, _, current = min(options)
        if score < best_score:
            best_score, best = score, current
    return Outcome(levels=best, score=best_score, checked=len(seen), optimal=False), seen


def optimal(
    heights: tuple[int, ...],
    evaluate: Evaluate[S],
    bounds: Callable[[IntArray], FloatArray],
    *,
    limit: int,
    monotone: bool,
    refine: Refine[S] | None = None,
    cutoff: Callable[[S], float] = float,  # type: ignore[assignment]
) -> Outcome[S]:
    """Exact search (module docstring).

    Args:
        heights: Levels per QI.
        evaluate: Counts a node's classes.
        bounds: Maps ``(N, d)`` nodes to score lower bounds that never decrease along edges.
        limit: The suppression limit.
        monotone: Whether suppressed counts never grow along edges (false for entropy-l).
        refine: ``(levels, bound, min_suppressed) -> score bound`` using a suppressed-count bound.
        cutoff: Maps a score to the scale of ``bounds``: a node can beat score ``s`` only if its
            bound is ``< cutoff(s)``. The identity for float scores; for vector scores, whose
            bounds are ordinals, the number of distinct bound vectors below ``s``.
    """
    start, seen = greedy(heights, evaluate)
    if start.levels is None and monotone:
        # The top node merges everything; if it is not admissible, no node is.
        return Outcome(levels=None, score=None, checked=start.checked, optimal=True)
    nodes = lattice_nodes(heights)
    lower = bounds(nodes)
    best_score, best = start.score, start.levels
    cut = math.inf if best_score is None else cutoff(best_score)
    candidates = np.flatnonzero(lower < cut)
    order = candidates[np.lexsort((-nodes[candidates].sum(axis=1), -lower[candidates]))]
    strides = np.cumprod((1, *heights[:0:-1]))[::-1].astype(np.int64)
    # Direct successors of each candidate; a missing one points at a sentinel slot (index N)
    # whose bound stays 0, so the hot loop needs no bounds test.
    top = np.array(heights, dtype=np.int64) - 1
    succ = np.where(nodes[order] < top, order[:, None] + strides, len(nodes))
    # Lower bound on each node's suppressed count (exact once counted); a plain list because
    # indexing it from Python is ~10x cheaper than indexing a numpy array.
    floor = [0] * (len(nodes) + 1)
    if monotone:
        for node, (suppressed, _) in seen.items():
            floor[int(np.dot(node, strides))] = suppressed
    checked = start.checked
    for idx, lb, levels, succs in zip(
        order.tolist(), lower[order].tolist(), nodes[order].tolist(), succ.tolist(), strict=True
    ):
        if not lb < cut:
            continue
        if monotone:
            least = floor[idx]
            for j in succs:
                if floor[j] > least:
                    least = floor[j]
            floor[idx] = least
            if least > limit:
                continue
            if (
                least
                and refine is not None
                and best_score is not None
                and not refine(levels, lb, least) < best_score
            ):
                continue
        key = tuple(levels)
        if key in seen:
            suppressed, score = seen[key]
        else:
            suppressed, score = evaluate(key)
            checked += 1
        if monotone:
            floor[idx] = suppressed
        if score is not None and (best_score is None or score < best_score):
            best_score, best = score, key
            cut = cutoff(score)
    return Outcome(levels=best, score=best_score, checked=checked, optimal=True)


def exhaustive(heights: tuple[int, ...], evaluate: Evaluate[S]) -> Outcome[S]:
    """Evaluate every node (reference implementation for tests and tiny lattices)."""
    best: tuple[int, ...] | None = None
    best_score: S | None = None
    nodes = lattice_nodes(heights)
    for levels in nodes.tolist():
        _, score = evaluate(tuple(levels))
        if score is not None and (best_score is None or score < best_score):
            best_score, best = score, tuple(levels)
    return Outcome(levels=best, score=best_score, checked=len(nodes), optimal=True)
