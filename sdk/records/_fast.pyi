# Types of the compiled module built from _fast.c (see sdk.records.fast_path).
from typing import Any

def init(record_class: type, malformed_error: type[BaseException], /) -> None: ...
def decode(buf: bytes, pos: int, end: int, count: int, base_offset: int, base_ts: int,
           topic: str, partition: int, ts_type: Any, epoch: int | None,
           cls: type, /) -> list[Any]: ...
def encode_values(buf: bytearray, used: int, values: list[bytes], timestamps: list[int],
                  start: int, stop: int, room: int, base: int, od: int, count_before: int,
                  /) -> tuple[int, int, int, int] | None: ...

class Stager:
    """The compiled per-record send of sdk.producer.staging.Stage.stager."""

    pure: Any
    def __init__(self, pure: Any, stage: Any, runs: dict[str, Any], locked: Any,
                 run_type: type, future_type: type, value_limit: int, record_cost: int,
                 /) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class SlotMaker:
    """cls's instance with its object slots set, without __init__."""

    def __init__(self, cls: type, names: tuple[str, ...], /) -> None: ...
    def __call__(self, *values: Any) -> Any: ...
