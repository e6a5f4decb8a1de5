"""The learned "nothing fits" (gateway/abstain_model.py): its evidence is read from the
tools a caller may see only, any text gives a finite row, the shipped weights cover
every feature, and with the real sentence model a request no tool answers abstains
while one a tool answers does not."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillop.gateway import abstain_model, abstain_weights
from skillop.gateway.fusion import Evidence, ToolTerms
from skillop.gateway.search import Document, query_terms

np = pytest.importorskip("numpy")

_THINGS = ["issue", "branch", "message", "channel", "file", "pipeline", "ticket"]
_TOOLS = st.lists(
    st.tuples(st.sampled_from(["github", "slack", "fs"]),
              st.sampled_from(["create", "delete", "list", "post", "get"]),
              st.sampled_from(_THINGS), st.floats(-1, 1), st.floats(0, 20)),
    min_size=1, max_size=12)
_QUERIES = st.builds(lambda verb, thing, tail: f"{verb} a {thing}{tail}",
                     st.sampled_from(["create", "delete", "rename", "post", "bake"]),
                     st.sampled_from([*_THINGS, "cake"]),
                     st.sampled_from(["", " in GitHub", " on Slack", " for the team today"]))


def _row(query: str, tools: list[tuple[str, str, str, float, float]],
         hidden: set[int]) -> list[float]:
    """The model's row for ``query`` over ``tools`` (skill, verb, thing, cosine, BM25),
    those numbered ``hidden`` at minus infinity as the search leaves them."""
    docs = [Document(f"{skill}/{n}", f"{verb}_{thing}", skill=skill,
                     description=f"{verb.title()} a {thing}.")
            for n, (skill, verb, thing, _, _) in enumerate(tools)]
    cosine = np.asarray([c for *_, c, _ in tools], dtype=np.float32)
    bm25 = np.asarray([b for *_, b in tools], dtype=np.float32)
    blended = (0.75 * cosine + 0.25 * bm25 / (bm25 + 8.0)).astype(np.float32)
    gone = sorted(hidden)
    cosine[gone] = -math.inf
    blended[gone] = -math.inf
    vectors = np.eye(len(tools), dtype=np.float32)
    plain = Evidence(blended, cosine.copy(), cosine.copy(), bm25, vectors)
    weighted = query_terms(query)
    idf = dict.fromkeys(weighted, 1.0)
    return abstain_model.row(query, cosine, plain, below=0.2, weighted=weighted, idf=idf,
                             tools=docs, words=[ToolTerms.of(d) for d in docs], skills=())


@settings(max_examples=200, deadline=None)
@given(_TOOLS, _QUERIES, st.data())
def test_tools_hidden_from_a_caller_never_change_the_answer(
        tools: list[tuple[str, str, str, float, float]], query: str,
        data: st.DataObject) -> None:
    """The model's evidence with some tools hidden is that of a set without them,
    however close the hidden ones are and whatever they do."""
    hidden = data.draw(st.sets(st.integers(0, len(tools) - 1), max_size=len(tools) - 1))
    shown = [tool for n, tool in enumerate(tools) if n not in hidden]
    with_hidden = _row(query, tools, hidden)
    assert with_hidden == pytest.approx(_row(query, shown, set()))
    assert abstain_model.nothing_fits(with_hidden) == abstain_model.nothing_fits(
        _row(query, shown, set()))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300), _TOOLS)
def test_any_text_gives_a_finite_row_and_a_verdict(
        query: str, tools: list[tuple[str, str, str, float, float]]) -> None:
    values = _row(query, tools, set())
    assert len(values) == len(abstain_model.FEATURES)
    assert all(math.isfinite(v) for v in values)
    assert isinstance(abstain_model.nothing_fits(values), bool)



def test_a_set_whose_every_tool_is_hidden_leaves_nothing_to_read() -> None:
    tools = [("github", "create", "issue", 0.9, 5.0)]
    assert all(math.isfinite(v) for v in _row("create an issue", tools, {0}))


@settings(max_examples=100, deadline=None)
@given(_TOOLS, st.data())
def test_the_sets_size_is_the_count_of_the_tools_a_caller_may_see(
        tools: list[tuple[str, str, str, float, float]], data: st.DataObject) -> None:
    """A set of 20 tools is read as 20 whatever else the server holds for others (and
    one smaller than any fitted as the smallest)."""
    tools = tools * 3
    hidden = data.draw(st.sets(st.integers(0, len(tools) - 1), max_size=len(tools) - 1))
    values = _row("create an issue", tools, hidden)
    size = values[abstain_model.FEATURES.index("tools")]
    seen = max(len(tools) - len(hidden), abstain_model.SMALLEST_FITTED)
    assert size == pytest.approx(math.log(seen))


def test_a_set_larger_than_any_fitted_is_read_as_the_largest() -> None:
    tools = [("github", "create", "issue", 0.1, 1.0)] * (abstain_model.LARGEST_FITTED + 100)
    values = _row("create an issue", tools, set())
    size = values[abstain_model.FEATURES.index("tools")]
    assert size == pytest.approx(math.log(abstain_model.LARGEST_FITTED))


def test_the_shipped_weights_cover_every_feature_and_nothing_else() -> None:
    assert set(abstain_weights.WEIGHTS) == set(abstain_model.FEATURES)
    assert math.isfinite(abstain_weights.BIAS)


def test_a_much_closer_best_tool_never_makes_a_request_abstain() -> None:
    """Everything else equal, a best cosine well over the threshold is answered where a
    far lower one abstains (the model weighs the best cosine as the threshold did)."""
    tools = [("github", "create", "issue", 0.0, 0.0), ("slack", "post", "message", 0.0, 0.0)]
    far = _row("bake a cake", [(*tools[0][:3], 0.05, 0.0), tools[1]], set())
    near = _row("bake a cake", [(*tools[0][:3], 0.9, 0.0), tools[1]], set())
    assert abstain_model.score(near) < abstain_model.score(far)
    assert abstain_model.nothing_fits(far) and not abstain_model.nothing_fits(near)


@pytest.mark.parametrize(("cosine", "says", "weak"), [
    (0.95, True, False),  # far over the threshold: answered whatever the model says
    (0.01, False, True),  # far under it: nothing fits whatever the model says
    (0.4, True, True),  # near it: the model decides
    (0.4, False, False),
])
def test_the_model_decides_only_near_the_threshold(
        monkeypatch: pytest.MonkeyPatch, cosine: float, says: bool, weak: bool) -> None:
    from skillop.gateway.search import SearchIndex, abstain_below

    monkeypatch.setattr(abstain_model, "nothing_fits", lambda values: says)
    query = "show the first tool"
    assert abs(abstain_below(query) - 0.4) < abstain_model.BAND
    docs = [Document("a", "first_tool"), Document("b", "second_tool")]
    texts = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    wanted = np.array([cosine, -(1 - cosine**2) ** 0.5], dtype=np.float32)
    index = SearchIndex(docs)
    index.attach_vectors(texts, lambda text: wanted)
    assert index.find(query, limit=2).weak is weak
