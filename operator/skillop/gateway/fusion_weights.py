"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.587286,
    "blend_gap": 2.703171,
    "cosine_gap": 8.679272,
    "name_cosine_gap": 2.470678,
    "bm25_share": 1.486788,
    "idf_cover": 0.695137,
    "name_terms": -1.222676,
    "title_terms": -0.116089,
    "description_terms": -0.089962,
    "parameter_terms": 0.511904,
    "name_covered": 0.769567,
    "skill_named": 1.056438,
    "other_skill": -1.494907,
    "verb_agrees": 0.873455,
    "verb_differs": -0.917581,
    "reciprocal_rank": 0.807422,
    "feedback_cosine": -0.348191,
    "twin": 0.861378,
    "cover": 1.588692,
    "name_synonyms": 2.072868,
    "long_bm25_share": 1.308334,
    "long_cosine_gap": -5.239761,
    "kind_named": 2.221160,
}
