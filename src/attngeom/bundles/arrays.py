"""npz files and the arrays they hold: bounded reading, then the rules every valid array follows.

An npz is checked from its zip directory and each member's npy header (member count, declared
sizes, dtype, shape, and that the header describes exactly the bytes the member holds) before a
byte of an array is read, so a lying header or a zip bomb costs no memory. The arrays are then
held to the laws that made them (shapes, float16, finiteness, and the attention maps' row laws of
each variant). Every violation is an InputError naming the file, the array and the problem.
"""

from __future__ import annotations

import math
import threading
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attngeom.base import blocks
from attngeom.base.errors import InputError
from attngeom.geometry import laws

MAX_NPZ_MEMBERS = 256
MAX_NPZ_BYTES = 1 << 30  # declared uncompressed bytes of one npz, all members together
_BAD_ZIP = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)  # what damaged bytes raise
# numpy parses an npy header with ast.literal_eval, and CPython 3.11's parser is not safe on threads side by
# side ("SystemError: AST constructor recursion depth mismatch"): one header at a time
_ONE_HEADER_AT_A_TIME = threading.Lock()


@dataclass(frozen=True)
class Member:
    """One array of an npz as its header declares it, and where its data start in the member."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool = False
    offset: int = 0


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
    with _ONE_HEADER_AT_A_TIME:
        shape, fortran, dtype = read(f, max_header_size=10_000)
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
    return Member(tuple(shape), dtype, bool(fortran), header_len)


def load_npz(path: Path, max_bytes: int = MAX_NPZ_BYTES, skip=lambda key: False) -> dict[str, np.ndarray]:
    """Every array of an npz but those `skip` names, read only after `npz_members` found the file sound;
    the arrays side by side, one per core (zlib inflates without the interpreter lock)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: missing file")
    members = {key: m for key, m in npz_members(path, max_bytes).items() if not skip(key)}
    return dict(zip(members, blocks.each(lambda item: _read_member(path, *item), members.items())))


def _read_member(path: Path, key: str, member: Member) -> np.ndarray:
    """One array of a sound npz, through a zip handle of its own, as its header (read once, by
    `npz_members`) declares it; the zip's CRC is checked as the member's last byte is read."""
    flat = np.empty(math.prod(member.shape), dtype=member.dtype)
    try:
        with zipfile.ZipFile(path) as z, z.open(f"{key}.npy") as f:
            f.read(member.offset)
            got = f.readinto(memoryview(flat).cast("B")) if flat.nbytes else 0
            extra = f.read(1)  # the end of the member: its CRC is checked here
    except (*_BAD_ZIP, KeyError) as exc:
        raise InputError(f"{path}: corrupt or truncated npz ({type(exc).__name__}: {exc})") from exc
    if got != flat.nbytes or extra:
        raise InputError(f"{path}: corrupt or truncated npz ('{key}' does not hold the bytes its header declares)")
    return flat.reshape(member.shape, order="F" if member.fortran else "C")


