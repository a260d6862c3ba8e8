"""npz files read from their headers before any byte of an array, and the row laws of attention maps."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays as np_arrays

from attngeom.base.errors import InputError
from attngeom.bundles import arrays
from attngeom.geometry import laws


def _npz(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def _npy(arr: np.ndarray) -> bytes:
    f = io.BytesIO()
    np.lib.format.write_array(f, arr, allow_pickle=True)
    return f.getvalue()


def test_npz_members_come_from_the_headers(tmp_path):
    np.savez_compressed(tmp_path / "a.npz", q=np.zeros((2, 3), np.float16), t=np.arange(4))
    members = arrays.npz_members(tmp_path / "a.npz")
    assert members["q"] == arrays.Member((2, 3), np.dtype(np.float16), False, 128)  # a version 1.0 header
    assert members["t"].shape == (4,)


def test_the_arrays_read_are_what_numpy_reads_in_either_order(tmp_path):
    rng = np.random.default_rng(0)
    saved = {
        "c": rng.normal(size=(3, 4)).astype(np.float16),
        "f": np.asfortranarray(rng.normal(size=(3, 4))),
        "big": np.arange(24, dtype=">i4").reshape(2, 3, 4),
        "empty": np.zeros((0, 5)),
    }
    np.savez_compressed(tmp_path / "a.npz", **saved)
    read = arrays.load_npz(tmp_path / "a.npz")
    for key, a in saved.items():
        assert read[key].dtype == a.dtype and read[key].flags.writeable, key
        np.testing.assert_array_equal(read[key], a, err_msg=key)


def test_an_npz_with_stored_members_is_what_numpy_reads_and_stores_only_those(tmp_path):
    rng = np.random.default_rng(1)
    saved = {"q": rng.normal(size=(2, 3, 8)).astype(np.float16), "attn": np.tril(np.ones((8, 8), np.float16))}
    arrays.save_npz(tmp_path / "a.npz", saved, stored=("q",))
    with zipfile.ZipFile(tmp_path / "a.npz") as z:
        kinds = {i.filename: i.compress_type for i in z.infolist()}
    assert kinds == {"q.npy": zipfile.ZIP_STORED, "attn.npy": zipfile.ZIP_DEFLATED}
    read, by_numpy = arrays.load_npz(tmp_path / "a.npz"), np.load(tmp_path / "a.npz")
    arrays.save_npz(tmp_path / "all.npz", saved)
    np.savez_compressed(tmp_path / "numpy.npz", **saved)
    assert (tmp_path / "all.npz").read_bytes() == (tmp_path / "numpy.npz").read_bytes()
    for key, a in saved.items():
        np.testing.assert_array_equal(read[key], a, err_msg=key)
        np.testing.assert_array_equal(by_numpy[key], a, err_msg=key)


def test_a_member_whose_bytes_were_changed_fails_its_crc(tmp_path):
    path = tmp_path / "a.npz"
    np.savez(path, q=np.arange(1000, dtype=np.float64))  # stored: its bytes lie in the file as they are
    raw = bytearray(path.read_bytes())
    at = raw.index(np.arange(1000, dtype=np.float64)[500:501].tobytes())
    raw[at] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(InputError, match="corrupt or truncated npz"):
        arrays.load_npz(path)


@pytest.mark.parametrize(
    "members, message",
    [
        ({"a.txt": b"hi"}, "not an array"),
        ({"o.npy": _npy(np.array([{}], dtype=object))}, "not numbers"),
        (
            {"q.npy": _npy(np.zeros(8, np.float16))[:-2]},
            "declares shape \\(8,\\) of float16 \\(16 bytes\\) but holds 14",
        ),
        ({"q.npy": b"\x93NUMPY\x09\x00"}, "corrupt or truncated npz"),
        ({f"m{i}.npy": _npy(np.zeros(1)) for i in range(arrays.MAX_NPZ_MEMBERS + 1)}, "members \\(at most"),
    ],
    ids=["not npy", "object dtype", "short payload", "bad version", "too many members"],
)
def test_unsound_npz_is_refused_before_reading(tmp_path, members, message):
    _npz(tmp_path / "a.npz", members)
    with pytest.raises(InputError, match=message):
        arrays.load_npz(tmp_path / "a.npz")


def test_declared_sizes_are_bounded(tmp_path):
    np.savez_compressed(tmp_path / "a.npz", q=np.zeros(1000, np.float16))
    with pytest.raises(InputError, match="declares 2,128 bytes uncompressed \\(at most 1,000\\)"):
        arrays.npz_members(tmp_path / "a.npz", max_bytes=1000)


@pytest.mark.parametrize("kernel", [False, True, None])
def test_attention_rows_sum_to_one_or_zero_without_keys(kernel):
    T = 6
    causal = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    arrays.check_attention("a", "m", causal[None, None].astype(np.float16), strict=False, kernel=kernel)
    strict = np.tril(np.ones((T, T)), -1)
    strict[1:] /= np.arange(1, T)[:, None]
    arrays.check_attention("a", "m", strict[None, None].astype(np.float16), strict=True, kernel=kernel)
    with pytest.raises(InputError, match=r"gives weight to keys a row cannot see \(the strict j < i mask\)"):
        arrays.check_attention("a", "m", causal[None, None].astype(np.float16), strict=True, kernel=kernel)
    with pytest.raises(InputError, match="row 2 of layer 0, head 0 sums to 1.5"):
        over = causal.copy()
        over[2, 0] += 0.5
        arrays.check_attention("a", "m", over[None, None].astype(np.float16), strict=False, kernel=kernel)


def test_a_kernel_row_of_tiny_mass_sums_below_one_and_only_softmax_refuses_it():
    """kappa / (S + 1e-9) with S = 2.4e-8 on a one-key row sums to S / (S + 1e-9) = 0.96."""
    T, S = 6, 2.4e-8
    attn = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    attn[0, 0] = S / (S + 1e-9)
    maps = attn[None, None].astype(np.float16)
    arrays.check_attention("a", "m", maps, strict=False, kernel=True)
    arrays.check_attention("a", "m", maps, strict=False, kernel=None)
    with pytest.raises(InputError, match="row 0 of layer 0, head 0 sums to 0.96, expected 1"):
        arrays.check_attention("a", "m", maps, strict=False, kernel=False)


def _one_hot_with_last_row(weights_T: np.ndarray) -> np.ndarray:
    """A causal (1, 1, T, T) float16 map: row i all on key i (sums exactly 1), the last row `weights_T`."""
    T = weights_T.size
    attn = np.eye(T, dtype=np.float16)
    attn[-1] = weights_T
    return attn[None, None]


@pytest.mark.parametrize("T", [64, 128])
@pytest.mark.parametrize("kernel", [False, True, None])
def test_a_row_at_the_float16_band_edge_is_accepted_and_one_ulp_beyond_refused(T, kernel):
    """The band is T * 2**-12 on either side of the law's sum: a row of T weights 1/T -+ 2**-12 (binary-exact in
    float16) sums to the edge exactly; one weight one float16 ulp further out puts the row beyond it."""
    for sign in (+1, -1):
        if sign == -1 and kernel is not False:
            continue  # a kernel row may sum to anything down to 0
        edge_T = np.full(T, 1 / T + sign * 2.0**-12, np.float16)
        assert edge_T.astype(np.float64).sum() == 1 + sign * T * 2.0**-12  # exact: the row lies on the edge
        arrays.check_attention("a", "m", _one_hot_with_last_row(edge_T), strict=False, kernel=kernel)
        beyond_T = edge_T.copy()
        beyond_T[0] = np.nextafter(edge_T[0], np.float16(sign * np.inf))
        with pytest.raises(InputError, match=f"row {T - 1} of layer 0, head 0 sums to"):
            arrays.check_attention("a", "m", _one_hot_with_last_row(beyond_T), strict=False, kernel=kernel)


def test_a_softmax_row_of_128_keys_summing_to_0_955_is_refused():
    """0.955 lies 0.045 below 1, beyond the band of 128 * 2**-12 = 0.03125 (and inside a band twice as wide)."""
    row_T = np.full(128, 0.955 / 128, np.float16)
    assert abs(row_T.astype(np.float64).sum() - 0.955) < 1e-3
    with pytest.raises(InputError, match=r"row 127 of layer 0, head 0 sums to 0.955\d, expected 1"):
        arrays.check_attention("a", "m", _one_hot_with_last_row(row_T), strict=False, kernel=False)


def _straightforward(attn: np.ndarray, strict: bool, kernel: bool | None) -> str | None:
    """The row laws on a float64 copy of the maps, as first written: the problem's words, or None."""
    T = attn.shape[-1]
    if (attn < 0).any():
        return "negative"
    if (attn[..., ~laws.available_TT(T, strict)] != 0).any():
        return "cannot see"
    sums = attn.astype(np.float64).sum(-1)
    lo = np.zeros(T) if kernel is not False else np.ones(T)
    if strict:
        lo[0] = 0.0
    return "sums to" if (np.maximum(lo - T * 2.0**-12 - sums, sums - 1 - T * 2.0**-12) > 0).any() else None


