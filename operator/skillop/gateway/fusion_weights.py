"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.776429,
    "blend_gap": 2.767047,
    "cosine_gap": 8.311539,
    "name_cosine_gap": 1.783014,
    "bm25_share": 0.977584,
    "idf_cover": 0.932307,
    "name_terms": -0.620971,
    "title_terms": -0.546663,
    "description_terms": -0.202693,
    "parameter_terms": 0.311649,
    "name_covered": 0.668375,
    "skill_named": 1.022635,
    "other_skill": -1.504356,
    "verb_agrees": 0.787313,
    "verb_differs": -0.817484,
    "reciprocal_rank": 0.922662,
    "feedback_cosine": -0.309884,
    "twin": 0.887147,
    "cover": 2.210633,
    "name_synonyms": 1.867042,
    "long_bm25_share": 1.415969,
    "long_cosine_gap": -4.040760,
    "kind_named": 2.110365,
    "object_agrees": 0.957921,
    "object_differs": -0.389896,
    "main_verb_agrees": 1.165173,
    "main_verb_differs": -0.943261,
}
