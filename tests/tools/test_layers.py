"""Import layering (DESIGN.md §3): every import of our own packages must follow the arrows.

Walks every .py file under sdk/, server_ref/ and examples/ with ``ast`` — module-level,
function-level and ``TYPE_CHECKING`` imports alike, relative imports resolved — and reports
each import the table below does not allow, as ``file:line``.

Reading the table: the *importer* row is matched by the longest module prefix; ``pkg.*`` means
the package and every module in it, a bare name means that one module only (a "public face").
Third-party and standard-library imports are not checked. tests/, tools/ and bench/ may import
anything.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("sdk", "server_ref", "examples")  # top-level names whose imports are checked

ERRORS_AND_TYPES = ["sdk.errors", "sdk.types", "sdk.error_codes"]
BELOW_ROLES = ["sdk.net.*", "sdk.metrics.*", "sdk.protocol.*", "sdk.records.*", "sdk.config",
               *ERRORS_AND_TYPES]
PUBLIC_FACES = ["sdk", "sdk.producer", "sdk.consumer", "sdk.admin", "sdk.share"]

# importer                 may import
LAYERS: dict[str, list[str]] = {
    "sdk.error_codes":     [],
    "sdk.errors":          ERRORS_AND_TYPES,
    "sdk.types":           ERRORS_AND_TYPES,
    "sdk.config":          ["sdk.config", *ERRORS_AND_TYPES],
    "sdk.protocol":        ["sdk.protocol.*", *ERRORS_AND_TYPES],
    "sdk.records":         ["sdk.records.*", "sdk.protocol.primitives", *ERRORS_AND_TYPES],
    "sdk.net":             ["sdk.net.*", "sdk.metrics.*", "sdk.protocol.*", "sdk.records.*",
                            "sdk.config", *ERRORS_AND_TYPES],
    # observability, below the network layer: knows connections and batches by duck typing
    "sdk.metrics":         ["sdk.metrics.*", *ERRORS_AND_TYPES],
    "sdk.producer":        ["sdk.producer.*", *BELOW_ROLES],
    "sdk.consumer":        ["sdk.consumer.*", *BELOW_ROLES],
    "sdk.admin":           ["sdk.admin.*", *BELOW_ROLES],
    "sdk.share":           ["sdk.share.*", *BELOW_ROLES],
    "sdk.spark":           ["sdk.spark.*", *PUBLIC_FACES, *BELOW_ROLES],
    "sdk.cli":             ["sdk.cli.*", *PUBLIC_FACES, *BELOW_ROLES],
    "sdk":                 ["sdk.*"],  # the package root re-exports the public faces
    "server_ref":          ["server_ref.*", "sdk.protocol.*", "sdk.records.*",
                            *ERRORS_AND_TYPES],
    "examples":            ["sdk", "sdk.errors", "sdk.spark", "server_ref"],
}
# Modules directly under sdk/ that are the package root's own helpers (CLI entry points).
SDK_ROOT_HELPERS = {"sdk.__main__"}


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    importer: str
    imported: str
    reason: str

    def __str__(self) -> str:
        rel = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{rel}:{self.line}: {self.importer} imports {self.imported} ({self.reason})"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    """Longest table key that is ``module`` or a package containing it."""
    if module in SDK_ROOT_HELPERS:
        return "sdk"
    best = None
    for key in LAYERS:
        if module == key or module.startswith(key + "."):
            if best is None or len(key) > len(best):
                best = key
    if best == "sdk" and module != "sdk":
        return None  # a new module directly under sdk/: it needs its own row
    return best


def allowed(imported: str, rules: list[str]) -> bool:
    for rule in rules:
        if rule.endswith(".*"):
            pkg = rule[:-2]
            if imported == pkg or imported.startswith(pkg + "."):
                return True
        elif imported == rule:
            return True
    return False


def _is_module(name: str, root: Path) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imported_modules(tree: ast.AST, module: str, is_package: bool,
                     root: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file; ``from X import y`` names X.y when that is
    a module of ours, else X."""
    out: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                keep = len(base_parts) - (node.level - 1)
                if keep < 0:
                    out.append((node.lineno, "<relative import above the top package>"))
                    continue
                base = ".".join(base_parts[:keep] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}" if base else alias.name
                out.append((node.lineno, candidate if _is_module(candidate, root) else base))
    return out


