"""Build hook for the optional compiled fast path (``sdk/records/_fast.c``).

Everything else about the package lives in pyproject.toml. The extension is optional: when
it cannot be compiled (no compiler, no Python headers, a compiler without 128-bit integers)
the install still succeeds, prints one notice, and the SDK uses its pure-Python path
(``sdk.records.fast_path.IMPLEMENTATION`` says which one is in use).
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NOTICE = ("kafka-sdk: the compiled fast path (sdk.records._fast) could not be built ({}); "
          "the pure-Python path will be used.")


class OptionalBuildExt(build_ext):
    """build_ext that turns a failed compile into the notice above instead of an error."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all: distutils' platform errors
            self._notice(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # CompileError, LinkError, a missing compiler binary
            self._notice(exc)

    @staticmethod
    def _notice(exc: Exception) -> None:
        print(NOTICE.format(f"{type(exc).__name__}: {exc}".strip()), file=sys.stderr)


setup(
    ext_modules=[
        Extension(
            "sdk.records._fast",
            sources=["sdk/records/_fast.c"],
            extra_compile_args=["-O2"] if sys.platform != "win32" else [],
            optional=True,
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
