"""The weights of gateway/abstain_model.py's logistic score, one per feature, its
operating point folded into the bias (the model says nothing fits above 0).

Written by ``PYTHONHASHSEED=0 python bench/numpy_only.py bench/abstain_learned.py
--sizes --target 0.025 --write``, which fits them on the seen queries no check
abstains on whose best cosine is within ``abstain_model.BAND`` of the length's
threshold (2079 queries, 192 of them unanswerable), the point
leaving 2.5% of the seen sets' answerable queries wrongly abstained on with the
checks; do not edit by hand.
"""

BIAS: float = 6.53775049
WEIGHTS: dict[str, float] = {
    "cosine": -13.8022985,
    "margin": 10.3935916,
    "cosine_gap2": -0.474069101,
    "cosine_gap5": -1.77285626,
    "blend": 0.287201847,
    "blend_gap2": -3.5855586,
    "blend_gap5": -3.07992249,
    "bm25_squashed": -3.83276358,
    "bm25_share": 0.275747592,
    "idf_cover": 1.2470121,
    "cover": -2.31566322,
    "name_covered": -0.948026236,
    "verb_agrees": 0.098110491,
    "verb_differs": -0.207464364,
    "object_agrees": 3.16518801,
    "object_differs": 2.25675219,
    "words": -2.3303042,
    "long": -0.917445365,
    "asks": 0.00349965175,
    "mentions": 1.38297202,
    "names_skill": -0.0265286757,
}
