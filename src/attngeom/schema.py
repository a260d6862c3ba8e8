"""One schema per file kind the package reads, with bounds, checked before anything is used.

JSON is parsed with limits (file size, nesting depth counted without recursion, digits of an
integer); a schema then checks types, ranges and finiteness of every field the package uses.
An npz is checked from its zip directory and each member's npy header (member count, declared
sizes, dtype, shape, and that the header describes exactly the bytes the member holds) before a
byte of an array is read, so a lying header or a zip bomb costs no memory. Every violation is an
InputError naming the file, the place in it and the problem.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attngeom.errors import InputError

MAX_JSON_BYTES = 64 << 20
MAX_DEPTH = 64
MAX_INT_DIGITS = 19
MAX_NPZ_MEMBERS = 256
MAX_NPZ_BYTES = 1 << 30  # declared uncompressed bytes of one npz, all members together
_BAD_ZIP = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)  # what damaged bytes raise
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


# --- JSON schemas ------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Text(Spec):
    """A string of `min_len` to `max_len` characters, matching `pattern` as a whole when one is given."""

    max_len: int = 10_000
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
        return iter(()) if any(not f for f in found) else iter(found[0])


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
            if spec is None:
                yield place, f"unexpected key {key!r}"
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


POSITIVE_GRID = Items(Items(Number(lo=5e-324), max_len=4096), max_len=4096)
RUN_JSON = Record(
    {
        "runs": Items(
            Record(
                {
                    "variant": Text(100),
                    "seed": Number(0, 2**31 - 1, integer=True),
                    "best_val": Maybe(Number(0, 1e3)),  # null: stopped before its first evaluation
                    "b_learned": POSITIVE_GRID,
                    "eps_learned": POSITIVE_GRID,
                    "curve": Items(
                        Record(
                            {"step": Number(0, 10**9, integer=True), "val": Number(0, 1e3)}, required=("step", "val")
                        ),
                        max_len=100_000,
                    ),
                },
                required=("variant", "seed", "best_val"),
            ),
            max_len=10_000,
        ),
        "cfg": Record({"STEPS": Maybe(Number(1, 10**9, integer=True))}),
    },
    required=("runs", "cfg"),
)
"""`yat_attention.json` of a bundle folder: the run records and the training configuration."""

_VALUE = Either((Number(), Flag(), Text(), Items(Either((Number(), Text())), max_len=1000)))
_COMPARISON = Text(16)
CLAIMS_JSON = Record(
    {
        "claims": Items(
            Record(
                {
                    **{k: Text() for k in ("id", "claim", "quote", "source", "function", "unit", "reason", "tier")},
                    "args": Record(other=Either((Number(), Text(), Flag()))),
                    "value": _VALUE,
                    "comparison": _COMPARISON,
                    "tolerance": Maybe(Number(0)),
                }
            ),
            max_len=10_000,
        )
    },
)
"""expected/claims.json: the quoted claims (the fields each entry must have are checked on loading)."""

RERUN_JSON = Record(
    {
        "claims": Record(
            other=Record(
                {
                    "value": _VALUE,
                    "comparison": _COMPARISON,
                    "tolerance": Maybe(Number(0)),
                    "reason": Text(),
                    "smoke": Flag(),
                    "truncated": Flag(),
                },
                required=("reason",),
                other=None,
            )
        ),
        "steps": Record(
            other=Record(
                other=Record(
                    {
                        **{k: Text() for k in ("function", "label", "unit", "reason")},
                        "tolerance": Number(0),
                        "published": Record(other=Number()),
                    },
                    other=None,
                )
            )
        ),
    },
)
"""expected/rerun.json: the band each claim is judged with on a rerun."""


_STEP = Number(0, 10**9, integer=True)
MANIFEST_JSON = Record(
    {
        "completed": Flag(),
        "config": Record(
            {
                "preset": Text(100),
                "variants": Items(Text(100), max_len=100),
                "seeds": Items(Number(0, 2**31 - 1, integer=True), max_len=1000),
                "train": Record({"steps": _STEP, "stop_after": Maybe(_STEP)}),
            }
        ),
        "files": Record(other=Text(64), max_len=100_000),
        "stopped_after": Maybe(_STEP),
        "windows": Maybe(Number(1, 4096, integer=True)),
        "preflight": Maybe(Record({"verdict": Text(16), "steps": Maybe(_STEP)})),
        "error": Text(),
        "wall_s": Maybe(Number(0)),
    },
    required=("completed", "config"),
)
"""A run folder's manifest.json: the facts the package acts on are checked, the rest is provenance."""


# --- npz -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """One array of an npz as its header declares it."""

    shape: tuple[int, ...]
    dtype: np.dtype


def npz_members(path: Path, max_bytes: int = MAX_NPZ_BYTES) -> dict[str, Member]:
    """The arrays of an npz by name, from its directory and npy headers, checked to be sound."""
    path = Path(path)
    members: dict[str, Member] = {}
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            if len(infos) > MAX_NPZ_MEMBERS:
                raise InputError(f"{path}: {len(infos)} members (at most {MAX_NPZ_MEMBERS})")
            declared = sum(i.file_size for i in infos)
            if declared > max_bytes:
                raise InputError(f"{path}: declares {declared:,} bytes uncompressed (at most {max_bytes:,})")
            for info in infos:
                if not info.filename.endswith(".npy"):
                    raise InputError(f"{path}: member {info.filename!r} is not an array")
                with z.open(info) as f:
                    members[info.filename[: -len(".npy")]] = _npy_header(path, info, f)
    except (*_BAD_ZIP, zipfile.LargeZipFile, NotImplementedError) as exc:
        raise InputError(f"{path}: corrupt or truncated npz ({type(exc).__name__}: {exc})") from exc
    return members


