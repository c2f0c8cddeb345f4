"""Share groups on the reference broker (KIP-932): ``coordinator.py`` (groups, sessions,
timers, journal), ``partition.py`` (per-record delivery state of a share-partition),
``group.py`` (membership and the assignor), ``journal.py`` (``__share_group_state``),
``group_configs.py`` (the GROUP config resource)."""

from __future__ import annotations

from server_ref.share.coordinator import ShareCoordinator

__all__ = ["ShareCoordinator"]
