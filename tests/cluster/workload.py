"""A paced, keyed producer workload that runs in a thread while a test breaks the cluster.

Both faces run the same loop: the blocking ``Producer`` directly in the thread, the
``AsyncProducer`` in an event loop of its own (``asyncio.run`` in the thread). Every record
carries an ``on_delivery`` callback and its future is kept (see :mod:`.checker`); one in ten
has a header, so it takes the producer's general path instead of the staged one and the
two paths interleave on the same partitions.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from sdk import AsyncProducer, Producer

from .checker import History

KEYS = 48  # spread over the partitions by murmur2


class ProducerWorkload:
    def __init__(self, face: str, bootstrap: str, topic: str, *, count: int, rate: float,
                 flush_timeout_s: float = 120.0, **settings: Any) -> None:
        if face not in ("sync", "async"):
            raise ValueError(f"face is 'sync' or 'async', not {face!r}")
        self.face = face
        self.topic = topic
        self.count = count
        self.rate = rate
        self.flush_timeout_s = flush_timeout_s
        self.settings = {"bootstrap_servers": bootstrap, **settings}
        self.history = History()
        self.sent = 0
        self.error: BaseException | None = None
        self.flush_error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"workload-{face}", daemon=True)

    def start(self) -> ProducerWorkload:
        self._thread.start()
        return self

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"the {self.face} producer workload did not finish in "
                               f"{timeout_s} s (sent {self.sent} of {self.count})")
        if self.error is not None:
            raise self.error

    def wait_sent(self, n: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.sent < n:
            if self.error is not None:
                raise self.error
            if time.monotonic() > deadline:
                raise TimeoutError(f"sent {self.sent} of {n} records in {timeout_s} s")
            time.sleep(0.01)

    # ------------------------------------------------------------------ the loops

    def _main(self) -> None:
        try:
            if self.face == "sync":
                self._run_sync()
            else:
                asyncio.run(self._run_async())
        except BaseException as exc:
            self.error = exc

    def _record(self, seq: int) -> tuple[bytes, bytes, Any, list[tuple[str, bytes]] | None]:
        key = f"k{seq % KEYS}".encode()
        record = self.history.sent(seq, key)
        headers = [("seq", str(seq).encode())] if seq % 10 == 0 else None
        return key, str(seq).encode(), record, headers

    def _pause_s(self, seq: int, started: float) -> float:
        """How long to wait after record ``seq`` to keep the rate (every 10 records)."""
        if seq % 10:
            return 0.0
        return max(0.0, started + (seq + 1) / self.rate - time.monotonic())

    def _run_sync(self) -> None:
        p = Producer(**self.settings)
        try:
            started = time.monotonic()
            for seq in range(self.count):
                key, value, record, headers = self._record(seq)
                record.future = p.send(self.topic, value, key=key, headers=headers,
                                       on_delivery=self.history.callback_for(record))
                self.sent = seq + 1
                time.sleep(self._pause_s(seq, started))
            try:
                p.flush(timeout=self.flush_timeout_s)
            except Exception as exc:  # reported by the test with the checker's verdict
                self.flush_error = exc
        finally:
            p.close(timeout=10)

    async def _run_async(self) -> None:
        p = AsyncProducer(**self.settings)
        await p.start()
        try:
            started = time.monotonic()
            for seq in range(self.count):
                key, value, record, headers = self._record(seq)
                record.future = await p.send(self.topic, value, key=key, headers=headers,
                                             on_delivery=self.history.callback_for(record))
                self.sent = seq + 1
                pause = self._pause_s(seq, started)
                if pause or seq % 10 == 0:
                    await asyncio.sleep(pause)
            try:
                await p.flush(timeout=self.flush_timeout_s)
            except Exception as exc:
                self.flush_error = exc
        finally:
            await p.close(timeout=10)
