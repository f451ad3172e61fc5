"""Numerics shared by the privacy core: exact sums and the declared domains they rely on.

* :mod:`~dp.numerics.fixedpoint`: quantise per-row values on a ``2^-16`` grid of their declared
  bounds, sum them exactly as integers, round once (regression, clustering, the engine's folds);
* :mod:`~dp.numerics.domains`: declared feature boxes or balls (with one-hot blocks) and target
  intervals, and the clip into them.
"""
