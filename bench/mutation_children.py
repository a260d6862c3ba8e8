"""pytest plugin of `bench mutation`: a test's subprocess runs the mutated code only when a mutant is under test.

mutmut marks each phase in the environment variable MUTANT_UNDER_TEST, which a test's subprocess
inherits. In the phase that records which tests reach which function ("stats"), the mutated code in a
subprocess asks for mutmut's settings in the subprocess's own folder and fails, so a test that runs the
command line in a subprocess fails. This plugin keeps "stats" in the test process alone (mutmut keeps a
copy of its own there): the subprocess runs the code as it is, and records nothing (it never could).
With a mutant under test the subprocess inherits its name and runs it, so such a test can catch it.
"""

from __future__ import annotations

import os


def pytest_configure(config) -> None:
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        del os.environ["MUTANT_UNDER_TEST"]
