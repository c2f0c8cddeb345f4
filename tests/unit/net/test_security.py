"""SCRAM against RFC 7677's test vector, JAAS strings, unsecured OAUTHBEARER tokens, the TLS
settings' names and that credentials stay out of reprs and messages (no broker needed)."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path

import pytest

from sdk.errors import (
    AuthenticationError,
    ConfigError,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from sdk.net.config import CommonConfig
from sdk.net.security import OAuthBearerToken, Security, sasl_settings
from sdk.net.security.jaas import parse_jaas_config
from sdk.net.security.oauth import TokenSource, client_message, unsecured_token
from sdk.net.security.scram import ScramClient

# RFC 7677 section 3: SCRAM-SHA-256, user "user", password "pencil".
RFC7677_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC7677_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_sha256_matches_rfc7677() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    client.verify(RFC7677_SERVER_FINAL)  # the server proved it knows the password


def test_scram_refuses_a_wrong_server_signature_and_bad_messages() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    client.first()
    client.final(RFC7677_SERVER_FIRST)
    forged = b"v=" + base64.b64encode(b"\0" * 32)
    with pytest.raises(SaslAuthenticationFailedError, match="signature is wrong"):
        client.verify(forged)
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof"):
        client.verify(b"e=invalid-proof")
    other = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    other.first()
    with pytest.raises(SaslAuthenticationFailedError, match="does not extend ours"):
        other.final(b"r=xyz123,s=AAAA,i=4096")
    with pytest.raises(SaslAuthenticationFailedError, match="iterations"):
        other.final(b"r=abc123,s=AAAA,i=1")
    with pytest.raises(SaslAuthenticationFailedError, match="malformed"):
        other.final(b"garbage")


def test_scram_escapes_user_names_and_makes_fresh_nonces() -> None:
    a = ScramClient("SCRAM-SHA-512", "a=b,c", "pw").first()
    b = ScramClient("SCRAM-SHA-512", "a=b,c", "pw").first()
    assert a.startswith(b"n,,n=a=3Db=2Cc,r=") and a != b


def test_jaas_plain_scram_oauth() -> None:
    login = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  username="alice"  password="p\\"w;d=1";')
    assert login.mechanisms == ("PLAIN",) and login.flag == "required"
    assert login.options == {"username": "alice", "password": 'p"w;d=1'}
    scram = parse_jaas_config("org.apache.kafka.common.security.scram.ScramLoginModule "
                              "required username=bob password=x;")
    assert scram.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert scram.options == {"username": "bob", "password": "x"}
    oauth = parse_jaas_config(
        'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
        'unsecuredLoginStringClaim_sub="svc" unsecuredLoginExtension_traceId="t1";')
    assert oauth.mechanisms == ("OAUTHBEARER",)
    assert "secret" not in repr(parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required password="secret";'))


@pytest.mark.parametrize("text, match", [
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="a"',
     "end with ';'"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule always username="a";',
     "control flag"),
    ('com.example.Kerberos required;', "not supported"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required password="oops;',
     "not closed"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required secret;',
     "not key=value"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required; x required;',
     "more than one"),
])
def test_jaas_errors_name_the_key_and_hide_values(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        parse_jaas_config(text)
    assert info.value.key == "sasl.jaas.config"
    assert "oops" not in str(info.value) and "secret" not in str(info.value)


def _claims(token: str) -> dict[str, object]:
    header, body, signature = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
    assert signature == ""
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def test_unsecured_token_as_java_makes_it() -> None:
    token = unsecured_token({"unsecuredLoginStringClaim_sub": "alice",
                             "unsecuredLoginListClaim_scope": ",read,write",
                             "unsecuredLoginNumberClaim_n": "7",
                             "unsecuredLoginLifetimeSeconds": "60",
                             "unsecuredLoginExtension_traceId": "t1"}, now_ms=1_000_000)
    claims = _claims(token.value)
    assert claims == {"sub": "alice", "scope": ["read", "write"], "n": 7, "iat": 1000.0,
                      "exp": 1060.0}
    assert token.expires_at_ms == 1_060_000 and token.extensions == {"traceId": "t1"}
    assert client_message(token) == (f"n,,\x01auth=Bearer {token.value}\x01traceId=t1\x01\x01"
                                     ).encode()
    with pytest.raises(ConfigError, match="principal claim"):
        unsecured_token({"unsecuredLoginStringClaim_other": "x"})


async def test_token_provider_forms_sync_and_async() -> None:
    calls: list[int] = []

    def sync_provider() -> tuple[str, int]:
        calls.append(1)
        return "tok-a", 2**62  # far future: reused

    source = TokenSource(sync_provider, None)
    assert (await source.token()).value == "tok-a"
    assert (await source.token()).value == "tok-a" and len(calls) == 1

    async def async_provider() -> OAuthBearerToken:
        return OAuthBearerToken("tok-b", 1, {"k": "v"})  # expired: asked again each time

    source = TokenSource(async_provider, None)
    assert (await source.token()).extensions == {"k": "v"}
    jwt = unsecured_token({"unsecuredLoginStringClaim_sub": "x"}).value
    source = TokenSource(lambda: jwt, None)  # a bare JWT: expiry read from its exp claim
    assert (await source.token()).expires_at_ms is not None

    def broken() -> str:
        raise RuntimeError("idp down")

    with pytest.raises(SaslAuthenticationFailedError, match="idp down"):
        await TokenSource(broken, None).token()
    with pytest.raises(SaslAuthenticationFailedError, match="must return"):
        await TokenSource(lambda: 42, None).token()


def test_error_classes_are_authentication_errors() -> None:
    for cls in (SaslAuthenticationFailedError, IllegalSaslStateError,
                UnsupportedSaslMechanismError, SslAuthenticationError):
        assert issubclass(cls, AuthenticationError) and not cls.retriable
    assert SaslAuthenticationFailedError.errno == 58 and IllegalSaslStateError.errno == 34
    assert "SASL_AUTHENTICATION_FAILED" in str(SaslAuthenticationFailedError("x"))


def _build(**kwargs: object) -> CommonConfig:
    return CommonConfig.build(bootstrap_servers="h:9093", **kwargs)


def test_java_and_librdkafka_names(tmp_path: Path) -> None:
    java = CommonConfig.build({
        "bootstrap.servers": "h:9093", "security.protocol": "SASL_SSL",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/ks.pem",
        "ssl.key.password": "kp", "ssl.endpoint.identification.algorithm": "",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="u" password="p";'})
    assert (java.ssl_cafile, java.ssl_certfile, java.ssl_endpoint_identification_algorithm) \
        == ("/ca.pem", "/ks.pem", "")
    assert sasl_settings(java).username == "u" and sasl_settings(java).password == "p"
    rdkafka = CommonConfig.build({
        "bootstrap.servers": "h:9093", "security.protocol": "sasl_ssl",
        "ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/c.pem",
        "ssl.key.location": "/c.key", "ssl.key.password": "kp",
        "sasl.mechanisms": "PLAIN", "sasl.username": "u", "sasl.password": "p",
        "ssl.endpoint.identification.algorithm": "none"})
    assert (rdkafka.ssl_cafile, rdkafka.ssl_certfile, rdkafka.ssl_keyfile) == (
        "/ca.pem", "/c.pem", "/c.key")
    assert rdkafka.security_protocol == "SASL_SSL" and rdkafka.sasl_mechanism == "PLAIN"
    assert rdkafka.ssl_endpoint_identification_algorithm == ""
    settings = sasl_settings(rdkafka)
    assert (settings.mechanism, settings.username, settings.password) == ("PLAIN", "u", "p")
    # The JAAS module alone implies PLAIN / OAUTHBEARER.
    oauth = _build(security_protocol="SASL_PLAINTEXT", sasl_jaas_config=(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="a";'))
    assert sasl_settings(oauth).mechanism == "OAUTHBEARER"


@pytest.mark.parametrize("key", ["ssl.truststore.type", "ssl.keystore.type"])
@pytest.mark.parametrize("kind", ["JKS", "PKCS12"])
def test_java_store_types_are_refused_naming_the_key(key: str, kind: str) -> None:
    with pytest.raises(ConfigError, match="PEM") as info:
        CommonConfig.build({"bootstrap.servers": "h:1", key: kind})
    assert info.value.key == key


def test_missing_mechanism_or_credentials_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="needs a SASL mechanism"):
        Security.from_config(_build(security_protocol="SASL_PLAINTEXT", sasl_username="u"))
    with pytest.raises(ConfigError, match="user name and a password"):
        Security.from_config(_build(security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="PLAIN", sasl_username="u"))
    with pytest.raises(ConfigError, match="does not serve"):
        sasl_settings(_build(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_jaas_config="org.apache.kafka.common.security.scram."
                                              "ScramLoginModule required;"))
    with pytest.raises(ConfigError, match="sasl_oauth_token_provider"):
        Security.from_config(_build(security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="OAUTHBEARER"))
    with pytest.raises(ConfigError, match="GSSAPI"):
        _build(sasl_mechanism="GSSAPI")


def test_tls_files_are_loaded_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file") as info:
        Security.from_config(_build(security_protocol="SSL",
                                    ssl_cafile=str(tmp_path / "missing.pem")))
    assert "ssl_cafile" in str(info.value.key)
    context = ssl.create_default_context()
    security = Security.from_config(_build(security_protocol="SSL", ssl_context=context))
    assert security is not None and security.ssl_context is context
    default = Security.from_config(_build(security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                                          sasl_username="u", sasl_password="p"))
    assert default is not None and default.ssl_context is not None
    assert default.ssl_context.check_hostname  # host names are checked by default
    assert Security.from_config(_build()) is None  # PLAINTEXT: nothing on the connection


def test_credentials_stay_out_of_reprs_and_errors() -> None:
    secret = "hunter2-very-secret"
    cfg = _build(security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u",
                 sasl_password=secret, ssl_password=secret,
                 sasl_jaas_config="org.apache.kafka.common.security.plain.PlainLoginModule "
                                  f'required username="u" password="{secret}";')
    assert secret not in repr(cfg) and secret not in str(cfg)
    settings = sasl_settings(cfg)
    assert secret not in repr(settings)
    for attempt in ({"sasl.password": secret, "sasl_password": secret + "x"},
                    {"sasl.password": 12345, "ssl.key.password": secret},
                    {"sasl.jaas.config": f'x required password="{secret}"',
                     "security.protocol": "SASL_SSL"}):
        try:
            Security.from_config(CommonConfig.build({"bootstrap.servers": "h:1", **attempt}))
        except ConfigError as exc:
            assert secret not in str(exc) and "12345" not in str(exc)
        else:
            raise AssertionError(f"{attempt} was accepted")


def test_encrypted_client_key_with_ssl_key_password(tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    from cryptography.hazmat.primitives import serialization

    ca = trustme.CA()
    cert = ca.issue_cert("client@example.com")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    secret = "key-pass-123"
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(secret.encode()))
    (tmp_path / "client.key").write_bytes(encrypted)
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "client.pem"))
    settings = {"bootstrap.servers": "h:9093", "security.protocol": "SSL",
                "ssl.certificate.location": str(tmp_path / "client.pem"),
                "ssl.key.location": str(tmp_path / "client.key")}
    loaded = Security.from_config(CommonConfig.build({**settings, "ssl.key.password": secret}))
    assert loaded is not None and loaded.ssl_context is not None
    with pytest.raises(ConfigError, match="client certificate and key") as info:
        Security.from_config(CommonConfig.build({**settings, "ssl.key.password": "wrong-pw"}))
    assert "wrong-pw" not in str(info.value)
    # The same key inline (Java's ssl.keystore.key), with its password.
    inline = CommonConfig.build({"bootstrap.servers": "h:9093", "security.protocol": "SSL",
                                 "ssl.keystore.key": encrypted.decode(),
                                 "ssl.keystore.certificate.chain":
                                     (tmp_path / "client.pem").read_text(),
                                 "ssl.key.password": secret})
    assert Security.from_config(inline) is not None
    assert "PRIVATE KEY" not in repr(inline)
