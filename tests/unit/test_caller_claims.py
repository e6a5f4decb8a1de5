"""The caller a token's claims name (model.caller)."""

from skillop.model.caller import ANONYMOUS, caller_from_claims


def test_subject_and_groups_come_from_the_claims_the_actor_names() -> None:
    caller = caller_from_claims({"email": "alice@example.com", "roles": ["sre", "dev", "sre"]},
                                subject_claim="email", groups_claim="roles", token="t0k")
    assert (caller.subject, caller.groups) == ("alice@example.com", ("sre", "dev"))
    assert caller.claims["roles"] == ["sre", "dev", "sre"]
    assert "t0k" not in repr(caller)


def test_a_single_group_string_is_one_group_and_other_values_are_none() -> None:
    assert caller_from_claims({"sub": "a", "groups": "sre"}).groups == ("sre",)
    assert caller_from_claims({"sub": "a", "groups": {"x": 1}}).groups == ()
    assert caller_from_claims({"sub": "a", "groups": ["x", 3]}).groups == ("x",)


def test_no_usable_subject_is_anonymous() -> None:
    for claims in ({}, {"sub": ""}, {"sub": 7}, {"sub": None}):
        assert caller_from_claims(claims) is ANONYMOUS
    assert ANONYMOUS.anonymous and not caller_from_claims({"sub": "a"}).anonymous
