"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``PYTHONHASHSEED=0 python bench/numpy_only.py bench/disclosure_cv.py
--write``, which fits them on the seen query sets; do not edit by hand. Only the order
they make counts (the score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.624050,
    "blend_gap": 2.682760,
    "cosine_gap": 8.451531,
    "name_cosine_gap": 2.323426,
    "bm25_share": 1.412376,
    "idf_cover": 0.643890,
    "name_terms": -0.858847,
    "title_terms": -0.364697,
    "description_terms": -0.117794,
    "parameter_terms": 0.504398,
    "name_covered": 0.691128,
    "skill_named": 1.041885,
    "other_skill": -1.493345,
    "verb_agrees": 0.883260,
    "verb_differs": -0.926944,
    "reciprocal_rank": 0.795475,
    "feedback_cosine": -0.323576,
    "twin": 0.867664,
    "cover": 1.898502,
    "name_synonyms": 2.247455,
    "long_bm25_share": 1.209831,
    "long_cosine_gap": -4.856681,
    "kind_named": 2.011107,
    "object_agrees": 0.952910,
    "object_differs": -0.375476,
}
