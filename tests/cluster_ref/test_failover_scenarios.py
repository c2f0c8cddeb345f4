"""tests/cluster's failover scenarios, unchanged, on our broker's cluster (see conftest).

The test functions are imported from the Apache Kafka modules, so both clusters run the
same steps and assertions; only the ``kafka_cluster`` fixture differs.
"""

from cluster.test_min_insync import (
    test_acks_all_waits_for_min_insync_replicas_acks_1_does_not,
)
from cluster.test_producer_failover import test_idempotent_producer_survives_leader_failure

__all__ = ["test_acks_all_waits_for_min_insync_replicas_acks_1_does_not",
           "test_idempotent_producer_survives_leader_failure"]
