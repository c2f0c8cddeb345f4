"""``python -m sdk``: the kafka-sdk command-line tool (see :mod:`sdk.cli`)."""

import sys

from sdk.cli import main

sys.exit(main())
