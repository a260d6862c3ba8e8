"""The one error type for unusable input, and the exit statuses every command ends with.

0 every judged claim passes, 1 a claim fails, 2 unusable input (`InputError`: one `error:` line),
3 an internal error (one line naming it and the log holding its traceback), and 128 + the signal
when a signal ends it (one line): 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.

Standard library only: the line of an internal error is written even where a dependency cannot be
imported.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path


class InputError(Exception):
    """Input that cannot be judged: a missing, corrupt, mismatching or malformed file or setting."""


EXIT_PASS, EXIT_FAIL, EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPT = 0, 1, 2, 3, 130


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def one_line(text: object) -> str:
    """A message on one line (its whitespace runs, line breaks included, as one space), its other control
    characters written as escapes: what stderr shows of a path or a quoted error (a remote service's
    included) is never split into lines a reader takes for others, nor moves or colours the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", " ".join(str(text).split()))


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)  # no space left: unusable output, not an internal error
UNWRITABLE = (*FULL_DISK, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EISDIR, errno.ENOTDIR)


def shown(path: Path | str) -> str:
    """A path as text that can always be written: bytes that are not UTF-8 appear as \\xNN."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
