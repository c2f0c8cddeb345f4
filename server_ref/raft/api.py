"""The public face of the metadata quorum: what the controller and the brokers build on.

``server_ref.raft`` replicates one log, ``__cluster_metadata`` partition 0, among a static set
of voters (Kafka's ``controller.quorum.voters``) with Kafka's KRaft APIs: Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch (API 1) on the metadata partition, FetchSnapshot and
DescribeQuorum. Voters elect a leader; the leader is the active controller. Brokers run the
same node as *observers*: they fetch the log (Fetch with their replica id) but never vote.

Entries are opaque ``bytes`` (record values) to this layer; the owner of the state machine
(the controller) decides what they mean. Every node — leader, follower, observer — hands the
committed entries to its listener in log order, exactly once per process life, starting with
a replay of the snapshot and the log kept on disk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sdk.errors import NotControllerError

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0

# (host, port) of a voter's controller listener.
Endpoint = tuple[str, int]


def parse_voters(spec: str) -> dict[int, Endpoint]:
    """``"1@127.0.0.1:9093,2@127.0.0.1:9094"`` (Kafka's ``controller.quorum.voters``) →
    ``{1: ("127.0.0.1", 9093), 2: ...}``; a clear ``ValueError`` on bad input."""
    voters: dict[int, Endpoint] = {}
    for item in (part.strip() for part in spec.split(",")):
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not host or not node.strip().isdigit() or not port.isdigit():
            raise ValueError(f"controller.quorum.voters entry {item!r} is not id@host:port")
        node_id = int(node)
        if node_id in voters:
            raise ValueError(f"controller.quorum.voters names node {node_id} twice")
        voters[node_id] = (host.strip("[]"), int(port))
    if not voters:
        raise ValueError("controller.quorum.voters is empty")
    return voters


def format_voters(voters: dict[int, Endpoint]) -> str:
    """The inverse of :func:`parse_voters`."""
    return ",".join(f"{n}@{h}:{p}" for n, (h, p) in sorted(voters.items()))


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Kafka's ``controller.quorum.*`` settings (names in the comments), in milliseconds."""

    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms (randomized up to 2x)
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms: follower → candidate
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    fetch_max_wait_ms: int = 500  # how long the leader parks a Fetch with nothing new
    # (capped at half of fetch_timeout_ms: see fetch_wait_ms)
    max_fetch_bytes: int = 8 * 1024 * 1024  # per Fetch / FetchSnapshot answer
    cluster_id: str | None = None  # checked on Vote/Begin/End/Fetch when both sides set it
    fsync: bool = False  # fsync the log and quorum-state file on every write

    def __post_init__(self) -> None:
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms",
                     "max_fetch_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"RaftConfig.{name} must be > 0, not {getattr(self, name)}")
        for name in ("election_backoff_max_ms", "fetch_max_wait_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"RaftConfig.{name} must be >= 0, not {getattr(self, name)}")

    @property
    def fetch_wait_ms(self) -> int:
        """How long a follower's Fetch may be parked: at most half the fetch timeout, so a
        parked fetch comes back before the follower would give up on the leader."""
        return min(self.fetch_max_wait_ms, self.fetch_timeout_ms // 2)


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int | None  # None while no leader is known in ``epoch``
    epoch: int


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """One committed batch: the values of its data records, in order.

    Control records (LeaderChangeMessage, snapshot header/footer) are not delivered here;
    ``base_offset``/``last_offset`` still count them, so offsets have gaps."""

    base_offset: int
    last_offset: int
    epoch: int  # the leader epoch stamped in the batch
    append_time_ms: int
    records: list[bytes]


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica as DescribeQuorum describes it (-1 where unknown)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    leader_id: int | None
    epoch: int
    high_watermark: int
    voters: list[ReplicaInfo] = field(default_factory=list)
    observers: list[ReplicaInfo] = field(default_factory=list)


class RaftNotLeaderError(NotControllerError):
    """``append`` on a node that is not the leader (Kafka's NOT_CONTROLLER, code 41), naming
    the leader this node knows of, so the caller can forward or redirect."""

    def __init__(self, leader: LeaderAndEpoch, endpoint: Endpoint | None = None) -> None:
        where = f"node {leader.leader_id} at {endpoint}" if leader.leader_id is not None \
            else "no leader known"
        super().__init__(f"not the quorum leader in epoch {leader.epoch}; {where}")
        self.leader = leader
        self.endpoint = endpoint


class RaftClosedError(NotControllerError):
    """The node was closed (or lost leadership) before an ``append`` committed: the entries
    may or may not be in the log; the new leader's replay tells."""


# Listener signatures (all run on the node's event loop, must not block):
OnCommit = Callable[[CommittedBatch], None]
# (payload, last_offset): the state machine's snapshot including every entry up to
# ``last_offset``; replace the state with it, later commits continue after that offset.
OnSnapshot = Callable[[bytes, int], None]
OnLeaderChange = Callable[[LeaderAndEpoch], None]

# The RaftNode (server_ref/raft/node.py) offers, besides the constructor
#   RaftNode(node_id, voters, data_dir, config=RaftConfig(), *, is_voter=None, listen=None)
#   (is_voter defaults to ``node_id in voters``; listen=(host, port) to bind; voters bind
#   their own endpoint from ``voters`` by default):
#     async start() / async close()
#     leader() -> LeaderAndEpoch (the quorum's view, at once)
#     is_leader: bool  (leads AND its listeners have every entry from before its epoch;
#                       on_leader_change names this node at that same moment)
#     leader_endpoint() -> Endpoint | None
#     async append(records: list[bytes]) -> int   # last offset, once committed
#     register_listener(on_commit, on_snapshot=None, on_leader_change=None)
#     snapshot(last_offset: int, payload: bytes)  # then the log up to it may be deleted
#     high_watermark: int ; describe_quorum() -> QuorumInfo
#     async wait_for_leader(timeout_s) -> LeaderAndEpoch
#   and for extra APIs on the controller listener (BrokerRegistration, CreateTopics, ...):
#     node.server.register(api_key, min_version, max_version, handler)
#     handler(request, api_version) -> response message (or an awaitable of it)
