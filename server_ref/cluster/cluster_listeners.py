"""Client listeners of a cluster of our brokers: TLS and SASL beside the PLAINTEXT one.

A cluster's brokers all run the same listeners, each on a port of its own per node, so
``EmbeddedCluster`` takes them as a template: ``listeners={"SASL_SSL": "SASL_SSL"}`` (a
name to its security protocol, optionally ``"SSL@127.0.0.2"`` for another bind address, as
``ApacheKafkaCluster`` takes them) or a ``listeners`` config whose ports are 0
(``listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0``). PLAINTEXT is always there
(the launcher's readiness checks use it) and is the inter-broker listener unless
``inter.broker.listener.name`` names another one, whose TLS/SASL the brokers then use with
each other (``peer_security.py``); the controllers are reached on PLAINTEXT.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["extra_listeners", "inter_broker_warning", "listener_settings"]

INTER_BROKER = "PLAINTEXT"
_TEMPLATE_KEYS = ("listeners", "listener.security.protocol.map")


def extra_listeners(config: dict[str, str], given: Mapping[str, str], default_host: str
                    ) -> dict[str, tuple[str, str]]:
    """name -> (security protocol, bind host) of the client listeners beside PLAINTEXT,
    from ``given`` and from a ``listeners`` template in ``config`` (taken out of it: each
    node gets its own). ValueError, with the reason, for what cluster mode cannot run."""
    from server_ref.security.listeners import PROTOCOLS, resolve_listeners

    out: dict[str, tuple[str, str]] = {}
    for name, spec in given.items():
        protocol, _, host = spec.partition("@")
        if protocol.upper() not in PROTOCOLS:
            raise ValueError(f"listener {name}: {protocol!r} is not one of "
                             f"{', '.join(PROTOCOLS)}")
        out[name.upper()] = (protocol.upper(), host or default_host)
    template = {k: config.pop(k) for k in _TEMPLATE_KEYS if k in config}
    if "listeners" in template:
        try:
            parsed = resolve_listeners(template, default_host, 0, None)
        except Exception as exc:  # ConfigError: the listener settings do not parse
            raise ValueError(str(exc)) from None
        for listener in parsed:
            if listener.port != 0:
                raise ValueError(f"cluster mode: listener {listener.name} must use port 0 "
                                 "(each node gets its own free port)")
            if listener.name == INTER_BROKER:
                if listener.protocol != "PLAINTEXT":
                    raise ValueError("cluster mode: the listener named PLAINTEXT is the "
                                     "inter-broker one and must use PLAINTEXT")
                continue
            out[listener.name] = (listener.protocol, listener.host or default_host)
    if INTER_BROKER in out:
        raise ValueError("listener name PLAINTEXT is taken (the launcher's own listener)")
    inter = config.get("inter.broker.listener.name", INTER_BROKER).strip().upper()
    if inter != INTER_BROKER and inter not in out:
        raise ValueError(f"inter.broker.listener.name: {inter} is not among the listeners "
                         f"({', '.join([INTER_BROKER, *out])})")
    return out


def inter_broker_warning(config: Mapping[str, str]) -> str | None:
    """Why replication would be refused, or None: with an authorizer on, brokers fetch from
    each other as ``User:ANONYMOUS`` (PLAINTEXT), which needs CLUSTER_ACTION on the
    cluster, as Kafka's inter-broker principal does."""
    if not config.get("authorizer.class.name", "").strip() or config.get(
            "inter.broker.listener.name", INTER_BROKER).strip().upper() != INTER_BROKER:
        return None  # no authorizer, or brokers log in as a principal of their own
    supers = {p.strip() for p in config.get("super.users", "").split(";")}
    if "User:ANONYMOUS" in supers or \
            config.get("allow.everyone.if.no.acl.found", "").strip().lower() == "true":
        return None
    return ("an authorizer is on and User:ANONYMOUS (the principal of the PLAINTEXT "
            "inter-broker listener) is not a super user: replica fetches are refused until "
            "it is (super.users=...;User:ANONYMOUS) or an ACL allows it CLUSTER_ACTION on "
            "the cluster")


def listener_settings(host: str, port: int, bound: Mapping[str, tuple[str, int]],
                      protocols: Mapping[str, tuple[str, str]]) -> list[str]:
    """One broker's ``--config`` items: PLAINTEXT on ``host:port`` and each extra listener
    at its own address (a given ``inter.broker.listener.name`` comes after, and wins)."""
    if not bound:
        return []
    listeners = ",".join([f"{INTER_BROKER}://{host}:{port}"] + [
        f"{name}://{h}:{p}" for name, (h, p) in bound.items()])
    protocol_map = ",".join([f"{INTER_BROKER}:PLAINTEXT"] + [
        f"{name}:{protocol}" for name, (protocol, _h) in protocols.items()])
    return [f"listeners={listeners}", f"listener.security.protocol.map={protocol_map}",
            f"inter.broker.listener.name={INTER_BROKER}"]
