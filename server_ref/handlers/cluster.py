"""DescribeCluster; DescribeProducers (InitProducerId is in ``transactions.py``)."""

from __future__ import annotations

from sdk.errors import InvalidRequestError, UnknownTopicOrPartitionError
from sdk.protocol.messages.describe_cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from sdk.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from server_ref.handlers import RequestContext, handles
from server_ref.handlers.metadata import CLUSTER_OPERATIONS, UNREQUESTED_OPERATIONS

BROKER_ENDPOINT = 1


@handles(60, 0, 1)
def describe_cluster(ctx: RequestContext, req: DescribeClusterRequest
                     ) -> DescribeClusterResponse:
    b = ctx.broker
    host, port = b.endpoint(ctx.listener)
    if b.cluster is not None and req.endpoint_type == BROKER_ENDPOINT:
        from server_ref.cluster.views import describe_cluster as cluster_view

        return cluster_view(ctx, req)
    if ctx.api_version >= 1 and req.endpoint_type != BROKER_ENDPOINT:
        return DescribeClusterResponse(
            error_code=InvalidRequestError.errno, endpoint_type=req.endpoint_type,
            error_message=f"endpoint type {req.endpoint_type} is not served by this broker")
    return DescribeClusterResponse(
        cluster_id=b.cluster_id, controller_id=b.node_id, endpoint_type=BROKER_ENDPOINT,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(
            broker_id=b.node_id, host=host, port=port, rack=None)],
        cluster_authorized_operations=(
            CLUSTER_OPERATIONS if req.include_cluster_authorized_operations
            else UNREQUESTED_OPERATIONS))


@handles(61, 0, 0)
def describe_producers(ctx: RequestContext, req: DescribeProducersRequest
                       ) -> DescribeProducersResponse:
    """The producers a partition remembers. ``last_timestamp`` is when the broker last
    appended for the producer; a producer with an open transaction on the partition shows
    its first offset. The coordinator epoch is the last marker's, -1 before any (as Kafka)."""
    topics = []
    for topic in req.topics:
        results = []
        for index in topic.partition_indexes:
            result = DescribeProducersResponse.PartitionResponse(partition_index=index)
            partition = ctx.broker.topics.partition(topic.name, index)
            if partition is None:
                result.error_code = UnknownTopicOrPartitionError.errno
            else:
                open_txns = partition.log.ongoing_transactions()
                result.active_producers = [
                    DescribeProducersResponse.ProducerState(
                        producer_id=pid, producer_epoch=entry.epoch,
                        last_sequence=entry.last_sequence, last_timestamp=entry.last_seen_ms,
                        coordinator_epoch=entry.coordinator_epoch,
                        current_txn_start_offset=open_txns.get(pid, -1))
                    for pid, entry in sorted(partition.producers.entries.items())]
            results.append(result)
        topics.append(DescribeProducersResponse.TopicResponse(name=topic.name,
                                                              partitions=results))
    return DescribeProducersResponse(topics=topics)
