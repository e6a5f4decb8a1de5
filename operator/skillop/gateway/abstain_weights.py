"""The weights of gateway/abstain_model.py's logistic score, one per feature, its
operating point folded into the bias (the model says nothing fits above 0).

Written by ``PYTHONHASHSEED=0 python bench/numpy_only.py bench/abstain_learned.py
--sizes --target 0.025 --write``, which fits them on the seen queries no check
abstains on whose best cosine is within ``abstain_model.BAND`` of the length's
threshold (2079 queries, 192 of them unanswerable), the point
leaving 2.5% of the seen sets' answerable queries wrongly abstained on with the
checks; do not edit by hand.
"""

BIAS: float = 6.53775059
WEIGHTS: dict[str, float] = {
    "cosine": -13.8022963,
    "margin": 10.393592,
    "cosine_gap2": -0.47404932,
    "cosine_gap5": -1.7728722,
    "blend": 0.287200367,
    "blend_gap2": -3.58556248,
    "blend_gap5": -3.07991699,
    "bm25_squashed": -3.83276362,
    "bm25_share": 0.275747654,
    "idf_cover": 1.24701203,
    "cover": -2.315663,
    "name_covered": -0.948026189,
    "verb_agrees": 0.0981104884,
    "verb_differs": -0.207464377,
    "object_agrees": 3.16518797,
    "object_differs": 2.25675209,
    "words": -2.33030423,
    "long": -0.917445305,
    "asks": 0.00349964582,
    "mentions": 1.38297199,
    "names_skill": -0.026528661,
}
