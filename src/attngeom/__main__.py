"""`python -m attngeom`: the command line."""

from attngeom.cli import main

raise SystemExit(main())
