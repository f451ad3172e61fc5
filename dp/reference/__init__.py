"""Reference implementations used by tests and benchmarks, never by a release.

Nothing in `dp/` outside this package, `tasks/` or `flows/` imports it (`tests/test_layering.py`);
it may import the foundations, the privacy core and data access only.

* :mod:`~dp.reference.frame_anonymity`: k-anonymity on an in-memory frame (the streaming engine's
  release must equal it bit for bit), with l-diversity;
* :mod:`~dp.reference.mondrian`: Mondrian local recoding (benchmarked against other tools);
* :mod:`~dp.reference.histogram`: a declared-domain histogram of an in-memory frame;
* :mod:`~dp.reference.frame_regression`, :mod:`~dp.reference.frame_kmeans`: the DP models fitted on
rows
  in memory (the engine's fits must equal them bit for bit), and their predictions;
* :mod:`~dp.reference.empirical_privacy`: the tests' black-box privacy auditor;
* :mod:`~dp.reference.frame`: a whole table in one frame (:func:`~dp.reference.frame.read_table`),
  through the streaming validator.
"""
