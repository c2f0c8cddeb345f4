"""Read a Java ``.properties`` file (Kafka's ``producer.properties``, ``consumer.properties``)
into a dict every client takes as is: ``Producer(read_properties("producer.properties"))``.

The format is ``java.util.Properties``': ``key=value``, ``key: value`` or ``key value``;
``#`` and ``!`` start comment lines; a line ending in an odd number of backslashes goes on
on the next line (whose leading blanks are dropped); ``\\t \\n \\r \\f \\uXXXX`` are escapes
and a backslash before any other character keeps that character. A key given twice keeps
its last value, as Java's ``Properties.load`` does. Values stay strings: the clients' config
reads ``"5"`` as 5 and ``"true"`` as True.
"""

from __future__ import annotations

import os

__all__ = ["parse_properties", "read_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANK = " \t\f"


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """The settings of a properties file (ISO 8859-1 as Java reads it, UTF-8 accepted)."""
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return parse_properties(text)


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` lines -> a dict (see the module docstring for the format)."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending: str | None = None
    for natural in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        part = natural.lstrip(_BLANK)
        if pending is None and (not part or part[0] in "#!"):
            continue
        trailing = len(part) - len(part.rstrip("\\"))
        joined = part[:-1] if trailing % 2 else part
        pending = joined if pending is None else pending + joined
        if trailing % 2 == 0:
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _split(line: str) -> tuple[str, str]:
    """Cut at the first unescaped '=', ':' or blank; one separator and blanks around it go."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _BLANK:
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANK)
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise ValueError(f"malformed \\uXXXX escape in {text!r}") from None
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
