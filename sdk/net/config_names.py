"""Every setting name a Java or librdkafka client knows that is not spelled like ours: data.

Our settings are Apache Kafka's Java client names (``linger.ms``, ``buffer.memory``). This
table says what to do with the other names a properties file or a confluent-kafka dict may
hold, per role (``P`` producer, ``C`` consumer, ``A`` admin):

* :class:`Alias` -- another spelling of one of ours (librdkafka's ``queue.buffering.max.ms``
  is ``linger.ms``), with the unit conversion and value spellings it needs;
* :class:`Ignored` -- a setting that has no effect in this client. It is accepted, and one
  warning per client names it with the reason; values in ``quiet`` describe what the client
  does anyway and draw no warning; with ``otherwise="refuse"`` any other value is refused
  (accepting it would change what the application relies on);
* :class:`Refused` -- a setting the application relies on that this client cannot honour:
  construction fails naming the key and what to use instead.

Anything else that is not one of the role's own settings is refused as unknown, with close
matches. ``README.md`` ("Configuration") shows this table; keep the two in step.
Sources: librdkafka's CONFIGURATION.md and Apache Kafka 4.3's ProducerConfig,
ConsumerConfig and AdminClientConfig.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Alias", "Entry", "Ignored", "NAMES", "PREFIXES", "Refused", "VALUES", "lookup"]

INT_MAX = 2_147_483_647  # Java's Integer.MAX_VALUE: "no limit" in Kafka's settings


@dataclass(frozen=True)
class Refused:
    reason: str  # what to do instead
    roles: str = "PCA"


@dataclass(frozen=True)
class Alias:
    target: str  # our (Java) dotted name
    origin: str  # whose name it is: "librdkafka", "Java", ...
    roles: str = "PCA"
    scale: int = 1  # an integer value is multiplied by this (kilobytes -> bytes)
    values: Mapping[str, object | Refused] = field(default_factory=dict)  # lower-cased text


@dataclass(frozen=True)
class Ignored:
    reason: str  # why it has no effect here
    roles: str = "PCA"
    quiet: tuple[str, ...] = ()  # lower-cased values that match what the client does anyway
    otherwise: Literal["warn", "refuse"] = "warn"


Entry = Alias | Ignored | Refused

_DEPRECATED = "deprecated and unused in librdkafka itself"
_CALLBACK = "callbacks are not configured by name here"
_TLS_SASL = ("not used by this client's TLS/SASL support (PEM files or an ssl.SSLContext; "
             "PLAIN, SCRAM-SHA-256/512, OAUTHBEARER)")
_TLS_DEFAULTS = ("TLS 1.2+ with OpenSSL's defaults; pass an ssl.SSLContext as ssl_context to "
                 "choose protocols or ciphers")
_OIDC = ("fetching OAUTHBEARER tokens from an OIDC endpoint is not built in: return the token "
         "from sasl_oauth_token_provider (a function, sync or async)")
_PREFETCH = ("the consumer prefetches one fetch response per broker (bounded by "
             "fetch.max.bytes and max.partition.fetch.bytes)")
_NO_METRICS = ("metrics are read with client.metrics() and exported with "
               "sdk.metrics.enable_prometheus / enable_opentelemetry")

# librdkafka's partitioner names. Ours ("default") is Java's: murmur2 of the key, sticky
# without one, which librdkafka calls murmur2_random. The CRC32 and FNV-1a ones would put
# keyed records on other partitions than a librdkafka producer does, so they are refused.
_NOT_JAVA_HASH = Refused("keys would land on other partitions than librdkafka puts them "
                         "(CRC32/FNV-1a are not implemented); 'murmur2_random' is Java's and "
                         "ours ('default')", roles="P")
_PARTITIONERS: dict[str, object | Refused] = {
    "murmur2_random": "default",
    "random": "uniform_sticky",
    "consistent": _NOT_JAVA_HASH, "consistent_random": _NOT_JAVA_HASH,
    "fnv1a": _NOT_JAVA_HASH, "fnv1a_random": _NOT_JAVA_HASH,
    # Java's class names (partitioner.class); 4.x ships only RoundRobinPartitioner.
    "": "default",
    "org.apache.kafka.clients.producer.roundrobinpartitioner": "round_robin",
    "org.apache.kafka.clients.producer.uniformstickypartitioner": "uniform_sticky",
    "org.apache.kafka.clients.producer.internals.defaultpartitioner": "default",
}

# Value spellings of our own settings (compared lower-cased and stripped).
VALUES: dict[str, Mapping[str, object | Refused]] = {
    "partitioner": _PARTITIONERS,
}

NAMES: dict[str, tuple[Entry, ...]] = {
    # ------------------------------------------------------------------ every role
    "metadata.broker.list": (Alias("bootstrap.servers", "librdkafka"),),
    "socket.timeout.ms": (Alias("request.timeout.ms", "librdkafka"),),
    "topic.metadata.refresh.interval.ms": (
        Alias("metadata.max.age.ms", "librdkafka", values={"-1": INT_MAX}),),
    "client.dns.lookup": (Ignored(
        "connections try every address the host name resolves to (Java's use_all_dns_ips); "
        "canonical bootstrap names only matter for Kerberos, which is not supported",
        quiet=("use_all_dns_ips", "default")),),
    "connections.max.idle.ms": (Ignored(
        "idle connections stay open until the broker closes them; the client reconnects "
        "when it next needs the broker", quiet=("0",)),),
    "send.buffer.bytes": (Ignored("sockets keep the operating system's buffer sizes",
                                  quiet=("-1",)),),
    "receive.buffer.bytes": (Ignored("sockets keep the operating system's buffer sizes",
                                     quiet=("-1",)),),
    "socket.send.buffer.bytes": (Ignored("sockets keep the operating system's buffer sizes",
                                         quiet=("0",)),),
    "socket.receive.buffer.bytes": (Ignored("sockets keep the operating system's buffer sizes",
                                            quiet=("0",)),),
    "socket.keepalive.enable": (Ignored("TCP keep-alive is not set on broker sockets",
                                        quiet=("false",)),),
    "socket.nagle.disable": (Ignored("TCP_NODELAY is always set on broker sockets",
                                     quiet=("true",)),),
    "socket.max.fails": (Ignored("a request that times out closes its connection (as "
                                 "librdkafka's default of 1)", quiet=("1",)),),
    "socket.connection.setup.timeout.max.ms": (Ignored(
        "the setup timeout does not grow between attempts: socket.connection.setup.timeout.ms "
        "applies to each"),),
    "api.version.request.timeout.ms": (Ignored(
        "the ApiVersions handshake is part of the connection setup, bounded by "
        "socket.connection.setup.timeout.ms"),),
    "api.version.request": (Ignored("ApiVersions is always asked (brokers before 0.10 are "
                                    "not supported)", quiet=("true",)),),
    "broker.address.ttl": (Ignored("host names are resolved at each connection attempt"),),
    "broker.address.family": (Ignored("every address family the name resolves to is tried",
                                      quiet=("any",)),),
    "metadata.recovery.strategy": (Ignored(
        "the bootstrap servers are always tried again when no known broker answers",
        quiet=("rebootstrap",)),),
    "metadata.recovery.rebootstrap.trigger.ms": (Ignored(
        "the bootstrap servers are tried again as soon as no known broker answers"),),
    "topic.metadata.refresh.fast.interval.ms": (Ignored(
        "metadata refreshes after an error back off from retry.backoff.ms"),),
    "topic.metadata.refresh.sparse": (Ignored("metadata requests name only the topics in use",
                                              quiet=("true",)),),
    "topic.metadata.propagation.max.ms": (Ignored(
        "a topic missing from metadata is waited for up to max.block.ms (producer) or "
        "default.api.timeout.ms"),),
    "topic.blacklist": (Refused("topics are not filtered from metadata; subscribe with "
                                "explicit names or a pattern instead"),),
    "enable.metrics.push": (Ignored("client metrics are not pushed to the cluster (KIP-714)",
                                    quiet=("false",)),),
    "metric.reporters": (Ignored(_NO_METRICS, quiet=("",)),),
    "metrics.recording.level": (Ignored(_NO_METRICS),),
    "auto.include.jmx.reporter": (Ignored(_NO_METRICS),),
    "log_level": (Ignored("log levels are set with Python logging (the 'sdk' logger)"),),
    "log.queue": (Ignored("log records go to Python logging", quiet=("false",)),),
    "log.thread.name": (Ignored("log records go to Python logging"),),
    "log.connection.close": (Ignored("log records go to Python logging"),),
    "logger": (Ignored("log records go to Python logging (the 'sdk' logger)"),),
    "enable.random.seed": (Ignored("Python seeds its own random numbers", quiet=("true",)),),
    "internal.termination.signal": (Ignored("no signal is needed to stop the client's "
                                            "threads", quiet=("0",)),),
    "builtin.features": (Ignored("names librdkafka's compiled-in features"),),
    "message.copy.max.bytes": (Ignored("records are written into the batch as given"),),
    "receive.message.max.bytes": (Ignored(
        "responses are bounded by fetch.max.bytes; frames up to 100 MiB are read"),),
    "client.software.name": (Ignored("the client reports its own name in ApiVersions"),),
    "client.software.version": (Ignored("the client reports its own version in ApiVersions"),),
    "reconnect.backoff.jitter.ms": (Ignored(_DEPRECATED),),
    "socket.blocking.max.ms": (Ignored(_DEPRECATED),),
    "topic.metadata.refresh.fast.cnt": (Ignored(_DEPRECATED),),
    "api.version.fallback.ms": (Ignored(_DEPRECATED),),
    "broker.version.fallback": (Ignored(_DEPRECATED),),
    "security.providers": (Ignored("Java security providers do not apply here"),),
    # TLS: Java's PEM store names and librdkafka's file names -> ours (sdk.net.security.tls)
    "ssl.truststore.location": (Alias("ssl.cafile", "Java"),),
    "ssl.truststore.certificates": (Alias("ssl.cadata", "Java"),),
    "ssl.keystore.location": (Alias("ssl.certfile", "Java"),),
    "ssl.key.password": (Alias("ssl.password", "Java and librdkafka"),),
    "ssl.ca.location": (Alias("ssl.cafile", "librdkafka"),),
    "ssl.ca.pem": (Alias("ssl.cadata", "librdkafka"),),
    "ssl.certificate.location": (Alias("ssl.certfile", "librdkafka"),),
    "ssl.key.location": (Alias("ssl.keyfile", "librdkafka"),),
    "ssl.certificate.pem": (Alias("ssl.keystore.certificate.chain", "librdkafka"),),
    "ssl.key.pem": (Alias("ssl.keystore.key", "librdkafka"),),
    "ssl.truststore.password": (Ignored("a PEM trust store has no password", quiet=("",)),),
    "ssl.keystore.password": (Ignored("a PEM key store has no store password; the key's is "
                                      "ssl.key.password", quiet=("",)),),
    "ssl.protocol": (Ignored(_TLS_DEFAULTS, quiet=("tls", "tlsv1.2", "tlsv1.3")),),
    "ssl.enabled.protocols": (Ignored(_TLS_DEFAULTS),),
    "ssl.cipher.suites": (Ignored(_TLS_DEFAULTS, quiet=("",)),),
    "ssl.keymanager.algorithm": (Ignored("a Java key manager setting"),),
    "ssl.trustmanager.algorithm": (Ignored("a Java trust manager setting"),),
    "ssl.secure.random.implementation": (Ignored("a Java setting"),),
    "enable.ssl.certificate.verification": (Ignored(
        "certificates are always verified; pass an ssl.SSLContext as ssl_context to change "
        "that", quiet=("true",), otherwise="refuse"),),
    # SASL
    "sasl.mechanisms": (Alias("sasl.mechanism", "librdkafka"),),
    "sasl.oauthbearer.token.endpoint.url": (Refused(_OIDC),),
    "sasl.login.callback.handler.class": (Refused(_OIDC),),
    "sasl.oauthbearer.method": (Ignored(_OIDC, quiet=("default",), otherwise="refuse"),),
    "enable.sasl.oauthbearer.unsecure.jwt": (Refused(
        "for an unsecured token use sasl.jaas.config with the OAuthBearerLoginModule's "
        "unsecuredLoginStringClaim_sub=\"...\" (Java's form), or sasl_oauth_token_provider"),),
    "config.providers": (Refused(
        "${provider:path:key} values are not resolved; resolve them before passing the "
        "settings"),),
    "interceptor.classes": (Ignored("Java interceptors cannot run here", quiet=("",),
                                    otherwise="refuse"),),
    "plugin.library.paths": (Refused("librdkafka plugins cannot be loaded"),),
    "interceptors": (Refused("librdkafka interceptors cannot be loaded"),),
    "error_cb": (Alias("on_error", "librdkafka"),),
    "throttle_cb": (Refused("broker throttling is not reported; " + _CALLBACK),),
    "stats_cb": (Refused("pass on_statistics= (called every statistics.interval.ms with "
                         "client.metrics(), a mapping of MetricName to value, not "
                         "librdkafka's JSON)"),),
    "log_cb": (Refused("log with Python logging (the 'sdk' logger); " + _CALLBACK),),
    "oauth_cb": (Refused("pass sasl_oauth_token_provider= (no arguments; returns the token "
                         "and its expiry in epoch milliseconds)"),),
    "oauthbearer_token_refresh_cb": (Refused("pass sasl_oauth_token_provider= (no arguments; "
                                             "returns the token and its expiry in epoch "
                                             "milliseconds)"),),
    "max.in.flight": (Alias("max.in.flight.requests.per.connection", "librdkafka", roles="P"),
                      Ignored("only the producer pipelines requests (the consumer keeps one "
                              "fetch per broker in flight)", roles="CA")),
    "max.in.flight.requests.per.connection": (Ignored(
        "only the producer pipelines requests (the consumer keeps one fetch per broker in "
        "flight)", roles="CA"),),
    "message.max.bytes": (Alias("max.request.size", "librdkafka", roles="P"),
                          Ignored("only the producer sends large requests", roles="CA")),
    "allow.auto.create.topics": (Ignored(
        "only the consumer's metadata requests ask for topic creation (the producer's "
        "always may; the broker's auto.create.topics.enable decides)", roles="PA"),),
    "client.rack": (Ignored("only consumers fetch from a replica in their rack", roles="PA"),),
    "retries": (Ignored("admin calls are retried until default.api.timeout.ms (or the "
                        "call's timeout_ms) ends", roles="A"),),
    "bootstrap.controllers": (Ignored(
        "the admin client talks to brokers only (bootstrap.servers)", roles="A", quiet=("",),
        otherwise="refuse"),),

    # ------------------------------------------------------------------ producer
    "queue.buffering.max.ms": (Alias("linger.ms", "librdkafka", roles="P"),),
    "queue.buffering.max.kbytes": (Alias("buffer.memory", "librdkafka", roles="P",
                                         scale=1024),),
    "queue.buffering.max.messages": (Ignored(
        "the buffer is bounded in bytes (buffer.memory / queue.buffering.max.kbytes), not "
        "in records", roles="P", quiet=("0",)),),
    "queue.buffering.backpressure.threshold": (Ignored(
        "send() waits only for buffer.memory", roles="P"),),
    "batch.num.messages": (Ignored("batches are bounded in bytes (batch.size), not in "
                                   "records", roles="P"),),
    "message.send.max.retries": (Alias("retries", "librdkafka", roles="P"),),
    "request.required.acks": (Alias("acks", "librdkafka", roles="P"),),
    "message.timeout.ms": (Alias("delivery.timeout.ms", "librdkafka", roles="P",
                                 values={"0": INT_MAX}),),
    "compression.codec": (Alias("compression.type", "librdkafka", roles="P"),),
    "compression.level": (Ignored("each codec runs at its default level", roles="P",
                                  quiet=("-1",)),),
    "compression.gzip.level": (Ignored("each codec runs at its default level", roles="P",
                                       quiet=("-1",)),),
    "compression.lz4.level": (Ignored("each codec runs at its default level", roles="P"),),
    "compression.zstd.level": (Ignored("each codec runs at its default level", roles="P"),),
    "partitioner.class": (Alias("partitioner", "Java", roles="P", values=_PARTITIONERS),),
    "partitioner.adaptive.partitioning.enable": (Ignored(
        "the sticky partitioner moves on when a batch is full, without weighing brokers' "
        "queues", roles="P", quiet=("false",)),),
    "partitioner.availability.timeout.ms": (Ignored(
        "the sticky partitioner does not skip slow brokers", roles="P", quiet=("0",)),),
    "sticky.partitioning.linger.ms": (Ignored(
        "the sticky partition changes when its batch is full", roles="P"),),
    "metadata.max.idle.ms": (Ignored("topics are kept in the producer's metadata while it "
                                     "runs", roles="P"),),
    "delivery.report.only.error": (Ignored(
        "futures and callbacks report every record", roles="P", quiet=("false",)),),
    "transaction.two.phase.commit.enable": (Ignored(
        "two-phase commit with an external coordinator (KIP-939) is not supported",
        roles="P", quiet=("false",), otherwise="refuse"),),
    "enable.gapless.guarantee": (Ignored(
        "a batch refused for good fails alone and later ones go on (DESIGN.md section 5)",
        roles="P", quiet=("false",), otherwise="refuse"),),
    "queuing.strategy": (Ignored("records are sent in the order of send()", roles="P",
                                 quiet=("fifo",), otherwise="refuse"),),
    "produce.offset.report": (Ignored(_DEPRECATED, roles="P"),),
    "dr_cb": (Refused("pass on_delivery= to send(), or use the future it returns",
                      roles="P"),),
    "dr_msg_cb": (Refused("pass on_delivery= to send(), or use the future it returns",
                          roles="P"),),
    "on_delivery": (Refused("pass on_delivery= to send(), or use the future it returns",
                            roles="P"),),
    "partitioner_cb": (Refused("pass the callable as partitioner=", roles="P"),),
    "msg_order_cmp": (Refused("records are sent in the order of send()", roles="P"),),
    "key.serializer.encoding": (Ignored("strings are UTF-8", roles="P",
                                        quiet=("utf8", "utf-8"), otherwise="refuse"),),
    "value.serializer.encoding": (Ignored("strings are UTF-8", roles="P",
                                          quiet=("utf8", "utf-8"), otherwise="refuse"),),
    "serializer.encoding": (Ignored("strings are UTF-8", roles="P", quiet=("utf8", "utf-8"),
                                    otherwise="refuse"),),

    # ------------------------------------------------------------------ consumer
    "fetch.wait.max.ms": (Alias("fetch.max.wait.ms", "librdkafka", roles="C"),),
    "fetch.message.max.bytes": (Alias("max.partition.fetch.bytes", "librdkafka", roles="C"),),
    "auto.commit.enable": (Alias("enable.auto.commit", "librdkafka", roles="C"),),
    "enable.partition.eof": (Ignored(
        "there are no end-of-partition events; compare position() with end_offsets() "
        "(or use lag())", roles="C", quiet=("false",)),),
    "enable.auto.offset.store": (Ignored(
        "auto-commit commits what was handed to the application; for manual control set "
        "enable.auto.commit=false and commit()", roles="C", quiet=("true",),
        otherwise="refuse"),),
    "queued.min.messages": (Ignored(_PREFETCH, roles="C"),),
    "queued.max.messages.kbytes": (Ignored(_PREFETCH, roles="C"),),
    "fetch.queue.backoff.ms": (Ignored(_PREFETCH, roles="C"),),
    "fetch.error.backoff.ms": (Ignored("fetch errors back off from retry.backoff.ms",
                                       roles="C"),),
    "coordinator.query.interval.ms": (Ignored(
        "the group coordinator is looked up again when it moves (NOT_COORDINATOR)",
        roles="C"),),
    "group.protocol.type": (Ignored("the consumer protocol type is 'consumer'", roles="C",
                                    quiet=("consumer",), otherwise="refuse"),),
    "offset.store.method": (Ignored("offsets are committed to the broker", roles="C",
                                    quiet=("broker",), otherwise="refuse"),),
    "offset.store.path": (Ignored(_DEPRECATED, roles="C"),),
    "offset.store.sync.interval.ms": (Ignored(_DEPRECATED, roles="C"),),
    "consume.callback.max.messages": (Ignored("there is no consume callback", roles="C",
                                              quiet=("0",)),),
    "internal.throw.on.fetch.stable.offset.unsupported": (Ignored(
        "a Java-internal switch", roles="C", quiet=("false",)),),
    "share.acknowledgement.mode": (Ignored("a ShareConsumer setting (share groups)", roles="C"),),
    "share.acquire.mode": (Ignored("a ShareConsumer setting (share groups)", roles="C"),),
    "consume_cb": (Refused("iterate over the consumer or call poll()", roles="C"),),
    "rebalance_cb": (Refused("pass listener= to subscribe()", roles="C"),),
    "offset_commit_cb": (Refused("use commit_async(callback=...)", roles="C"),),
    "on_commit": (Refused("use commit_async(callback=...)", roles="C"),),
    "key.deserializer.encoding": (Ignored("strings are UTF-8", roles="C",
                                          quiet=("utf8", "utf-8"), otherwise="refuse"),),
    "value.deserializer.encoding": (Ignored("strings are UTF-8", roles="C",
                                            quiet=("utf8", "utf-8"), otherwise="refuse"),),
    "deserializer.encoding": (Ignored("strings are UTF-8", roles="C",
                                      quiet=("utf8", "utf-8"), otherwise="refuse"),),
}

# Whole families by prefix: the other TLS and SASL settings (Kerberos, Java's login
# refresh and key manager tuning, librdkafka's OpenSSL engines) have no effect here.
PREFIXES: dict[str, Entry] = {
    "ssl.": Ignored(_TLS_SASL),
    "ssl_": Ignored(_TLS_SASL),
    "sasl.": Ignored(_TLS_SASL),
    "https.": Ignored(_TLS_SASL),
    "enable.ssl.": Ignored(_TLS_SASL),
    "enable.sasl.": Ignored(_TLS_SASL),
}


def lookup(name: str, role: str) -> tuple[Entry | None, str]:
    """The entry for dotted ``name`` in ``role`` (``P``, ``C``, ``A``; ``""`` matches only
    entries for every role), and the roles any entry of that name is for ("" if none)."""
    entries = NAMES.get(name)
    if entries is None:
        entries = tuple(e for p, e in PREFIXES.items() if name.startswith(p))[:1]
    for entry in entries:
        if (role and role in entry.roles) or entry.roles == "PCA":
            return entry, entry.roles
    return None, "".join(sorted({r for e in entries for r in e.roles}))
