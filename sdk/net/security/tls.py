"""The client's TLS context, from PEM files, inline PEM or an ``ssl.SSLContext`` as given.

Settings (Java's and librdkafka's names are aliases of these, see
:mod:`sdk.net.config_names`): ``ssl_cafile`` (CA bundle; Java ``ssl.truststore.location``
with ``ssl.truststore.type=PEM``, librdkafka ``ssl.ca.location``), ``ssl_cadata`` (inline
PEM, Java ``ssl.truststore.certificates``), ``ssl_certfile`` (client certificate chain,
possibly with its key: Java ``ssl.keystore.location``, librdkafka
``ssl.certificate.location``), ``ssl_keyfile`` (librdkafka ``ssl.key.location``),
``ssl_keystore_key`` / ``ssl_keystore_certificate_chain`` (inline PEM), ``ssl_password``
(the key's password, ``ssl.key.password``). Without a CA the system's trust store is used.

Host names are checked (``ssl_endpoint_identification_algorithm="https"``, Java's default;
``""`` turns the check off but still verifies the chain, as Java does).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import TYPE_CHECKING

from sdk.errors import ConfigError

if TYPE_CHECKING:
    from sdk.net.config import CommonConfig

__all__ = ["build_ssl_context"]


def build_ssl_context(cfg: CommonConfig) -> ssl.SSLContext:
    """The context every TLS connection of one client uses (built once per client)."""
    if cfg.ssl_context is not None:
        return cfg.ssl_context
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the chain and the host name
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        if cfg.ssl_cafile or cfg.ssl_cadata:
            ctx.load_verify_locations(cafile=cfg.ssl_cafile or None,
                                      cadata=cfg.ssl_cadata or None)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"cannot load the trusted CA certificates: {_why(exc)}",
                          key="ssl.truststore.location / ssl_cafile",
                          value=cfg.ssl_cafile) from None
    ctx.check_hostname = cfg.ssl_endpoint_identification_algorithm.lower() == "https"
    password = cfg.ssl_password.get_secret_value() if cfg.ssl_password else None
    if cfg.ssl_keystore_key is not None or cfg.ssl_keystore_certificate_chain is not None:
        if cfg.ssl_keystore_key is None or cfg.ssl_keystore_certificate_chain is None:
            raise ConfigError("ssl.keystore.key and ssl.keystore.certificate.chain go together",
                              key="ssl.keystore.key")
        _load_inline(ctx, cfg.ssl_keystore_certificate_chain,
                     cfg.ssl_keystore_key.get_secret_value(), password)
    elif cfg.ssl_certfile:
        try:
            ctx.load_cert_chain(cfg.ssl_certfile, cfg.ssl_keyfile or None, password)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"cannot load the client certificate and key: {_why(exc)}",
                key="ssl.keystore.location / ssl_certfile, ssl_keyfile", value=cfg.ssl_certfile
            ) from None
    elif cfg.ssl_keyfile:
        raise ConfigError("a key without a certificate: set ssl_certfile "
                          "(ssl.certificate.location) too", key="ssl_keyfile")
    return ctx


def _load_inline(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # The ssl module loads keys from files only: write both to a private temporary file
    # (mode 0600) and remove it at once.
    fd, path = tempfile.mkstemp(prefix="kafka-sdk-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, None, password)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"cannot load the inline client key and certificate: {_why(exc)}",
                          key="ssl.keystore.key / ssl.keystore.certificate.chain") from None
    finally:
        os.unlink(path)


def _why(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"no such file {exc.filename!r}"
    return str(exc) or type(exc).__name__
