"""tests/cluster's consumer-group failover scenario, unchanged, on our broker's cluster: the
coordinator (the leader of the group's ``__consumer_offsets`` partition) SIGKILLed while
three members read and commit; the group moves to the new leader, which rebuilt the groups
from its replica of the journal (see server_ref/cluster/coordinators.py)."""

from cluster.test_group_failover import test_group_survives_its_coordinator_killed

__all__ = ["test_group_survives_its_coordinator_killed"]