def check_tree(root: Path) -> list[Violation]:
    violations: list[Violation] = []
    for top in OURS:
        for path in sorted((root / top).rglob("*.py")):
            module = module_name(path, root)
            layer = layer_of(module)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            if layer is None:
                violations.append(Violation(path, 1, module, "-",
                                            "module has no row in the layer table"))
                continue
            for line, imported in imported_modules(tree, module, path.name == "__init__.py",
                                                   root):
                if imported.split(".")[0] not in OURS and not imported.startswith("<"):
                    continue
                if not allowed(imported, LAYERS[layer]):
                    violations.append(Violation(path, line, module, imported,
                                                f"layer {layer} may import only "
                                                f"{', '.join(LAYERS[layer]) or 'nothing of ours'}"))
    return violations


# ----------------------------------------------------------------------------- the real tree


def test_the_project_follows_the_layer_table() -> None:
    violations = check_tree(ROOT)
    assert not violations, "layer violations:\n" + "\n".join(map(str, violations))


def test_the_table_classifies_the_packages_that_exist() -> None:
    for package in ("sdk/protocol", "sdk/records", "sdk/net", "server_ref"):
        if (ROOT / package).is_dir():
            assert layer_of(package.replace("/", ".")) is not None


# ----------------------------------------------------------------------------- the checker


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for top in OURS:
        (tmp_path / top).mkdir(exist_ok=True)
    return tmp_path


def _reported(violations: list[Violation]) -> set[tuple[str, int, str]]:
    return {(v.importer, v.line, v.imported) for v in violations}


def test_checker_catches_each_kind_of_violation(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "sdk/__init__.py": "from sdk.producer import Producer\n",
        "sdk/errors.py": "",
        "sdk/types.py": "import sdk.errors\n",
        "sdk/net/__init__.py": "",
        "sdk/protocol/__init__.py": "",
        "sdk/protocol/framing.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from sdk.net import Client\n"           # line 3: protocol -> net
            "def f():\n"
            "    import sdk.records.builder\n"           # line 5: function-level
            "from . import primitives\n"                 # fine
            "from ..errors import KafkaError\n"),        # fine, relative
        "sdk/protocol/primitives.py": "",
        "sdk/records/__init__.py": "",
        "sdk/records/builder.py": (
            "from sdk.protocol.primitives import INT32\n"  # fine
            "from sdk.protocol import framing\n"),         # line 2: records -> protocol.framing
        "sdk/producer/__init__.py": "from sdk.consumer import x\n",      # sibling
        "sdk/producer/sender.py": "from ..net import client\n",          # fine
        "sdk/consumer/__init__.py": "",
        "sdk/spark/__init__.py": (
            "from sdk.producer import Producer\n"          # public face: fine
            "from sdk.producer.sender import Sender\n"),    # line 2: internal of a role
        "sdk/newthing.py": "",                              # no row in the table
        "server_ref/__init__.py": "from sdk.net.client import NetClient\n",
        "examples/demo.py": "from sdk import Producer\nfrom sdk.producer.sender import Sender\n",
    })
    got = _reported(check_tree(root))
    assert got == {
        ("sdk.protocol.framing", 3, "sdk.net"),
        ("sdk.protocol.framing", 5, "sdk.records.builder"),
        ("sdk.records.builder", 2, "sdk.protocol.framing"),
        ("sdk.producer", 1, "sdk.consumer"),
        ("sdk.spark", 2, "sdk.producer.sender"),
        ("sdk.newthing", 1, "-"),
        ("server_ref", 1, "sdk.net.client"),
        ("examples.demo", 2, "sdk.producer.sender"),
    }


def test_violation_message_has_file_and_line(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"server_ref/x.py": "\n\nimport sdk.producer\n"})
    (violation,) = check_tree(root)
    text = str(violation)
    assert text.startswith(str(tmp_path / "server_ref" / "x.py") + ":3: ")
    assert "server_ref.x imports sdk.producer" in text


@pytest.mark.parametrize(("module", "layer"), [
    ("sdk.protocol.messages.produce", "sdk.protocol"), ("sdk.errors", "sdk.errors"),
    ("sdk", "sdk"), ("sdk.__main__", "sdk"), ("server_ref.handlers.fetch", "server_ref"),
    ("sdk.consumer.assignors.range", "sdk.consumer"), ("sdk.unlisted", None),
])
def test_layer_lookup(module: str, layer: str | None) -> None:
    assert layer_of(module) == layer
