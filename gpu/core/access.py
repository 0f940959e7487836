"""Who may do what: the three roles, the least role each action needs, and the actor an action is done by.

One table (``NEEDS``) answers both questions a page asks (show this control, or disable it with the reason?) and
the one an action asks before it changes anything (``require``): the check lives in the action, so a control the
browser should not have shown refuses all the same. The actor is also what the audit trail records: who (the
signed-in e-mail, or ``user@host`` for the command line), with which role, from where (app, CLI, fleet).
"""

from __future__ import annotations

import enum
import getpass
import socket
from dataclasses import dataclass

from gpu.core.errors import AccessRefused


class Role(enum.IntEnum):
    """Ordered: each role may do everything the ones below it may."""

    VIEWER = 1   # read every page, replay, Compare, reports, the Fleet page
    MEMBER = 2   # also measure live, import runs and label them
    ADMIN = 3    # also trash, restore and purge runs, read the audit trail, cancel anyone's job, migrate

    @property
    def word(self) -> str:
        return self.name.lower()


# The least role each action needs.
NEEDS: dict[str, Role] = {
    "view": Role.VIEWER,
    "measure": Role.MEMBER,
    "import": Role.MEMBER,
    "label": Role.MEMBER,
    "trash": Role.ADMIN,
    "replace": Role.ADMIN,  # an import that replaces a stored run moves that run to the trash: the trash's role
    "restore": Role.ADMIN,
    "purge": Role.ADMIN,
    "audit": Role.ADMIN,
    "cancel_any": Role.ADMIN,
    "migrate": Role.ADMIN,
}

SOURCES = ("app", "cli", "fleet")


@dataclass(frozen=True)
class Actor:
    """Who does an action: ``who`` is recorded in the audit trail, ``role`` decides what is allowed."""

    who: str
    role: Role
    source: str = "app"

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"an actor's source is one of {', '.join(SOURCES)}, not {self.source!r}")

    @classmethod
    def local(cls, source: str = "cli") -> Actor:
        """The person at this machine's own shell (or a loopback-only app): the OS user at this host, an admin,
        as database credentials already decide what a shell may write."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return cls(f"{user}@{socket.gethostname()}", Role.ADMIN, source)

    def may(self, action: str) -> bool:
        return self.role >= NEEDS[action]

    def why_not(self, action: str) -> str | None:
        """None when allowed, else the one line a disabled control or a refusal shows."""
        if self.may(action):
            return None
        return f"{action.replace('_', ' ')} needs the {NEEDS[action].word} role; {self.who} is a {self.role.word}"


def require(actor: Actor, action: str) -> None:
    """Raise AccessRefused unless ``actor`` may do ``action``: called by the action itself, before any change."""
    if action not in NEEDS:
        raise KeyError(f"unknown action {action!r}")
    reason = actor.why_not(action)
    if reason:
        raise AccessRefused(reason)
