"""The one error type for unusable input: it becomes a one-line message and exit status 2."""


class InputError(Exception):
    """Input that cannot be judged: a missing, corrupt, mismatching or malformed file or setting."""


EXIT_PASS, EXIT_FAIL, EXIT_INPUT = 0, 1, 2