def _npy_header(path: Path, info: zipfile.ZipInfo, f) -> Member:
    version = np.lib.format.read_magic(f)
    read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
    if read is None:
        raise ValueError(f"npy format version {version} in {info.filename}")
    shape, _, dtype = read(f, max_header_size=10_000)
    if dtype.hasobject or dtype.kind not in "biuf":
        raise InputError(f"{path}: '{info.filename[:-4]}' has dtype {dtype}, not numbers")
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise InputError(f"{path}: '{info.filename[:-4]}' declares shape {shape}")
    header_len = f.tell()
    if math.prod(shape) * dtype.itemsize != info.file_size - header_len:
        raise InputError(
            f"{path}: '{info.filename[:-4]}' declares shape {shape} of {dtype} "
            f"({math.prod(shape) * dtype.itemsize:,} bytes) but holds {info.file_size - header_len:,}"
        )
    return Member(tuple(shape), dtype)


def load_npz(path: Path, max_bytes: int = MAX_NPZ_BYTES) -> dict[str, np.ndarray]:
    """Every array of an npz, read only after `npz_members` found the file sound."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: missing file")
    npz_members(path, max_bytes)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (*_BAD_ZIP, KeyError) as exc:
        raise InputError(f"{path}: corrupt or truncated npz ({type(exc).__name__}: {exc})") from exc


def require_keys(path: Path, data: dict, keys: tuple[str, ...]) -> None:
    """Every one of `keys` is an array of the npz."""
    missing = [k for k in keys if k not in data]
    if missing:
        raise InputError(f"{path}: missing key(s) {', '.join(missing)} (has {', '.join(sorted(data)) or 'none'})")


def check_array(path: Path, key: str, arr: np.ndarray, shape: tuple, kind: str) -> None:
    """`arr` has `shape` (None: any length), and is finite float16 (`f16`) or integers (`int`)."""
    if arr.ndim != len(shape) or any(want is not None and got != want for got, want in zip(arr.shape, shape)):
        want = "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
        raise InputError(f"{path}: '{key}' has shape {arr.shape}, expected {want}")
    if kind == "f16" and arr.dtype != np.float16:
        raise InputError(f"{path}: '{key}' has dtype {arr.dtype}, expected float16")
    if kind == "int" and arr.dtype.kind not in "iu":
        raise InputError(f"{path}: '{key}' has dtype {arr.dtype}, expected integers")
    if kind == "f16" and not np.isfinite(arr).all():
        raise InputError(f"{path}: '{key}' holds NaN or inf")


def check_int_range(path: Path, key: str, arr: np.ndarray, lo: int, hi: int) -> None:
    """Integers within [lo, hi]."""
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise InputError(f"{path}: '{key}' holds values outside [{lo}, {hi}]")


def check_attention(path: Path, key: str, attn_LHTT: np.ndarray, strict: bool, kernel: bool | None) -> None:
    """Attention maps, judged by the law of the variant that wrote them.

    - softmax (`kernel` False): a row is exp(s) / sum(exp(s)) over its keys, so it sums to 1;
    - kernel (`kernel` True): a row is kappa / (sum(kappa) + 1e-9) with kappa >= 0, so it sums to
      S / (S + 1e-9) for the row's kernel mass S: anything in [0, 1), near 0 when S is tiny;
    - `kernel` None (a file that does not say its variant): the loosest rule any variant satisfies,
      the kernel's;
    - a row with no key (row 0 under the strict mask) is all zeros under every law.
    Weights are never negative. The tolerance is float16's: each of the T weights may be off by half
    an ulp of the largest value below 1 (2**-12), so a row may miss its sum by T * 2**-12.
    """
    T = attn_LHTT.shape[-1]
    tol = T * 2.0**-12
    sums_LHT = attn_LHTT.astype(np.float64).sum(-1)
    if (attn_LHTT < 0).any():
        raise InputError(f"{path}: '{key}' holds negative attention weights")
    lo_T = np.zeros(T) if kernel is not False else np.ones(T)
    hi_T = np.ones(T)
    if strict:
        lo_T[0] = hi_T[0] = 0.0
    off = np.maximum(lo_T - tol - sums_LHT, sums_LHT - hi_T - tol)
    if off.max(initial=-1.0) > 0:
        *windows, layer, head, t = np.unravel_index(off.argmax(), off.shape)  # a windows file leads with W
        where = "".join(f"window {w}, " for w in windows)
        want = f"{hi_T[t]:g}" if lo_T[t] == hi_T[t] else f"[{lo_T[t]:g}, {hi_T[t]:g}]"
        raise InputError(
            f"{path}: '{key}' row {t} of {where}layer {layer}, head {head} sums to "
            f"{sums_LHT[(*windows, layer, head, t)]:.4g}, expected {want} (attention weights)"
        )
