"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.729525,
    "blend_gap": 2.848886,
    "cosine_gap": 8.553008,
    "name_cosine_gap": 2.278237,
    "bm25_share": 1.607042,
    "idf_cover": 0.556178,
    "name_terms": -1.394953,
    "title_terms": -0.038974,
    "description_terms": -0.365183,
    "parameter_terms": 0.470817,
    "name_covered": 0.836711,
    "skill_named": 0.995394,
    "other_skill": -1.408358,
    "verb_agrees": 0.839545,
    "verb_differs": -0.881960,
    "reciprocal_rank": 0.761415,
    "feedback_cosine": -0.108597,
    "twin": 0.807927,
    "cover": 1.591643,
    "name_synonyms": 2.314942,
    "long_bm25_share": 1.243188,
    "long_cosine_gap": -5.000306,
}
