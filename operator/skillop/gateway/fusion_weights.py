"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.764338,
    "blend_gap": 2.960195,
    "cosine_gap": 8.497132,
    "name_cosine_gap": 2.252941,
    "bm25_share": 1.601016,
    "idf_cover": 0.721721,
    "name_terms": -1.542110,
    "title_terms": 0.118861,
    "description_terms": -0.365670,
    "parameter_terms": 0.464632,
    "name_covered": 0.809842,
    "skill_named": 0.965043,
    "other_skill": -1.374116,
    "verb_agrees": 0.789444,
    "verb_differs": -0.874910,
    "reciprocal_rank": 0.820816,
    "feedback_cosine": -0.201961,
    "twin": 0.847992,
    "cover": 1.227472,
    "name_synonyms": 1.927658,
    "long_bm25_share": 1.129442,
    "long_cosine_gap": -4.921043,
}
