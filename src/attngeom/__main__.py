"""`python -m attngeom`: the command line (a Ctrl-C while it loads is one line and 130 too)."""

import os

from attngeom.base.errors import EXIT_INTERRUPT

try:
    from attngeom.cli import entry
except KeyboardInterrupt:
    try:
        os.write(2, b"interrupted\n")
    except OSError:  # stderr closed
        pass
    raise SystemExit(EXIT_INTERRUPT) from None

entry()
