"""JSON read within limits, and the rules a document is checked by before anything is used.

JSON is parsed with limits (file size, nesting depth counted without recursion, digits of an
integer); a rule (`Spec`) then checks types, ranges and finiteness of every field the package uses.
Every violation is an InputError naming the file, the place in it and the problem. The rules of each
file kind are in `schema` and `schema_results`; the npz files and their arrays are checked by `arrays`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attngeom.base.errors import InputError

MAX_JSON_BYTES = 64 << 20
MAX_DEPTH = 64
MAX_INT_DIGITS = 19
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


# --- JSON ------------------------------------------------------------------------------------


def nesting_depth(text: str) -> int:
    """Deepest nesting of arrays and objects in a JSON text, counted without recursion."""
    codes = np.frombuffer(_STRING.sub("", text).encode("utf-8"), np.uint8)
    step = np.isin(codes, (ord("["), ord("{"))).astype(np.int64) - np.isin(codes, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(digits)


def parse_json(text: str, where: str) -> object:
    """Parse JSON text within the limits; NaN and infinities parse as floats, for the schema to refuse."""
    if nesting_depth(text) > MAX_DEPTH:
        raise InputError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_int=_int)
    except ValueError as exc:  # JSONDecodeError is a ValueError, and so are _int's refusals
        raise InputError(f"{where}: not valid JSON ({exc})") from exc


def read_json(path: Path, spec: Spec | None = None, max_bytes: int = MAX_JSON_BYTES) -> object:
    """Read a JSON file within the limits and check it against `spec`."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except FileNotFoundError as exc:
        raise InputError(f"{path}: missing file") from exc
    except OSError as exc:
        raise InputError(f"{path}: unreadable ({exc.strerror or exc})") from exc
    if len(raw) > max_bytes:
        raise InputError(f"{path}: larger than {max_bytes >> 20} MiB, not a file of this kind")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (not UTF-8: {exc.reason} at byte {exc.start})") from exc
    doc = parse_json(text, str(path))
    if spec is not None:
        check(doc, spec, str(path))
    return doc


# --- rules ------------------------------------------------------------------------------------


class Spec:
    """A rule for one JSON value: `errors(value)` yields (place, problem) for what breaks it."""

    def errors(self, value: object, place: str):  # pragma: no cover - every rule overrides it
        raise NotImplementedError


@dataclass(frozen=True)
class Any_(Spec):
    def errors(self, value, place):
        return iter(())


@dataclass(frozen=True)
class Number(Spec):
    """A finite number in [lo, hi]; `integer` also refuses floats and booleans."""

    lo: float = -math.inf
    hi: float = math.inf
    integer: bool = False

    def errors(self, value, place):
        kinds = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            yield place, f"{_kind(value)} where {'an integer' if self.integer else 'a number'} is due"
        elif not math.isfinite(value):
            yield place, f"{value} is not a finite number"
        elif not self.lo <= value <= self.hi:
            yield place, f"{value} is outside [{self.lo:g}, {self.hi:g}]"


MAX_TEXT = 10_000  # the longest free text a file holds (a summary's `what`, a run's `note`)


@dataclass(frozen=True)
class Text(Spec):
    """A string of `min_len` to `max_len` characters, matching `pattern` as a whole when one is given."""

    max_len: int = MAX_TEXT
    pattern: str = ""
    min_len: int = 0

    def errors(self, value, place):
        if not isinstance(value, str):
            yield place, f"{_kind(value)} where a string is due"
        elif not self.min_len <= len(value) <= self.max_len:
            yield place, f"a string of {len(value)} characters ({self.min_len} to {self.max_len})"
        elif self.pattern and not re.fullmatch(self.pattern, value):
            yield place, f"{value[:80]!r} does not match {self.pattern}"


@dataclass(frozen=True)
class Flag(Spec):
    def errors(self, value, place):
        if not isinstance(value, bool):
            yield place, f"{_kind(value)} where true or false is due"


@dataclass(frozen=True)
class Maybe(Spec):
    """null or `inner`."""

    inner: Spec

    def errors(self, value, place):
        return iter(()) if value is None else self.inner.errors(value, place)


@dataclass(frozen=True)
class Either(Spec):
    """Any of `options`."""

    options: tuple[Spec, ...]

    def errors(self, value, place):
        found = [list(o.errors(value, place)) for o in self.options]
        if any(not f for f in found):
            return iter(())
        return iter(max(found, key=lambda f: f[0][0].count(".") + f[0][0].count("[")))  # the option that got furthest


@dataclass(frozen=True)
class Items(Spec):
    """A list of `min_len` to `max_len` items, each `item`."""

    item: Spec
    max_len: int = 100_000
    min_len: int = 0

    def errors(self, value, place):
        if not isinstance(value, list):
            yield place, f"{_kind(value)} where a list is due"
        elif not self.min_len <= len(value) <= self.max_len:
            yield place, f"a list of {len(value)} items ({self.min_len} to {self.max_len})"
        else:
            for i, v in enumerate(value):
                yield from self.item.errors(v, f"{place}[{i}]")


@dataclass(frozen=True)
class Record(Spec):
    """An object with `fields` (those in `required` must be present); other keys are `other`."""

    fields: dict[str, Spec] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    other: Spec | None = Any_()
    max_len: int = 10_000
    keys: str = ""  # a pattern the other keys must match as a whole

    def errors(self, value, place):
        if not isinstance(value, dict):
            yield place, f"{_kind(value)} where an object is due"
            return
        if len(value) > self.max_len:
            yield place, f"an object of {len(value)} keys (at most {self.max_len})"
            return
        missing = [k for k in self.required if k not in value]
        if missing:
            yield place, f"missing key(s) {', '.join(missing)}"
        for key, v in value.items():
            spec = self.fields.get(key, self.other)
            if spec is None or (key not in self.fields and self.keys and not re.fullmatch(self.keys, key)):
                yield place, f"unexpected key {key[:80]!r}"
            else:
                yield from spec.errors(v, f"{place}.{key}" if place else key)


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def check(doc: object, spec: Spec, where: str) -> None:
    """Raise InputError for the first place where `doc` breaks `spec`."""
    for place, problem in spec.errors(doc, ""):
        raise InputError(f"{where}: {place or 'the document'}: {problem}")
