"""The one-line ``repr`` every client face shares.

It names what tells two clients apart in a log or a debugger (the face, client id, bootstrap
servers, state and a few role fields the face picks) and nothing else: fields are picked
one by one, never the whole config, so credentials or other secrets a config may hold never
reach a log line.
"""

from __future__ import annotations

from typing import Any

__all__ = ["describe_client"]


def _server(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def describe_client(face: str, config: Any, state: str, **fields: Any) -> str:
    """``<Producer client_id='kafka-sdk-producer-1' bootstrap_servers='h:9092' started>``.

    ``config`` is a CommonConfig (or subclass); ``fields`` are extra ``name=value`` pairs,
    shown with repr() after the servers.
    """
    servers = ",".join(_server(host, port) for host, port in config.bootstrap_servers)
    items = [f"client_id={config.client_id!r}", f"bootstrap_servers={servers!r}"]
    items += [f"{name}={value!r}" for name, value in fields.items()]
    return f"<{face} {' '.join(items)} {state}>"
