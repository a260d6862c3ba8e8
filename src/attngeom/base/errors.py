"""The one error type for unusable input, and the exit statuses every command ends with.

0 every judged claim passes, 1 a claim fails, 2 unusable input (`InputError`: one `error:` line),
3 an internal error (one line naming it and the log holding its traceback), and 128 + the signal
when a signal ends it (one line): 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.
"""


class InputError(Exception):
    """Input that cannot be judged: a missing, corrupt, mismatching or malformed file or setting."""


EXIT_PASS, EXIT_FAIL, EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPT = 0, 1, 2, 3, 130


def one_line(text: object) -> str:
    """A message on one line (its whitespace runs, line breaks included, as one space): what stderr
    shows of a path or a quoted error is never split into lines a reader takes for others."""
    return " ".join(str(text).split())
