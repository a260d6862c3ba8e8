"""`python -m attngeom`: the command line (a Ctrl-C while it loads is one line and 130 too)."""

import sys

try:
    from attngeom.cli import entry
except KeyboardInterrupt:
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None

entry()
