"""Sphinx configuration of the kafka-sdk API reference.

Build: ``.venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html``
(tests/tools/test_docs_build.py builds it the same way, warnings as errors).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the sdk package of this tree

project = "kafka-sdk"
author = "kafka-sdk authors"
copyright = "kafka-sdk authors"
release = "0.1.0"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.viewcode"]
exclude_patterns = ["_build"]
html_theme = "alabaster"

# Members in source order, as the faces group them (lifecycle, sending/consuming, ...);
# signatures keep their type hints, which are the typed-records contract.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = True
autoclass_content = "class"