# rows near the laws' edges: exact zeros, -0.0, a few negatives, weights summing near 1 +- the tolerance
weights = st.sampled_from([0.0, -0.0, 0.0, 1 / 3, 0.25, 0.5, 0.999, 1.0, 2.0**-24, -(2.0**-24), 0.0625, 0.0634])


@settings(max_examples=300, deadline=None)
@given(
    attn=np_arrays(np.float16, (2, 1, 4, 4), elements=weights),
    strict=st.booleans(),
    kernel=st.sampled_from([False, True, None]),
    masked=st.booleans(),
)
def test_the_laws_read_from_float16_bits_and_exact_sums_match_the_float64_copy(attn, strict, kernel, masked):
    if masked:  # mostly valid masks, so the sums are reached
        attn = np.where(laws.available_TT(4, strict), attn, np.float16(0))
    want = _straightforward(attn, strict, kernel)
    if want is None:
        arrays.check_attention("a", "m", attn, strict, kernel)
    else:
        with pytest.raises(InputError, match=want):
            arrays.check_attention("a", "m", attn, strict, kernel)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan, -np.nan])
def test_float16_finiteness_read_from_the_exponent_bits(bad):
    edges = np.array([65504, -65504, 0.0, -0.0, 2.0**-24, -(2.0**-24), 1.0], np.float16)  # finite extremes
    arrays.check_array("a", "q", edges, (None,), "f16")
    with pytest.raises(InputError, match="holds NaN or inf"):
        arrays.check_array("a", "q", np.append(edges, np.float16(bad)), (None,), "f16")


