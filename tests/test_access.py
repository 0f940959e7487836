"""Roles and actions: one table decides, and the action's own check refuses whatever a page showed."""

import pytest

from gpu.core.access import NEEDS, Actor, Role, require
from gpu.core.errors import AccessRefused, PinPointError


@pytest.mark.parametrize("role", list(Role))
def test_each_role_may_do_what_its_rank_allows_and_nothing_above(role):
    actor = Actor("ada@example.org", role)
    for action, needed in NEEDS.items():
        assert actor.may(action) == (role >= needed), action
        if role >= needed:
            require(actor, action)
        else:
            with pytest.raises(AccessRefused, match=f"{action.replace('_', ' ')} needs the {needed.word} role"):
                require(actor, action)


def test_a_refusal_names_the_actor_and_is_a_pinpoint_error():
    with pytest.raises(PinPointError, match="ada@example.org is a viewer"):
        require(Actor("ada@example.org", Role.VIEWER), "trash")


def test_unknown_actions_and_sources_are_errors_not_permissions():
    with pytest.raises(KeyError):
        require(Actor.local(), "drop_tables")
    with pytest.raises(ValueError, match="not 'browser'"):
        Actor("x", Role.ADMIN, source="browser")


def test_the_local_actor_is_user_at_host_from_the_given_source():
    actor = Actor.local("fleet")
    assert "@" in actor.who and actor.source == "fleet" and actor.role is Role.ADMIN
