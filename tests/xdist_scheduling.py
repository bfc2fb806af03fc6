"""`--dist loadgroup` with the groups of tests/balance.py: a module under tests/api/ is one unit
of work, every other test a unit of its own, handed out in the workers' (longest first) order.

Imported only by the xdist controller (conftest's `pytest_xdist_make_scheduler`), so a checkout
without pytest-xdist still runs the suite serially.
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling

from tests import balance


class BalancedGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist is untyped
    """xdist's loadgroup, with the groups named by path rather than by `xdist_group` marks."""

    def _split_scope(self, nodeid: str) -> str:
        group = balance.group_of(nodeid)
        return group if group is not None else str(super()._split_scope(nodeid))
