"""The weights of gateway/fusion.py's linear score, one per feature.

Written by ``python bench/numpy_only.py bench/disclosure_cv.py --write``, which fits them
on the seen query sets; do not edit by hand. Only the order they make counts (the
score has no threshold): the blend alone is weight 1 on "blend".
"""

WEIGHTS: dict[str, float] = {
    "blend": 6.958954,
    "blend_gap": 2.936740,
    "cosine_gap": 7.937440,
    "name_cosine_gap": 1.750179,
    "bm25_share": 1.018161,
    "idf_cover": 0.680065,
    "name_terms": -0.795502,
    "title_terms": -0.556154,
    "description_terms": -0.005409,
    "parameter_terms": 0.319371,
    "name_covered": 0.651371,
    "skill_named": 1.021242,
    "other_skill": -1.500640,
    "verb_agrees": 0.865058,
    "verb_differs": -0.906970,
    "reciprocal_rank": 0.883248,
    "feedback_cosine": -0.212221,
    "twin": 0.875595,
    "cover": 2.534938,
    "name_synonyms": 1.876184,
    "long_bm25_share": 1.383372,
    "long_cosine_gap": -4.399358,
    "kind_named": 2.177639,
    "object_agrees": 0.913396,
    "object_differs": -0.375742,
    "main_verb_agrees": 1.148233,
    "main_verb_differs": -0.937385,
}
