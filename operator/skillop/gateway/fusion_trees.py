# ruff: noqa: E501, RUF100
"""The trees of gateway/ranker.py, added to the linear score of gateway/fusion.py.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets after the linear weights; do not edit by hand. Each tree: its
split at each level (feature, threshold), then its leaves' values, leaf number the
bits of the levels' answers (1: above the threshold), the first level's the highest.
"""

SPLITS: tuple[tuple[tuple[str, float], ...], ...] = ()

LEAVES: tuple[tuple[float, ...], ...] = ()
