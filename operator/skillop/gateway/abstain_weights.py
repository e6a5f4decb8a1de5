"""The weights of gateway/abstain_model.py's logistic score, one per feature, its
operating point folded into the bias (the model says nothing fits above 0).

Written by ``PYTHONHASHSEED=0 python bench/numpy_only.py bench/abstain_learned.py
--sizes --target 0.025 --write``, which fits them on the seen queries no check
abstains on whose best cosine is within ``abstain_model.BAND`` of the length's
threshold (2074 queries, 187 of them unanswerable), the point
leaving 2.5% of the seen sets' answerable queries wrongly abstained on with the
checks; do not edit by hand.
"""

BIAS: float = 6.55074595
WEIGHTS: dict[str, float] = {
    "cosine": -13.0352438,
    "margin": 10.2072429,
    "cosine_gap2": -0.368638811,
    "cosine_gap5": -1.91246422,
    "blend": -0.37972684,
    "blend_gap2": -3.740832,
    "blend_gap5": -2.65420105,
    "bm25_squashed": -3.80332627,
    "bm25_share": 0.309972773,
    "idf_cover": 1.19093642,
    "cover": -2.38705956,
    "name_covered": -0.953960601,
    "verb_agrees": 0.112247312,
    "verb_differs": -0.228596999,
    "object_agrees": 3.1213147,
    "object_differs": 2.17195097,
    "words": -2.29985084,
    "long": -0.883804722,
    "asks": 0.0089968974,
    "mentions": 1.47698237,
    "names_skill": -0.0909486916,
    "tools": 0.0,
}
