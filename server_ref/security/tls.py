"""TLS for SSL and SASL_SSL listeners, from Kafka's PEM settings, and the mTLS principal.

Supported (per listener with the ``listener.name.<listener>.`` prefix, or broker-wide):
``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (private key and certificate chain
in one file) or ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` inline, the key
optionally encrypted with ``ssl.key.password``; ``ssl.truststore.type=PEM`` with
``ssl.truststore.location`` or inline ``ssl.truststore.certificates`` (whom to trust for mutual
TLS); ``ssl.client.auth=required|requested|none``; ``ssl.enabled.protocols``. JKS and PKCS12
stores are refused with a clear error (Python's ``ssl`` reads PEM only).

``ssl.client.auth`` on a SASL_SSL listener counts only with the listener prefix, as in Kafka
(KIP-684): a broker-wide value applies to SSL listeners.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

from sdk.errors import ConfigError
from server_ref.security.listeners import listener_value

__all__ = ["client_principal", "rfc2253", "server_context"]

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                "none": ssl.CERT_NONE}
# Attribute names Python's getpeercert() uses, as Java's RFC 2253 form writes them. Others
# are written as OID=#hex of their DER value (Java does the same).
_SHORT = {"commonName": "CN", "countryName": "C", "localityName": "L",
          "stateOrProvinceName": "ST", "organizationName": "O",
          "organizationalUnitName": "OU", "streetAddress": "STREET",
          "domainComponent": "DC", "userId": "UID"}
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16), "serialNumber": ("2.5.4.5", 0x13),
         "title": ("2.5.4.12", 0x0C), "surname": ("2.5.4.4", 0x0C),
         "givenName": ("2.5.4.42", 0x0C), "pseudonym": ("2.5.4.65", 0x0C)}


def _setting(settings: Mapping[str, str], listener: str, key: str) -> str | None:
    value = listener_value(settings, listener, key)
    return None if value is None else value.strip()


def _require_pem(settings: Mapping[str, str], listener: str, key: str) -> None:
    kind = _setting(settings, listener, key)
    if kind is not None and kind.upper() != "PEM":
        raise ConfigError(f"{key}={kind} is not supported by this broker: use PEM (the key "
                          "and certificate chain as PEM text)", key=key, value=kind)


def server_context(settings: Mapping[str, str], listener: str, protocol: str
                   ) -> ssl.SSLContext:
    """The TLS context of one listener; ConfigError names what is missing or wrong."""
    _require_pem(settings, listener, "ssl.keystore.type")
    _require_pem(settings, listener, "ssl.truststore.type")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [v.strip() for v in (_setting(settings, listener, "ssl.enabled.protocols")
                                    or "TLSv1.2,TLSv1.3").split(",") if v.strip()]
    unknown = [v for v in versions if v not in _TLS_VERSIONS]
    if unknown or not versions:
        raise ConfigError(f"ssl.enabled.protocols: {', '.join(unknown) or 'nothing'} is not "
                          "supported (TLSv1.2, TLSv1.3)", key="ssl.enabled.protocols",
                          value=",".join(versions))
    context.minimum_version = min(_TLS_VERSIONS[v] for v in versions)
    context.maximum_version = max(_TLS_VERSIONS[v] for v in versions)
    _load_keystore(context, settings, listener)
    _load_truststore(context, settings, listener)
    auth = (listener_value(settings, listener, "ssl.client.auth") if protocol == "SSL"
            else settings.get(f"listener.name.{listener.lower()}.ssl.client.auth"))
    mode = (auth or "none").strip().lower()
    if mode not in _CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth={auth} must be one of required, requested, none",
                          key="ssl.client.auth", value=auth)
    context.verify_mode = _CLIENT_AUTH[mode]
    return context


def client_context(settings: Mapping[str, str], listener: str) -> ssl.SSLContext:
    """How a broker connects to other brokers' ``listener`` (the inter-broker one): their
    certificates checked against its trust store (the system's without one), host names
    unless ``ssl.endpoint.identification.algorithm`` is empty, and its own key store
    offered as the client certificate, as Kafka's brokers do."""
    context = ssl.create_default_context()
    _load_truststore(context, settings, listener)
    check = listener_value(settings, listener, "ssl.endpoint.identification.algorithm")
    if check is not None and not check.strip():
        context.check_hostname = False
    _load_keystore(context, settings, listener)
    return context


def _load_keystore(context: ssl.SSLContext, settings: Mapping[str, str], listener: str
                   ) -> None:
    location = _setting(settings, listener, "ssl.keystore.location")
    key = listener_value(settings, listener, "ssl.keystore.key")
    chain = listener_value(settings, listener, "ssl.keystore.certificate.chain")
    password = listener_value(settings, listener, "ssl.key.password")
    if location is None and (key is None or chain is None):
        raise ConfigError(f"listener {listener} uses TLS but has no key: set "
                          "ssl.keystore.location (PEM: key and certificate chain in one file) "
                          "or ssl.keystore.key and ssl.keystore.certificate.chain",
                          key="ssl.keystore.location")
    try:
        if location is not None:
            context.load_cert_chain(location, password=password)
        else:
            assert key is not None and chain is not None
            _load_inline(context, key, chain, password)
    except FileNotFoundError as exc:
        raise ConfigError(f"ssl.keystore.location: cannot read {exc.filename}",
                          key="ssl.keystore.location", value=location) from None
    except (ssl.SSLError, OSError) as exc:
        # The reason from OpenSSL, never the password.
        raise ConfigError(f"listener {listener}: the PEM key or certificate chain cannot be "
                          f"loaded ({exc.__class__.__name__}: {getattr(exc, 'reason', '')}); "
                          "check ssl.key.password", key="ssl.keystore.location",
                          value=location) from None


def _load_inline(context: ssl.SSLContext, key: str, chain: str, password: str | None) -> None:
    # load_cert_chain reads files only: a private (0600) file that lives for the call.
    fd, path = tempfile.mkstemp(prefix="server_ref-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(_pem_lines(key) + "\n" + _pem_lines(chain) + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _pem_lines(text: str) -> str:
    # Kafka's inline PEM values may come on one line (properties files); restore the breaks.
    text = text.strip()
    if "\n" in text:
        return text
    return text.replace("-----BEGIN", "\n-----BEGIN").replace("----- ", "-----\n").replace(
        " -----END", "\n-----END").strip()


def _load_truststore(context: ssl.SSLContext, settings: Mapping[str, str], listener: str
                     ) -> None:
    location = _setting(settings, listener, "ssl.truststore.location")
    inline = listener_value(settings, listener, "ssl.truststore.certificates")
    try:
        if location is not None:
            context.load_verify_locations(cafile=location)
        if inline is not None:
            context.load_verify_locations(cadata=_pem_lines(inline))
    except FileNotFoundError as exc:
        raise ConfigError(f"ssl.truststore.location: cannot read {exc.filename}",
                          key="ssl.truststore.location", value=location) from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"listener {listener}: the trust store cannot be loaded ({exc})",
                          key="ssl.truststore.location", value=location) from None


def client_principal(ssl_object: Any) -> str:
    """``User:<subject DN>`` of a verified client certificate, ``User:ANONYMOUS`` without."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert or not cert.get("subject"):
        return "User:ANONYMOUS"
    return "User:" + rfc2253(cert["subject"])


def rfc2253(subject: tuple[tuple[tuple[str, str], ...], ...]) -> str:
    """A subject as Java's ``X500Principal.getName()`` writes it: most specific RDN first."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(_attribute(name, value) for name, value in rdn))
    return ",".join(rdns)


def _attribute(name: str, value: str) -> str:
    short = _SHORT.get(name)
    if short is not None:
        return f"{short}={_escape(value)}"
    oid, tag = _OIDS.get(name, (name, 0x0C))
    data = value.encode("utf-8")
    length = bytes([len(data)]) if len(data) < 128 else bytes([0x81, len(data)]) \
        if len(data) < 256 else bytes([0x82]) + len(data).to_bytes(2, "big")
    return f"{oid}=#{bytes([tag]).hex()}{length.hex()}{data.hex()}"


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)
