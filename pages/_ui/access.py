"""The person at this page: ``current_actor()`` is who every action on the page is done by, and is checked.

Served on the loopback address only, the app is the machine owner's own tool: the actor is the OS user, an admin.
"""

from __future__ import annotations

from gpu.core.access import Actor


def current_actor() -> Actor:
    return Actor.local(source="app")
