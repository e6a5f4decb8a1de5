"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.593180,
    "blend_gap": 2.719114,
    "cosine_gap": 8.620203,
    "name_cosine_gap": 2.398207,
    "bm25_share": 1.419417,
    "idf_cover": 0.694349,
    "name_terms": -1.228659,
    "title_terms": 0.026066,
    "description_terms": -0.183978,
    "parameter_terms": 0.439738,
    "name_covered": 0.725258,
    "skill_named": 1.059960,
    "other_skill": -1.499744,
    "verb_agrees": 0.917693,
    "verb_differs": -0.964035,
    "reciprocal_rank": 0.832924,
    "feedback_cosine": -0.338390,
    "twin": 0.853240,
    "cover": 1.717823,
    "name_synonyms": 2.011614,
    "long_bm25_share": 1.328579,
    "long_cosine_gap": -5.175440,
    "kind_named": 2.231169,
    "object_agrees": 0.990132,
    "object_differs": -0.383108,
}
