"""The reference broker's security building blocks without sockets: SCRAM against RFC 7677's
example exchange, the RFC 2253 names of mTLS principals, JAAS option parsing, the unsecured
JWS validator, PLAIN's rules, listener parsing and per-listener lookups, the credential
file."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from sdk.errors import ConfigError
from server_ref.security.credentials import CredentialStore
from server_ref.security.listeners import (
    is_security_config,
    listener_value,
    parse_listener_list,
    resolve_listeners,
)
from server_ref.security.mechanisms import AuthFailure, PlainServer, parse_jaas
from server_ref.security.oauth import InvalidToken, validate_unsecured_jws
from server_ref.security.scram import (
    ScramFailure,
    ScramServer,
    derive_credential,
    salted_password,
)
from server_ref.security.tls import rfc2253

# RFC 7677 section 3: user "user", password "pencil".
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def rfc7677_server() -> ScramServer:
    salted = salted_password("SCRAM-SHA-256", "pencil", RFC7677_SALT, 4096)
    credential = derive_credential("SCRAM-SHA-256", salted, RFC7677_SALT, 4096)
    return ScramServer("SCRAM-SHA-256",
                       lambda user, mechanism: credential if user == "user" else None,
                       server_nonce=RFC7677_SERVER_NONCE)


def test_scram_sha256_matches_rfc7677() -> None:
    server = rfc7677_server()
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


@pytest.mark.parametrize(("first", "final", "public"), [
    (b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj"
     b")hNlF$k0,p=AAAAZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", False),  # wrong proof
    (b"n,,n=user,r=abc", b"c=biws,r=other,p=AAAA", False),  # nonce changed
    (b"n,,n=user,r=abc", b"c=eSws,r=abc%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA", False),
    (b"n,,n=nobody,r=abc", None, False),  # unknown user
    (b"p=tls-unique,,n=user,r=abc", None, True),  # channel binding
    (b"n,a=admin,n=user,r=abc", None, True),  # another authorization id
    (b"n,,n=user,r=abc,tokenauth=true", None, False),  # delegation token
    (b"garbage", None, False),
    (b"n,,n=us=er,r=abc", None, False),  # a bad escape in the name
])
def test_scram_refusals(first: bytes, final: bytes | None, public: bool) -> None:
    server = rfc7677_server()
    with pytest.raises(ScramFailure) as caught:
        server.evaluate(first)
        assert final is not None
        server.evaluate(final)
    assert caught.value.public is public
    assert not server.complete


def test_scram_credential_repr_hides_keys() -> None:
    credential = derive_credential("SCRAM-SHA-512", b"k" * 64, b"salt", 4096)
    assert "salt" not in repr(credential).replace("salt=[hidden]", "")
    assert repr(credential.stored_key) not in repr(credential)


@pytest.mark.parametrize(("subject", "name"), [
    ((( ("commonName", "client"),),), "CN=client"),
    (((("countryName", "US"),), (("organizationName", "Acme, Inc."),),
      (("commonName", "a+b"),)), "CN=a\\+b,O=Acme\\, Inc.,C=US"),
    (((("organizationalUnitName", "x"), ("commonName", "y")),), "OU=x+CN=y"),
    (((("commonName", " lead#"),),), "CN=\\ lead#"),
    (((("commonName", "#first"),),), "CN=\\#first"),
    (((("emailAddress", "a@b.c"),), (("commonName", "c"),)),
     "CN=c,1.2.840.113549.1.9.1=#16056140622e63"),  # Java 17 prints this
])
def test_rfc2253_as_java_prints_it(subject: tuple, name: str) -> None:
    assert rfc2253(subject) == name


def test_jaas_options() -> None:
    module, options = parse_jaas(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_q="a \\"quoted\\" one" '
        "unquoted=value;")
    assert module.endswith("PlainLoginModule")
    assert options == {"username": "admin", "password": "admin-secret",
                       "user_admin": "admin-secret", "user_q": 'a "quoted" one',
                       "unquoted": "value"}
    for bad in ("PlainLoginModule", "PlainLoginModule maybe;", 'M required a="b" c;',
                'M required user_a="top-secret" "x";'):
        with pytest.raises(ConfigError) as caught:
            parse_jaas(bad)
        assert "top-secret" not in str(caught.value)
    with pytest.raises(ConfigError, match="option 2"):
        parse_jaas('M required user_a="top-secret" "x";')


def test_plain_rules() -> None:
    server = PlainServer({"alice": "alice-secret"})
    assert server.evaluate(b"alice\0alice\0alice-secret") == b"" and server.username == "alice"
    for token, message in ((b"\0alice", "expected 3 tokens, got 2"),
                           (b"\0\0x", "username not specified"),
                           (b"\0alice\0", "password not specified"),
                           (b"bob\0alice\0alice-secret", "authorization id"),
                           (b"\0alice\0nope", "Invalid username or password")):
        with pytest.raises(AuthFailure, match=message):
            PlainServer({"alice": "alice-secret"}).evaluate(token)


def jws(claims: dict, header: dict | None = None) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


NOW_MS = 1_800_000_000_000


@pytest.mark.parametrize(("claims", "options", "outcome"), [
    ({"sub": "a", "exp": 1_800_000_010}, {}, ("a", 1_800_000_010_000)),
    ({"sub": "a", "exp": 1_800_000_000.5, "iat": 1_799_999_999}, {}, ("a", 1_800_000_000_500)),
    ({"sub": "a", "exp": 1_800_000_000}, {}, "expired"),
    ({"sub": "a", "exp": 1_800_000_000},
     {"unsecuredValidatorAllowableClockSkewMs": "1000"}, ("a", 1_800_000_000_000)),
    ({"sub": "a", "exp": 1_800_000_100, "iat": 1_800_000_001}, {}, "future"),
    ({"sub": "a", "exp": 1_800_000_100, "iat": 1_800_000_200}, {
        "unsecuredValidatorAllowableClockSkewMs": "500000"}, "before it was issued"),
    ({"exp": 1_800_000_100}, {}, "sub claim"),
    ({"sub": 7, "exp": 1_800_000_100}, {}, "sub claim"),
    ({"sub": "a"}, {}, "exp claim is missing"),
    ({"sub": "a", "exp": "soon"}, {}, "not a number"),
    ({"user": "u", "exp": 1_800_000_100}, {"unsecuredValidatorPrincipalClaimName": "user"},
     ("u", 1_800_000_100_000)),
    ({"sub": "a", "exp": 1_800_000_100, "scope": ["read", "write"]},
     {"unsecuredValidatorRequiredScope": "write read"}, ("a", 1_800_000_100_000)),
    ({"sub": "a", "exp": 1_800_000_100, "scope": "read"},
     {"unsecuredValidatorRequiredScope": "write"}, "required scope write"),
])
def test_unsecured_jws_validation(claims: dict, options: dict[str, str],
                                  outcome: tuple[str, int] | str) -> None:
    if isinstance(outcome, tuple):
        assert validate_unsecured_jws(jws(claims), options, NOW_MS) == outcome
    else:
        with pytest.raises(InvalidToken, match=outcome):
            validate_unsecured_jws(jws(claims), options, NOW_MS)


def test_unsecured_jws_shape() -> None:
    good = jws({"sub": "a", "exp": 1_900_000_000})
    for token in (good + "sig", good[:-1], jws({"sub": "a", "exp": 2e9}, {"alg": "HS256"}),
                  "not-base64!.e30.", ".."):
        with pytest.raises(InvalidToken):
            validate_unsecured_jws(token, {}, NOW_MS)


def test_listener_parsing_and_lookup() -> None:
    assert [(a.name, a.host, a.port) for a in parse_listener_list(
        "listeners", "plaintext://:9092, SASL_SSL://[::1]:9093")] == [
        ("PLAINTEXT", "", 9092), ("SASL_SSL", "::1", 9093)]
    for bad in ("PLAINTEXT://h", "PLAINTEXT://h:70000", "", "A://h:1,a://h:2"):
        with pytest.raises(ConfigError):
            parse_listener_list("listeners", bad)
    settings = {"connections.max.reauth.ms": "1",
                "listener.name.sasl_ssl.connections.max.reauth.ms": "2",
                "listener.name.sasl_ssl.plain.connections.max.reauth.ms": "3",
                "listener.name.OTHER.ssl.client.auth": "required"}
    assert listener_value(settings, "SASL_SSL", "connections.max.reauth.ms", "PLAIN") == "3"
    assert listener_value(settings, "SASL_SSL", "connections.max.reauth.ms",
                          "SCRAM-SHA-256") == "2"
    assert listener_value(settings, "EXTERNAL", "connections.max.reauth.ms") == "1"
    assert listener_value(settings, "OTHER", "ssl.client.auth") == "required"
    assert is_security_config("listener.name.x.ssl.keystore.location")
    assert is_security_config("sasl.enabled.mechanisms")
    assert not is_security_config("num.partitions")


def test_resolve_listeners_defaults_and_advertising() -> None:
    (only,) = resolve_listeners({}, "127.0.0.1", 9092, None)
    assert (only.name, only.protocol, only.host, only.port) == ("PLAINTEXT", "PLAINTEXT",
                                                                 "127.0.0.1", 9092)
    listeners = resolve_listeners({"listeners": "PLAINTEXT://0.0.0.0:0,SSL://:0",
                                   "advertised.listeners": "SSL://public.example:443"},
                                  "127.0.0.1", 9092, "broker.internal")
    assert [(x.advertised_host, x.advertised_port) for x in listeners] == [
        ("broker.internal", None), ("public.example", 443)]


def test_credential_file_round_trip(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path)
    credential = derive_credential("SCRAM-SHA-256", b"s" * 32, b"salt", 4096)
    store.apply({("ann", "SCRAM-SHA-256"): credential}, [])
    again = CredentialStore(tmp_path)
    again.load()
    assert again.get("ann", "SCRAM-SHA-256") == credential
    again.apply({}, [("ann", "SCRAM-SHA-256")])
    assert json.loads((tmp_path / "scram_credentials.json").read_text()) == {}
