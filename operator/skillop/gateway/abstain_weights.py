"""The weights of gateway/abstain_model.py's logistic score, one per feature, its
operating point folded into the bias (the model says nothing fits above 0).

Written by ``PYTHONHASHSEED=0 python bench/numpy_only.py bench/abstain_learned.py
--sizes --target 0.025 --write``, which fits them on the seen query sets whose
queries no check abstains on (4477 queries, 290 of them unanswerable), the point
leaving 2.5% of the seen sets' answerable queries wrongly abstained on with the
checks; do not edit by hand.
"""

BIAS: float = 5.76552247
WEIGHTS: dict[str, float] = {
    'cosine': -13.5878462,
    'margin': 10.157571,
    'cosine_gap2': -4.6972122,
    'cosine_gap5': 4.67892202,
    'blend': -1.78117825,
    'blend_gap2': -3.90190072,
    'blend_gap5': -2.05874888,
    'bm25_squashed': -1.89334387,
    'bm25_share': 0.287142603,
    'idf_cover': 0.918963647,
    'cover': -2.26475427,
    'name_covered': -0.87193321,
    'verb_agrees': -0.157412531,
    'verb_differs': 0.161673326,
    'object_agrees': 2.64038508,
    'object_differs': 2.30259793,
    'words': -2.19236372,
    'long': -0.745966293,
    'asks': -0.0927809466,
    'mentions': 1.52822977,
    'names_skill': 0.464127011,
}