def _header(shape_text: str, descr: str = "<f2") -> bytes:
    """An npy version 1.0 header declaring `shape_text`, padded as numpy pads it, without data."""
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}"
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()


@pytest.mark.parametrize(
    "member, message",
    [
        (_npy(np.array([{}], dtype=object)), "'o' has dtype object, not numbers"),
        (_npy(np.zeros(2, np.complex64)), "'o' has dtype complex64, not numbers"),
        (_npy(np.zeros(8, np.float16))[:-2], "'o' declares shape (8,) of float16 (16 bytes) but holds 14"),
        (_header("(-1,)"), "'o' declares shape (-1,)"),
        (b"\x93NUMPY\x09\x00", "corrupt or truncated npz (ValueError: npy format version (9, 0) in o.npy)"),
        (b"\x93NUMPY\x02\x01", "corrupt or truncated npz (ValueError: npy format version (2, 1) in o.npy)"),
    ],
    ids=["object", "complex", "short payload", "negative shape", "version 9", "version 2.1"],
)
def test_each_unsound_member_is_refused_in_words_naming_the_file_and_the_array(tmp_path, member, message):
    _npz(tmp_path / "a.npz", {"o.npy": member})
    with pytest.raises(InputError) as refused:
        arrays.load_npz(tmp_path / "a.npz")
    assert str(refused.value) == f"{tmp_path / 'a.npz'}: {message}"


def test_a_version_2_header_and_booleans_are_read(tmp_path):
    f = io.BytesIO()
    np.lib.format.write_array(f, np.arange(6, dtype=np.int16).reshape(2, 3), version=(2, 0))
    _npz(tmp_path / "a.npz", {"v2.npy": f.getvalue(), "b.npy": _npy(np.array([True, False]))})
    read = arrays.load_npz(tmp_path / "a.npz")
    np.testing.assert_array_equal(read["v2"], np.arange(6, dtype=np.int16).reshape(2, 3))
    assert read["b"].tolist() == [True, False]


def test_a_member_holding_more_bytes_than_its_header_declares_is_refused(tmp_path):
    path = tmp_path / "a.npz"
    _npz(path, {"q.npy": _header("(2,)") + b"\0" * 4})
    members = arrays.npz_members(path)
    with pytest.raises(InputError) as refused:  # one byte more than the header declares, and none missing
        arrays._read_member(path, "q", arrays.Member((1,), np.dtype(np.float16), False, members["q"].offset))
    assert str(refused.value) == f"{path}: corrupt or truncated npz ('q' does not hold the bytes its header declares)"


