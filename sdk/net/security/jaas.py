"""Java's ``sasl.jaas.config`` string, read the way Kafka's JaasConfig reads a client's:

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="alice" password="secret";

One login module: its class, a control flag, then ``key=value`` options (values quoted with
``"..."``, backslash escapes allowed inside, or bare words), ended by ``;``. The module class
names the SASL mechanism family (PLAIN, SCRAM, OAUTHBEARER). Errors never quote values:
the string holds a password.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdk.errors import ConfigError

__all__ = ["JaasLogin", "parse_jaas_config"]

_KEY = "sasl.jaas.config"
_FLAGS = ("required", "requisite", "sufficient", "optional")
# Login module class -> the mechanisms it serves.
MODULES: dict[str, tuple[str, ...]] = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256",
                                                                "SCRAM-SHA-512"),
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": ("OAUTHBEARER",),
}


@dataclass(frozen=True)
class JaasLogin:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict, repr=False)  # holds secrets

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return MODULES.get(self.module, ())


def _error(why: str) -> ConfigError:
    return ConfigError(f"{why} (expected: '<LoginModule class> required key=\"value\" ...;')",
                       key=_KEY)


def parse_jaas_config(text: str) -> JaasLogin:
    """The one login module of a client's ``sasl.jaas.config`` (ConfigError if malformed
    or for a module this client does not know)."""
    tokens = _tokens(text)
    if not tokens or tokens[-1] != (";", False):
        raise _error("must end with ';'")
    tokens = tokens[:-1]
    if (";", False) in tokens:
        raise _error("holds more than one login module; a client takes exactly one")
    if len(tokens) < 2 or tokens[0][1] or tokens[1][1]:
        raise _error("must start with the login module class and a control flag")
    module, flag = tokens[0][0], tokens[1][0].lower()
    if flag not in _FLAGS:
        raise _error(f"the control flag must be one of {', '.join(_FLAGS)}")
    if module not in MODULES:
        known = ", ".join(MODULES)
        raise ConfigError(f"login module {module!r} is not supported; use one of {known}",
                          key=_KEY)
    options: dict[str, str] = {}
    rest = tokens[2:]
    i = 0
    while i < len(rest):
        if (i + 2 >= len(rest) or rest[i][1] or rest[i + 1] != ("=", False)):
            raise _error(f"option {i // 3 + 1} is not key=value")
        options[rest[i][0]] = rest[i + 2][0]
        i += 3
    return JaasLogin(module, flag, options)


def _tokens(text: str) -> list[tuple[str, bool]]:
    """Words, quoted strings (flagged True), '=' and ';'."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "=;":
            out.append((ch, False))
            i += 1
        elif ch == '"':
            i += 1
            chars: list[str] = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(text[i])
                i += 1
            if i >= n:
                raise _error("a quoted value is not closed")
            out.append(("".join(chars), True))
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            out.append((text[start:i], False))
    return out