def save_npz(path: Path, arrays: dict[str, np.ndarray], stored: tuple[str, ...] = ()) -> None:
    """Write an npz as np.savez_compressed does (the same bytes), except that the arrays named in
    `stored` are not deflated: float16 activations barely shrink (q and k of a windows file by 7%) and inflating them
    cost a fifth of reading the file, where a stored member is read at the speed of a copy."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as z:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED
            with z.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(array), allow_pickle=False)


def require_keys(path: Path, data: dict, keys: tuple[str, ...]) -> None:
    """Every one of `keys` is an array of the npz."""
    missing = [k for k in keys if k not in data]
    if missing:
        raise InputError(f"{path}: missing key(s) {', '.join(missing)} (has {', '.join(sorted(data)) or 'none'})")


def check_array(path: Path, key: str, arr: np.ndarray, shape: tuple, kind: str) -> None:
    """`arr` has `shape` (None: any length), and is finite float16 (`f16`) or integers (`int`).

    Finite, because every float the bundles hold is finite in a valid run: attention weights lie in
    [0, 1], and q, k are the float32 activations of a model whose training loss was finite, rounded to
    float16 (|x| <= 65504; a larger value becomes inf, which this format cannot hold and no statistic
    can use, so such a file is refused, saying why). A float16 is inf or NaN exactly when its five
    exponent bits (0x7C00) are all set, which is read from the bits without a float conversion.
    """
    if arr.ndim != len(shape) or any(want is not None and got != want for got, want in zip(arr.shape, shape)):
        want = "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
        raise InputError(f"{path}: '{key}' has shape {arr.shape}, expected {want}")
    if kind == "f16" and arr.dtype != np.float16:
        raise InputError(f"{path}: '{key}' has dtype {arr.dtype}, expected float16")
    if kind == "int" and arr.dtype.kind not in "iu":
        raise InputError(f"{path}: '{key}' has dtype {arr.dtype}, expected integers")
    if kind == "f16" and (np.bitwise_and(arr.view(np.uint16), 0x7C00) == 0x7C00).any():
        raise InputError(f"{path}: '{key}' holds NaN or inf (float16 holds finite values up to 65504)")


def check_int_range(path: Path, key: str, arr: np.ndarray, lo: int, hi: int) -> None:
    """Integers within [lo, hi]."""
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise InputError(f"{path}: '{key}' holds values outside [{lo}, {hi}]")


def check_attention(path: Path, key: str, attn_LHTT: np.ndarray, strict: bool, kernel: bool | None) -> None:
    """Attention maps (..., T, T), judged by the law of the variant that wrote them.

    - softmax (`kernel` False): a row is exp(s) / sum(exp(s)) over its keys, so it sums to 1;
    - kernel (`kernel` True): a row is kappa / (sum(kappa) + 1e-9) with kappa = (q.k + b)^2 / (d + eps)
      >= 0, so it sums to S / (S + 1e-9) for the row's kernel mass S: anything in [0, 1), near 0 when
      S is tiny (q.k close to -b on every key of the row);
    - `kernel` None (a file that does not say its variant): the loosest rule any variant satisfies,
      the kernel's;
    - a key the row cannot see (j > i; j >= i under the strict mask) has weight exactly 0 under every
      law (exp(-inf) = 0 for softmax, the kernel's masked kappa is set to 0), so a row with no key
      (row 0 under the strict mask) is all zeros; a file of unknown variant is held to the causal
      mask j <= i, which the strict one satisfies too (`strict` is then False).
    Weights are never negative. The tolerance is float16's: each of the T weights may be off by half
    an ulp of the largest value below 1 (2**-12), so a row may miss its sum by T * 2**-12; the float32
    normalisation adds a few 2**-24 at most. A masked zero stays exactly 0 in float16.

    The maps are float16 (`check_array`), finite. The first two laws are read from float16's bits
    (sign 0x8000, magnitude 0x7FFF): x < 0 exactly when the bits exceed 0x8000 (-0.0 is 0x8000), and
    x != 0 exactly when the magnitude bits are not all 0. Row sums are taken in float64 straight from
    float16, without a float64 copy of the maps: float16 values are multiples of 2**-24, so a sum of
    T <= 2**13 of them, each at most 1, is exact in float64's 53 bits, in any order (a row holding a
    larger one breaks the law in any order too).
    """
    T = attn_LHTT.shape[-1]
    tol = T * 2.0**-12
    bits = attn_LHTT.view(np.uint16)
    if (bits > 0x8000).any():
        raise InputError(f"{path}: '{key}' holds negative attention weights")
    hidden_TT = np.where(laws.available_TT(T, strict), 0, 0x7FFF).astype(np.uint16)
    if np.bitwise_and(bits, hidden_TT).any():
        raise InputError(f"{path}: '{key}' gives weight to keys a row cannot see (the {_mask(strict)} mask)")
    sums_LHT = attn_LHTT.sum(-1, dtype=np.float64)
    lo_T = np.zeros(T) if kernel is not False else np.ones(T)
    if strict:
        lo_T[0] = 0.0  # row 0 has no key: its weights were all checked to be 0 above
    hi_T = np.ones(T)
    off = np.maximum(lo_T - tol - sums_LHT, sums_LHT - hi_T - tol)
    if off.max(initial=-1.0) > 0:
        *windows, layer, head, t = np.unravel_index(off.argmax(), off.shape)  # a windows file leads with W
        where = "".join(f"window {w}, " for w in windows)
        want = f"{hi_T[t]:g}" if lo_T[t] == hi_T[t] else f"[{lo_T[t]:g}, {hi_T[t]:g}]"
        raise InputError(
            f"{path}: '{key}' row {t} of {where}layer {layer}, head {head} sums to "
            f"{sums_LHT[(*windows, layer, head, t)]:.4g}, expected {want} (attention weights)"
        )


def _mask(strict: bool) -> str:
    return "strict j < i" if strict else "causal j <= i"
