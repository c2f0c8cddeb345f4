"""Helpers for the broker-core tests: a broker on the test's own event loop (``Served``), a
raw Kafka-protocol client (the SDK's sans-IO framing over asyncio streams) and batch builders."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sdk.protocol.framing import ClientFraming
from sdk.protocol.message import Message
from sdk.records.builder import RecordBatchBuilder
from sdk.records.reader import RecordBatch, iter_batches
from server_ref.broker import Broker
from server_ref.config import BrokerConfig
from server_ref.handlers import REGISTRY
from server_ref.server import KafkaServer, start_broker, stop_broker

IO_TIMEOUT = 15.0


class WireClient:
    """One connection; ``call`` sends a request and waits for its response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.framing = ClientFraming(client_id="broker-tests")
        self._ready: list[tuple[int, Message]] = []

    @classmethod
    async def open(cls, host: str, port: int) -> WireClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    @staticmethod
    def version_for(request: Message, version: int | None) -> int:
        if version is not None:
            return version
        registration = REGISTRY.get(request.API_KEY)
        return registration.max_version if registration else request.MAX_VERSION

    async def send(self, request: Message, version: int | None = None, *,
                   expect_response: bool = True) -> int:
        cid, data = self.framing.encode_request(request, self.version_for(request, version),
                                                expect_response=expect_response)
        self.writer.write(data)
        await self.writer.drain()
        return cid

    async def receive(self) -> tuple[int, Message]:
        while not self._ready:
            data = await asyncio.wait_for(self.reader.read(1 << 20), IO_TIMEOUT)
            if not data:
                raise ConnectionError("broker closed the connection")
            self._ready.extend(self.framing.feed(data))
        return self._ready.pop(0)

    async def call(self, request: Message, version: int | None = None) -> Any:
        cid = await self.send(request, version)
        got, response = await self.receive()
        assert got == cid, f"response {got} arrived for request {cid}"
        return response

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def closed_by_peer(self, timeout: float = IO_TIMEOUT) -> bool:
        """True once the broker closes the connection (reading discards any data)."""
        try:
            while True:
                data = await asyncio.wait_for(self.reader.read(1 << 16), timeout)
                if not data:
                    return True
        except (ConnectionError, OSError):
            return True
        except TimeoutError:
            return False

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


class Served:
    """A broker plus its server on the running loop, with a data directory that survives
    ``restart``."""

    def __init__(self, data_dir: Path, properties: dict[str, Any], **options: Any) -> None:
        self.data_dir = data_dir
        self.properties = properties
        self.options = options
        self.port = 0
        self.broker: Broker | None = None
        self.server: KafkaServer | None = None
        self.clients: list[WireClient] = []

    async def start(self) -> Served:
        config = BrokerConfig(host="127.0.0.1", port=self.port, data_dir=self.data_dir,
                              properties=dict(self.properties), **self.options)
        self.broker = Broker(config, self.data_dir)
        self.server = await start_broker(self.broker, "127.0.0.1", self.port)
        self.port = self.broker.port
        return self

    async def stop(self) -> None:
        for client in self.clients:
            await client.close()
        self.clients.clear()
        if self.broker is not None and self.server is not None:
            await stop_broker(self.broker, self.server)
        self.broker = self.server = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    async def client(self) -> WireClient:
        client = await WireClient.open("127.0.0.1", self.port)
        self.clients.append(client)
        return client

    @property
    def b(self) -> Broker:
        assert self.broker is not None
        return self.broker


def make_batch(records: Sequence[tuple[bytes | None, bytes | None]] = ((b"k", b"v"),), *,
               codec: int = 0, timestamp: int | None = None, producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1,
               headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    builder = RecordBatchBuilder(codec, producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=base_sequence)
    for key, value in records:
        builder.append(None, timestamp, key, value, headers)
    return builder.build()


def batches_of(records: bytes | None) -> list[RecordBatch]:
    return [b for b in iter_batches(records or b"") if isinstance(b, RecordBatch)]
