"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.731858,
    "blend_gap": 2.918043,
    "cosine_gap": 8.435586,
    "name_cosine_gap": 2.278802,
    "bm25_share": 1.597985,
    "idf_cover": 0.720151,
    "name_terms": -1.488476,
    "title_terms": 0.111546,
    "description_terms": -0.370616,
    "parameter_terms": 0.459912,
    "name_covered": 0.792807,
    "skill_named": 0.969618,
    "other_skill": -1.377987,
    "verb_agrees": 0.787058,
    "verb_differs": -0.873320,
    "reciprocal_rank": 0.830762,
    "feedback_cosine": -0.159760,
    "twin": 0.840033,
    "cover": 1.226749,
    "name_synonyms": 2.082579,
    "long_bm25_share": 1.117049,
    "long_cosine_gap": -4.896010,
}
