"""RaftNode: one member of the metadata quorum (a voter) or a reader of it (an observer).

One asyncio task drives the node's current role and is replaced at every transition
(``_gen`` counts them, so a task that caused a transition stops right after it): an
unattached voter waits for its election timeout, a candidate asks for votes, a follower or
observer fetches from the leader, the leader announces its epoch and checks it still has a
quorum. Requests from peers (``server_ref.handlers.raft``) call the ``on_*`` methods, which
may transition too. Committed entries reach the listeners from ``_deliver`` only, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from sdk.errors import (
    MalformedDataError,
)
from sdk.records.control import ControlType
from sdk.records.reader import RecordBatch, iter_batches
from server_ref.raft import wire
from server_ref.raft.api import (
    CommittedBatch,
    Endpoint,
    LeaderAndEpoch,
    OnCommit,
    OnLeaderChange,
    OnSnapshot,
    QuorumInfo,
    RaftClosedError,
    RaftConfig,
    RaftNotLeaderError,
)
from server_ref.raft.client import PeerClient, PeerUnavailableError
from server_ref.raft.log import OffsetAndEpoch, RaftLog
from server_ref.raft.prevote import PreVoting
from server_ref.raft.progress import LeaderProgress
from server_ref.raft.records import (
    LeaderChange,
    control_batch,
    data_batch,
    encode_leader_change,
    entry_values,
)
from server_ref.raft.server import ControllerServer
from server_ref.raft.serving import PeerRequests, now_ms
from server_ref.raft.snapshot import SnapshotId, SnapshotStore
from server_ref.raft.state import QuorumState, QuorumStateFile, Role

log = logging.getLogger("server_ref.raft")

LOG_DIR = "__cluster_metadata-0"
RETRY_BACKOFF_S = 0.05


class RaftNode(PreVoting, PeerRequests):
    def __init__(self, node_id: int, voters: dict[int, Endpoint], data_dir: str | Path,
                 config: RaftConfig | None = None, *, is_voter: bool | None = None,
                 listen: Endpoint | None = None) -> None:
        if not isinstance(node_id, int) or node_id < 0:
            raise ValueError(f"node id must be an int ≥ 0, not {node_id!r}")
        if not voters:
            raise ValueError("a quorum needs at least one voter")
        voter = node_id in voters
        if is_voter is not None and is_voter != voter:
            raise ValueError(f"node {node_id} is_voter={is_voter} but the voters are "
                             f"{sorted(voters)}")
        self.node_id = node_id
        self.voters = dict(voters)
        self.is_voter = voter
        self.config = config or RaftConfig()
        directory = Path(data_dir) / LOG_DIR
        self.log = RaftLog(directory, fsync=self.config.fsync)
        self.snapshots = SnapshotStore(directory, fsync=self.config.fsync)
        self.quorum = QuorumState(node_id, set(voters),
                                  QuorumStateFile(directory, fsync=self.config.fsync))
        self.server: ControllerServer | None = None
        if voter:
            host, port = listen or voters[node_id]
            self.server = ControllerServer(host, port)
            from server_ref.handlers.raft import register_raft_apis

            register_raft_apis(self.server, self)
        self._hw = 0
        self._applied = 0
        self._progress: LeaderProgress | None = None
        self._appends: list[tuple[int, asyncio.Future[int]]] = []
        self._changed = asyncio.Event()
        self._gen = 0
        self._role_task: asyncio.Task[None] | None = None
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._peers: dict[tuple[int, str], PeerClient] = {}
        self._on_commit: list[OnCommit] = []
        self._on_snapshot: list[OnSnapshot] = []
        self._on_leader: list[OnLeaderChange] = []
        self._started = False
        self._closed = False
        self._leader_known = asyncio.Event()
        self._leader_ready = False
        self._leader_seen = 0.0  # monotonic time of the last fetch the leader answered
        # Send time of the last Fetch the leader answered, and its high watermark then.
        self._fetch_ok_sent = -1.0
        self._fetch_ok_hw = 0

    # ================================================================== public API

    def register_listener(self, on_commit: OnCommit, on_snapshot: OnSnapshot | None = None,
                          on_leader_change: OnLeaderChange | None = None) -> None:
        if self._started:
            raise RuntimeError("register listeners before start(): they get the replay")
        self._on_commit.append(on_commit)
        if on_snapshot is not None:
            self._on_snapshot.append(on_snapshot)
        if on_leader_change is not None:
            self._on_leader.append(on_leader_change)

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("RaftNode already started")
        self._started = True
        self._changed = asyncio.Event()
        self._leader_known = asyncio.Event()
        self._leader_ready = False
        sid = self.snapshots.latest()
        if sid is not None:
            self.log.set_base(OffsetAndEpoch(sid.end_offset, sid.epoch))
            if self.log.end_offset < sid.end_offset or self.log.start_offset > sid.end_offset:
                self.log.reset_to(sid.end_offset)
            self._load_snapshot(sid, self.snapshots.payload(sid))
        else:
            self._applied = self._hw = self.log.start_offset
        if self.server is not None:
            await self.server.start()
        q = self.quorum
        if q.role is Role.FOLLOWER and q.leader_id is not None:
            self._become(self._run_follower)
            self._leader_changed()  # listeners learn what the quorum-state file knew
        elif self.is_voter and len(self.voters) == 1:
            self._start_election()
        else:
            self._become(self._run_unattached)
            self._leader_changed()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.quorum.role is Role.LEADER and len(self.voters) > 1:
            # Tell the others now rather than let them wait out the fetch timeout.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._send_end_epoch(), 1.0)
        self._gen += 1
        self._fail_appends(RaftClosedError("the quorum node closed"))
        tasks = [t for t in (self._role_task, *self._side_tasks) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.server is not None:
            await self.server.close()
        for peer in self._peers.values():
            await peer.close()
        self.log.close()

    def leader(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.quorum.leader_id, self.quorum.epoch)

    @property
    def is_leader(self) -> bool:
        """Leader, and its listeners have every entry from before its epoch: the state
        machine is current and may act (Kafka's controller becomes active at this point,
        when the leader change reaches its listener)."""
        return self.quorum.role is Role.LEADER and self._leader_ready

    @property
    def role(self) -> Role:
        return self.quorum.role

    @property
    def high_watermark(self) -> int:
        return self._hw

    def caught_up_since(self, t: float) -> bool:
        """Whether a Fetch sent at or after monotonic time ``t`` was answered by the
        quorum leader and everything committed as of that answer is applied: this node
        knows what the quorum decided before ``t`` (a broker back from a pause)."""
        if self.quorum.role is Role.LEADER:
            return True
        return self._fetch_ok_sent >= t and self._applied >= self._fetch_ok_hw

    def leader_endpoint(self) -> Endpoint | None:
        leader = self.quorum.leader_id
        return None if leader is None else self.voters.get(leader)

    async def wait_for_leader(self, timeout_s: float) -> LeaderAndEpoch:
        """Until a leader is known (``TimeoutError`` after ``timeout_s``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.quorum.leader_id is None:
            # The event is replaced whenever the leader becomes unknown again: re-read it.
            event = self._leader_known
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError(f"node {self.node_id}: no quorum leader within "
                                   f"{timeout_s}s (epoch {self.quorum.epoch})")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(event.wait(), min(left, 0.1))
        return self.leader()

    async def append(self, records: list[bytes]) -> int:
        """Append ``records`` as one batch; the last offset once committed."""
        if self._closed or not self._started:
            raise RaftClosedError("the quorum node is not running")
        if self.quorum.role is not Role.LEADER:
            raise RaftNotLeaderError(self.leader(), self.leader_endpoint())
        last = self._append_batch(data_batch(self.log.end_offset, self.quorum.epoch,
                                             list(records)))
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._appends.append((last, fut))
        self._leader_appended()
        return await fut

    def snapshot(self, last_offset: int, payload: bytes) -> SnapshotId:
        """Store the state machine's state through ``last_offset`` (applied, committed)
        and delete the log it covers."""
        if last_offset >= self._applied:
            raise ValueError(f"offset {last_offset} is not applied yet (applied below "
                             f"{self._applied}): snapshot only delivered entries")
        if last_offset < self.log.start_offset - 1:
            raise ValueError(f"offset {last_offset} is before the log start "
                             f"{self.log.start_offset}")
        sid = SnapshotId(last_offset + 1, self.log.epoch_of(last_offset))
        latest = self.snapshots.latest()
        if latest is not None and latest >= sid:
            return latest
        i = self.log.index_of(last_offset)
        entries = self.log.entries
        ts = entries[i].timestamp if i < len(entries) else now_ms()
        self.snapshots.write(sid, bytes(payload), ts)
        self.log.set_base(OffsetAndEpoch(sid.end_offset, sid.epoch))
        self.log.delete_before(sid.end_offset)
        return sid

    def describe_quorum(self) -> QuorumInfo:
        """The leader's view (other nodes know only the leader and the HW)."""
        if self._progress is not None:
            self._progress.update_leader(self.log.end_offset, now_ms())
            voters, observers = self._progress.describe()
        else:
            voters, observers = [], []
        return QuorumInfo(self.quorum.leader_id, self.quorum.epoch, self._hw, voters,
                          observers)

    # ================================================================== roles

    def _become(self, run: Callable[[int], Awaitable[None]]) -> None:
        self._gen += 1
        gen = self._gen
        old = self._role_task
        if self._closed:
            return
        self._role_task = asyncio.get_running_loop().create_task(self._guard(run, gen))
        if old is not None and old is not asyncio.current_task():
            old.cancel()
        self._changed.set()  # parked fetches re-check their leadership
        self._changed = asyncio.Event()

    async def _guard(self, run: Callable[[int], Awaitable[None]], gen: int) -> None:
        """Run a role; an unexpected error (a bug, a bad peer answer) is logged and the
        role runs again after a pause, rather than leaving the node without a driver."""
        while gen == self._gen:
            try:
                await run(gen)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("node %d: %s failed; retrying", self.node_id, run.__name__)
                await asyncio.sleep(RETRY_BACKOFF_S * 10)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    def _election_timeout_s(self) -> float:
        base = self.config.election_timeout_ms / 1000
        return base + random.uniform(0, base)

    def _leaving_leadership(self) -> None:
        self._leader_ready = False
        if self._progress is not None:
            self._progress = None
            self._fail_appends(RaftClosedError(
                f"node {self.node_id} lost the leadership of epoch {self.quorum.epoch}"))

    def _leader_changed(self) -> None:
        if self.quorum.role is Role.LEADER and not self._leader_ready:
            return  # told once the listeners caught up (_maybe_leader_ready)
        if self.quorum.leader_id is not None:
            self._leader_known.set()
        else:
            self._leader_known = asyncio.Event()
        current = self.leader()
        for cb in self._on_leader:
            try:
                cb(current)
            except Exception:
                log.exception("on_leader_change listener failed")

    def observe(self, epoch: int, leader_id: int | None) -> bool:
        """A peer told of ``epoch`` and its leader: adopt it if newer. True if it changed
        this node's role (the caller's task is then stale)."""
        q = self.quorum
        if leader_id is not None and leader_id < 0:
            leader_id = None
        if epoch > q.epoch:
            self._leaving_leadership()
            if leader_id is not None and leader_id != self.node_id:
                q.to_follower(epoch, leader_id)
                self._become(self._run_follower)
            else:
                q.to_unattached(epoch)
                self._become(self._run_unattached)
            self._leader_changed()
            return True
        if (epoch == q.epoch and leader_id is not None and leader_id != self.node_id
                and q.leader_id is None and q.role is not Role.LEADER):
            q.to_follower(epoch, leader_id)
            self._become(self._run_follower)
            self._leader_changed()
            return True
        return False

    def _start_election(self) -> None:
        self._leaving_leadership()
        self.quorum.to_candidate()
        log.info("node %d stands in epoch %d", self.node_id, self.quorum.epoch)
        if len(self.quorum.granted) >= self.quorum.majority:
            self._become_leader()
        else:
            self._become(self._run_candidate)
            self._leader_changed()

    async def _run_unattached(self, gen: int) -> None:
        if not self.is_voter:
            await self._run_discover(gen)
            return
        await asyncio.sleep(self._election_timeout_s())
        if gen == self._gen:
            self._stand()

    async def _run_candidate(self, gen: int) -> None:
        q = self.quorum
        epoch = q.epoch
        last_epoch, end = self.log.last_epoch, self.log.end_offset
        for voter in self.voters:
            if voter != self.node_id:
                self._spawn(self._ask_vote(gen, voter, epoch, last_epoch, end))
        await asyncio.sleep(self._election_timeout_s())
        if gen != self._gen:
            return
        # No majority in time (split vote or unreachable peers): back off, stand again.
        await asyncio.sleep(random.uniform(0, self.config.election_backoff_max_ms / 1000))
        if gen == self._gen:
            self._start_election()

    async def _ask_vote(self, gen: int, voter: int, epoch: int, last_epoch: int,
                        end_offset: int) -> None:
        request = wire.vote_request(self.config.cluster_id, voter, self.node_id, epoch,
                                    last_epoch, end_offset)
        while gen == self._gen:
            try:
                response = await self._call(voter, "control", request, wire.VOTE_VERSION)
            except PeerUnavailableError:
                await asyncio.sleep(RETRY_BACKOFF_S * 4)
                continue
            if gen != self._gen:
                return
            answer = wire.read_vote_response(response)
            if answer.error and answer.epoch <= epoch and answer.error != wire.FENCED_EPOCH:
                await asyncio.sleep(RETRY_BACKOFF_S * 4)
                continue
            if self.observe(answer.epoch, answer.leader_id):
                return
            if self.quorum.record_vote(voter, answer.granted) and \
                    self.quorum.role is Role.CANDIDATE:
                self._become_leader()
            return

    # ------------------------------------------------------------------ leader

    def _become_leader(self) -> None:
        q = self.quorum
        q.to_leader()
        log.info("node %d leads epoch %d", self.node_id, q.epoch)
        start = self.log.end_offset
        self._progress = LeaderProgress(self.node_id, set(self.voters), start, self._hw)
        change = LeaderChange(self.node_id, sorted(self.voters), sorted(q.granted))
        self._append_batch(control_batch(start, q.epoch, ControlType.LEADER_CHANGE,
                                         encode_leader_change(change)))
        self._become(self._run_leader)
        self._leader_changed()  # the listeners hear "no leader" until it is ready
        self._leader_appended()
        self._maybe_leader_ready()

    def _maybe_leader_ready(self) -> None:
        """Once every entry before this epoch's LeaderChange record is delivered, the
        listeners learn that this node leads (as KafkaRaftClient fires handleLeaderChange
        for the local leader only after its listener caught up to the epoch start)."""
        p = self._progress
        if p is not None and not self._leader_ready and self._applied > p.epoch_start_offset:
            self._leader_ready = True
            self._leader_changed()

    def _append_batch(self, batch: bytes) -> int:
        entry = self.log.append(batch, expected_epoch=self.quorum.epoch)
        return entry.last_offset

    def _leader_appended(self) -> None:
        progress = self._progress
        if progress is not None and progress.update_leader(self.log.end_offset, now_ms()):
            self._set_hw(progress.high_watermark)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _run_leader(self, gen: int) -> None:
        epoch = self.quorum.epoch
        for voter in self.voters:
            if voter != self.node_id:
                self._spawn(self._announce(gen, voter, epoch))
        if len(self.voters) == 1:
            return
        # Check-quorum: a leader that hears from no majority within 1.5 fetch timeouts
        # (paused, cut off) resigns, so it stops answering as the controller.
        window = self.config.fetch_timeout_ms * 1.5
        since = now_ms()
        while gen == self._gen:
            await asyncio.sleep(self.config.fetch_timeout_ms / 2000)
            progress = self._progress
            if gen != self._gen or progress is None:
                return
            t = now_ms()
            if t - since >= window and \
                    progress.fetched_within(int(t - window)) < self.quorum.majority:
                log.warning("node %d resigns epoch %d: no quorum fetched within %d ms",
                            self.node_id, epoch, window)
                self._resign()
                return

    def _resign(self) -> None:
        self._leaving_leadership()
        self.quorum.to_resigned()
        self._become(self._run_unattached)
        self._leader_changed()

    async def _announce(self, gen: int, voter: int, epoch: int) -> None:
        """BeginQuorumEpoch until the voter acknowledges (or fetches)."""
        request = wire.begin_epoch_request(self.config.cluster_id, voter, self.node_id,
                                           epoch, self.voters[self.node_id])
        while gen == self._gen:
            progress = self._progress
            if progress is not None and progress.voters[voter].last_fetch_ms >= 0:
                return
            try:
                response = await self._call(voter, "control", request,
                                            wire.BEGIN_EPOCH_VERSION)
            except PeerUnavailableError:
                await asyncio.sleep(RETRY_BACKOFF_S * 4)
                continue
            error, r_epoch, r_leader = wire.read_epoch_response(response)
            if gen != self._gen or self.observe(r_epoch, r_leader):
                return
            if not error:
                return
            await asyncio.sleep(RETRY_BACKOFF_S * 4)

    async def _send_end_epoch(self) -> None:
        q = self.quorum
        successors = [v for v in self.voters if v != self.node_id]
        request = wire.end_epoch_request(self.config.cluster_id, self.node_id, q.epoch,
                                         successors)
        calls = [self._call(v, "control", request, wire.END_EPOCH_VERSION)
                 for v in successors]
        await asyncio.gather(*calls, return_exceptions=True)

    def _fail_appends(self, error: Exception) -> None:
        pending, self._appends = self._appends, []
        for _last, fut in pending:
            if not fut.done():
                fut.set_exception(error)

    # ------------------------------------------------------------------ follower, observer

    async def _run_follower(self, gen: int) -> None:
        leader = self.quorum.leader_id
        assert leader is not None
        last_ok = time.monotonic()
        timeout_s = self.config.fetch_timeout_ms / 1000
        while gen == self._gen:
            try:
                ok = await self._fetch_once(gen, leader)
            except PeerUnavailableError as exc:
                log.debug("fetch from %d failed: %s", leader, exc)
                ok = False
                await asyncio.sleep(RETRY_BACKOFF_S)
            if gen != self._gen:
                return
            if ok:
                last_ok = self._leader_seen = time.monotonic()
            elif time.monotonic() - last_ok > timeout_s:
                if self.is_voter:
                    log.info("node %d: no fetch from leader %d for %.1fs", self.node_id,
                             leader, timeout_s)
                    self._stand()
                else:
                    self._become(self._run_discover)
                return

    async def _run_discover(self, gen: int) -> None:
        """An observer without a leader asks the voters in turn until one names it."""
        order = list(self.voters)
        random.shuffle(order)
        i = 0
        while gen == self._gen:
            voter = order[i % len(order)]
            i += 1
            try:
                await self._fetch_once(gen, voter)
            except PeerUnavailableError:
                pass
            if gen != self._gen:
                return
            await asyncio.sleep(RETRY_BACKOFF_S * 2)

    async def _fetch_once(self, gen: int, target: int) -> bool:
        """One Fetch to ``target``; True if it answered as the leader of our epoch."""
        q = self.quorum
        cfg = self.config
        request = wire.fetch_request(
            cfg.cluster_id, self.node_id, q.epoch, self.log.end_offset, self.log.last_epoch,
            self.log.start_offset, cfg.fetch_wait_ms, cfg.max_fetch_bytes)
        sent = time.monotonic()
        response = await self._call(target, "fetch", request, wire.FETCH_VERSION,
                                    timeout_s=(cfg.fetch_wait_ms
                                               + cfg.request_timeout_ms) / 1000)
        if gen != self._gen:
            return False
        part = wire.read_fetch_response(response)
        if part is None:
            return False
        leader = part.current_leader
        if self.observe(leader.leader_epoch, leader.leader_id):
            return False
        if part.error_code:
            return False
        div = part.diverging_epoch
        if div.epoch >= 0 or div.end_offset >= 0:
            self._truncate_diverging(div.epoch, div.end_offset)
            return True
        if part.snapshot_id.end_offset >= 0:
            sid = SnapshotId(part.snapshot_id.end_offset, part.snapshot_id.epoch)
            await self._download_snapshot(gen, target, sid)
            return True
        if part.records:
            self._append_fetched(part.records)
        self._set_hw(min(part.high_watermark, self.log.end_offset))
        self._fetch_ok_sent, self._fetch_ok_hw = sent, part.high_watermark
        return True

    def _truncate_diverging(self, epoch: int, end_offset: int) -> None:
        local = self.log.end_offset_for_epoch(epoch)
        target = min(end_offset, local.offset) if local.epoch == epoch else \
            min(end_offset, max(local.offset, self.log.start_offset))
        if target < self._applied:
            log.error("node %d: leader asks to truncate to %d below the committed %d",
                      self.node_id, target, self._applied)
            target = self._applied
        log.info("node %d truncates its log from %d to %d (diverging epoch %d)",
                 self.node_id, self.log.end_offset, target, epoch)
        self.log.truncate_to(target)

    def _append_fetched(self, records: bytes) -> None:
        for batch in iter_batches(records):
            if not isinstance(batch, RecordBatch):
                raise MalformedDataError("metadata batches are record batch v2")
            if batch.last_offset < self.log.end_offset:
                continue
            if batch.base_offset != self.log.end_offset:
                log.warning("node %d: fetched batch at %d, log ends at %d", self.node_id,
                            batch.base_offset, self.log.end_offset)
                return
            self.log.append(batch.to_bytes())

    async def _download_snapshot(self, gen: int, target: int, sid: SnapshotId) -> None:
        position = 0
        while gen == self._gen:
            request = wire.fetch_snapshot_request(self.config.cluster_id, self.node_id,
                                                  self.quorum.epoch, sid, position,
                                                  self.config.max_fetch_bytes)
            response = await self._call(target, "fetch", request,
                                        wire.FETCH_SNAPSHOT_VERSION)
            part = wire.read_fetch_snapshot_response(response)
            if part is None or part.error_code:
                return
            position = self.snapshots.write_part(sid, part.position,
                                                 part.unaligned_records or b"")
            if position >= part.size:
                payload = self.snapshots.finish_part(sid)
                self.log.set_base(OffsetAndEpoch(sid.end_offset, sid.epoch))
                self.log.reset_to(sid.end_offset)
                log.info("node %d installed snapshot %s", self.node_id, sid)
                self._load_snapshot(sid, payload)
                return

    def _load_snapshot(self, sid: SnapshotId, payload: bytes) -> None:
        self._applied = max(self._applied, sid.end_offset)
        self._hw = max(self._hw, sid.end_offset)
        for cb in self._on_snapshot:
            try:
                cb(payload, sid.end_offset - 1)
            except Exception:
                log.exception("on_snapshot listener failed")

    # ------------------------------------------------------------------ commit, delivery

    def _set_hw(self, hw: int) -> None:
        if hw > self._hw:
            self._hw = hw
            self._deliver()
            self._wake()

    def _deliver(self) -> None:
        hw = self._hw
        # Read first: a listener may call snapshot(), which rewrites the log file.
        ready = list(self.log.batches(self._applied, hw))
        for entry, data in ready:
            if entry.last_offset >= hw:
                break
            if entry.last_offset < self._applied:
                continue
            # Applied before the listeners run, so one may snapshot through this batch.
            self._applied = entry.last_offset + 1
            values = entry_values(RecordBatch(data))
            if values:
                batch = CommittedBatch(entry.base_offset, entry.last_offset, entry.epoch,
                                       entry.timestamp, values)
                for cb in self._on_commit:
                    try:
                        cb(batch)
                    except Exception:
                        log.exception("on_commit listener failed at offset %d",
                                      entry.base_offset)
        if self._appends:
            done = [(last, f) for last, f in self._appends if last < self._applied]
            if done:
                self._appends = [(last, f) for last, f in self._appends
                                 if last >= self._applied]
                for last, fut in done:
                    if not fut.done():
                        fut.set_result(last)
        self._maybe_leader_ready()

    # ------------------------------------------------------------------ peers

    async def _call(self, node: int, purpose: str, request: object, version: int,
                    timeout_s: float | None = None) -> object:
        key = (node, purpose)
        peer = self._peers.get(key)
        if peer is None:
            host, port = self.voters[node]
            peer = self._peers[key] = PeerClient(host, port, f"raft-{self.node_id}")
        t = self.config.request_timeout_ms / 1000 if timeout_s is None else timeout_s
        return await peer.call(request, version, t)  # type: ignore[arg-type]
