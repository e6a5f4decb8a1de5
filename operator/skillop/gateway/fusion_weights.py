"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.624332,
    "blend_gap": 2.691544,
    "cosine_gap": 8.472837,
    "name_cosine_gap": 2.220643,
    "bm25_share": 1.407738,
    "idf_cover": 0.678958,
    "name_terms": -0.822923,
    "title_terms": -0.407319,
    "description_terms": -0.107670,
    "parameter_terms": 0.500235,
    "name_covered": 0.667694,
    "skill_named": 1.061491,
    "other_skill": -1.521227,
    "verb_agrees": 0.740391,
    "verb_differs": -0.777090,
    "reciprocal_rank": 0.816272,
    "feedback_cosine": -0.344991,
    "twin": 0.881291,
    "cover": 1.835426,
    "name_synonyms": 2.139785,
    "long_bm25_share": 1.175002,
    "long_cosine_gap": -4.815315,
    "kind_named": 2.052594,
    "object_agrees": 0.963142,
    "object_differs": -0.379541,
    "main_verb_agrees": 1.143567,
    "main_verb_differs": -0.937044,
}