def test_each_array_rule_is_refused_in_words_naming_the_array():
    def refused(arr, shape, kind) -> str:
        with pytest.raises(InputError) as e:
            arrays.check_array("f.npz", "q", arr, shape, kind)
        return str(e.value)

    assert refused(np.zeros((2, 4), np.float16), (None, 3), "f16") == "f.npz: 'q' has shape (2, 4), expected (?, 3)"
    assert refused(np.zeros((2, 3, 1), np.float16), (2, 3), "f16") == "f.npz: 'q' has shape (2, 3, 1), expected (2, 3)"
    assert refused(np.zeros(2, np.float32), (2,), "f16") == "f.npz: 'q' has dtype float32, expected float16"
    assert refused(np.zeros(2, np.float16), (2,), "int") == "f.npz: 'q' has dtype float16, expected integers"
    nan_low_bit = np.array([0x7C01], np.uint16).view(np.float16)  # a NaN whose lowest mantissa bit is set
    assert refused(nan_low_bit, (1,), "f16").endswith("holds NaN or inf (float16 holds finite values up to 65504)")
    for ints in (np.zeros(2, np.int32), np.zeros(2, np.uint8)):
        arrays.check_array("f.npz", "t", ints, (2,), "int")
    arrays.check_int_range("f.npz", "t", np.zeros(0, np.int32), 0, 5)  # no value, nothing outside
    with pytest.raises(InputError) as e:
        arrays.check_int_range("f.npz", "t", np.array([0, 6]), 0, 5)
    assert str(e.value) == "f.npz: 't' holds values outside [0, 5]"
    arrays.check_int_range("f.npz", "t", np.array([0, 5]), 0, 5)


def test_the_attention_laws_name_the_causal_mask_and_a_kernel_rows_range():
    T = 4
    causal = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    above = causal.copy()
    above[1, 3] = 0.25
    with pytest.raises(InputError) as e:
        arrays.check_attention("a", "m", above[None, None].astype(np.float16), strict=False, kernel=True)
    assert str(e.value) == "a: 'm' gives weight to keys a row cannot see (the causal j <= i mask)"
    over = causal.copy()
    over[2, 0] += 0.5
    with pytest.raises(InputError) as e:
        arrays.check_attention("a", "m", over[None, None].astype(np.float16), strict=False, kernel=True)
    assert str(e.value) == "a: 'm' row 2 of layer 0, head 0 sums to 1.5, expected [0, 1] (attention weights)"
    arrays.check_attention("a", "m", np.zeros((0, 2, T, T), np.float16), strict=False, kernel=False)  # no layer
    with pytest.raises(InputError) as e:  # a windows file: the window named first
        arrays.check_attention("a", "m", np.stack([causal, over])[:, None, None].astype(np.float16), False, True)
    assert str(e.value) == "a: 'm' row 2 of window 1, layer 0, head 0 sums to 1.5, expected [0, 1] (attention weights)"


def test_missing_keys_are_named_beside_those_the_file_has():
    arrays.require_keys("f.npz", {"a": 0, "b": 0}, ("a", "b"))
    for data, has in (({"b": 0, "a": 0}, "a, b"), ({}, "none")):
        with pytest.raises(InputError) as e:
            arrays.require_keys("f.npz", data, ("a", "c", "d"))
        assert str(e.value) == f"f.npz: missing key(s) {'c, d' if data else 'a, c, d'} (has {has})"


def test_the_npz_limits_hold_at_their_edges_and_load_npz_keeps_them(tmp_path):
    path = tmp_path / "a.npz"
    _npz(path, {f"m{i}.npy": _npy(np.zeros(1)) for i in range(arrays.MAX_NPZ_MEMBERS)})
    assert len(arrays.npz_members(path)) == arrays.MAX_NPZ_MEMBERS  # exactly the most allowed
    np.savez(path, q=np.zeros(1000, np.float16))
    size = arrays.npz_members(path)["q"].offset + 2000  # the bytes the member declares uncompressed
    assert set(arrays.npz_members(path, max_bytes=size)) == {"q"}
    with pytest.raises(InputError, match=f"declares {size:,} bytes uncompressed \\(at most {size - 1:,}\\)"):
        arrays.load_npz(path, max_bytes=size - 1)
    np.savez(path, q=np.zeros(2, np.float16), t=np.arange(3))
    assert set(arrays.load_npz(path, skip=lambda key: key == "q")) == {"t"}
    with pytest.raises(InputError) as e:
        arrays.load_npz(tmp_path / "none.npz")
    assert str(e.value) == f"{tmp_path / 'none.npz'}: missing file"
    with pytest.raises(InputError) as e:  # a member the directory does not hold
        arrays._read_member(path, "x", arrays.Member((1,), np.dtype(np.float16)))
    assert str(e.value).startswith(f"{path}: corrupt or truncated npz (KeyError: ")


def test_save_npz_writes_fixed_dates_and_refuses_objects(tmp_path):
    arrays.save_npz(tmp_path / "a.npz", {"q": np.zeros(2, np.float16)})
    with zipfile.ZipFile(tmp_path / "a.npz") as z:
        assert [i.date_time for i in z.infolist()] == [(1980, 1, 1, 0, 0, 0)]
    with pytest.raises(ValueError, match="allow_pickle"):
        arrays.save_npz(tmp_path / "o.npz", {"o": np.array([{}], dtype=object)})
