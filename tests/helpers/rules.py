"""Checks of a JSON rule the schema tests share: the one error line a document gets, or all its problems."""

from __future__ import annotations

import pytest

from attngeom.base.errors import InputError
from attngeom.base.json_rules import Spec, check


def refused(doc: object, spec: Spec, message: str) -> None:
    """`doc` breaks `spec` with exactly this one error line."""
    with pytest.raises(InputError) as caught:
        check(doc, spec, "f.json")
    assert str(caught.value) == f"f.json: {message}"


def problems(doc: object, spec: Spec) -> list[str]:
    """Every place where `doc` breaks `spec`, with its problem."""
    return [f"{where}: {what}" for where, what in spec.errors(doc, "")]
