"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.720278,
    "blend_gap": 2.729590,
    "cosine_gap": 8.631294,
    "name_cosine_gap": 1.878573,
    "bm25_share": 1.178438,
    "idf_cover": 0.716087,
    "name_terms": -0.613196,
    "title_terms": -0.468101,
    "description_terms": -0.232600,
    "parameter_terms": 0.307054,
    "name_covered": 0.614364,
    "skill_named": 1.061507,
    "other_skill": -1.561322,
    "verb_agrees": 0.804073,
    "verb_differs": -0.823383,
    "reciprocal_rank": 0.868888,
    "feedback_cosine": -0.311537,
    "twin": 0.903344,
    "cover": 2.210563,
    "name_synonyms": 2.161991,
    "long_bm25_share": 1.390099,
    "long_cosine_gap": -4.237415,
    "kind_named": 2.105844,
    "object_agrees": 0.956790,
    "object_differs": -0.392607,
    "main_verb_agrees": 1.090513,
    "main_verb_differs": -0.898998,
}
