"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {"blend": 1.0}
