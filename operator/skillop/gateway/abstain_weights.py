"""The weights of gateway/abstain_model.py's logistic score, one per feature, its
operating point folded into the bias (the model says nothing fits above 0).

Written by ``PYTHONHASHSEED=0 python bench/numpy_only.py bench/abstain_learned.py
--target 0.025 --write``, which fits them on the seen queries no check abstains on
whose best cosine is at most ``abstain_model.BAND`` over the length's threshold and
``BAND_UNDER`` under it, over all the recorded tools and random subsets of 15, 60, 200
of them, the skills named by their servers (29141 rows, 2931 unanswerable); the
point leaves 2.5% of the answerable queries wrongly abstained on with the
checks, chosen at each size
(a line in the log of the size). Do not edit by hand.
"""

BIAS: float = 8.32050582
WEIGHTS: dict[str, float] = {
    "cosine": -23.947856,
    "margin": 20.5123454,
    "cosine_gap2": 0.0700134777,
    "cosine_gap5": -3.25589727,
    "blend": -0.829738443,
    "blend_gap2": -0.31476566,
    "blend_gap5": -2.47621156,
    "bm25_squashed": -2.66062885,
    "bm25_share": 0.293094544,
    "idf_cover": 0.395276751,
    "cover": -1.75586386,
    "name_covered": -1.0103245,
    "verb_agrees": -0.137254404,
    "verb_differs": 0.0597128112,
    "object_agrees": 2.87866675,
    "object_differs": 2.96004637,
    "words": -4.5707461,
    "long": -0.373403202,
    "asks": -0.0954407857,
    "mentions": 1.63429611,
    "names_skill": 0.479570591,
    "tools": 0.290572194,
}
