"""The bounded readers: JSON limits, the field rules, and npz headers checked before reading."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from attngeom import schema
from attngeom.errors import InputError


def test_nesting_is_counted_without_recursion_and_ignores_strings():
    assert schema.nesting_depth('{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert schema.nesting_depth("[" * 300_000 + "]" * 300_000) == 300_000
    assert schema.nesting_depth('"\\"[["') == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 65 + "]" * 65, "nested deeper than 64"),
        ("[" + "9" * 20 + "]", "an integer of 20 digits"),
        ("[-" + "9" * 5000 + "]", "an integer of 5000 digits"),
        ("{not json", "not valid JSON"),
    ],
)
def test_json_beyond_the_limits_is_one_clear_error(text, message):
    with pytest.raises(InputError, match=message):
        schema.parse_json(text, "x.json")


def test_json_within_the_limits_parses():
    assert schema.parse_json("[" * 64 + "]" * 64, "x") == eval("[" * 64 + "]" * 64)
    assert schema.parse_json('{"n": -9223372036854775807, "f": 1.5}', "x") == {"n": -(2**63) + 1, "f": 1.5}


def test_read_json_refuses_large_and_non_utf8_files(tmp_path):
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 600 + "0]")
    with pytest.raises(InputError, match="larger than"):
        schema.read_json(big, max_bytes=1000)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError, match="not UTF-8"):
        schema.read_json(bad)
    with pytest.raises(InputError, match="missing file"):
        schema.read_json(tmp_path / "none.json")


RULE = schema.Record(
    {
        "n": schema.Number(0, 10, integer=True),
        "x": schema.Maybe(schema.Number()),
        "s": schema.Text(3),
        "l": schema.Items(schema.Flag(), max_len=2),
    },
    required=("n",),
    other=None,
)


@pytest.mark.parametrize(
    "doc, message",
    [
        ([], "the document: a list where an object is due"),
        ({}, "the document: missing key\\(s\\) n"),
        ({"n": True}, "n: a boolean where an integer is due"),
        ({"n": 11}, "n: 11 is outside \\[0, 10\\]"),
        ({"n": 1.0}, "n: a number where an integer is due"),
        ({"n": 1, "x": float("nan")}, "x: nan is not a finite number"),
        ({"n": 1, "x": float("inf")}, "x: inf is not a finite number"),
        ({"n": 1, "s": "abcd"}, "s: a string of 4 characters"),
        ({"n": 1, "l": [True, 1]}, "l\\[1\\]: a number where true or false is due"),
        ({"n": 1, "l": [True] * 3}, "l: a list of 3 items"),
        ({"n": 1, "y": 0}, "the document: unexpected key 'y'"),
    ],
)
def test_rules_name_the_place_and_the_problem(doc, message):
    with pytest.raises(InputError, match=f"f.json: {message}"):
        schema.check(doc, RULE, "f.json")


def test_a_sound_document_passes():
    schema.check({"n": 3, "x": None, "s": "ab", "l": [False]}, RULE, "f.json")


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
    members = schema.npz_members(tmp_path / "a.npz")
    assert members["q"] == schema.Member((2, 3), np.dtype(np.float16))
    assert members["t"].shape == (4,)


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
        ({f"m{i}.npy": _npy(np.zeros(1)) for i in range(schema.MAX_NPZ_MEMBERS + 1)}, "members \\(at most"),
    ],
    ids=["not npy", "object dtype", "short payload", "bad version", "too many members"],
)
def test_unsound_npz_is_refused_before_reading(tmp_path, members, message):
    _npz(tmp_path / "a.npz", members)
    with pytest.raises(InputError, match=message):
        schema.load_npz(tmp_path / "a.npz")


def test_declared_sizes_are_bounded(tmp_path):
    np.savez_compressed(tmp_path / "a.npz", q=np.zeros(1000, np.float16))
    with pytest.raises(InputError, match="declares 2,128 bytes uncompressed \\(at most 1,000\\)"):
        schema.npz_members(tmp_path / "a.npz", max_bytes=1000)


@pytest.mark.parametrize("kernel", [False, True, None])
def test_attention_rows_sum_to_one_or_zero_without_keys(kernel):
    T = 6
    causal = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    schema.check_attention("a", "m", causal[None, None].astype(np.float16), strict=False, kernel=kernel)
    strict = np.tril(np.ones((T, T)), -1)
    strict[1:] /= np.arange(1, T)[:, None]
    schema.check_attention("a", "m", strict[None, None].astype(np.float16), strict=True, kernel=kernel)
    with pytest.raises(InputError, match=r"gives weight to keys a row cannot see \(the strict j < i mask\)"):
        schema.check_attention("a", "m", causal[None, None].astype(np.float16), strict=True, kernel=kernel)
    with pytest.raises(InputError, match="row 2 of layer 0, head 0 sums to 1.5"):
        over = causal.copy()
        over[2, 0] += 0.5
        schema.check_attention("a", "m", over[None, None].astype(np.float16), strict=False, kernel=kernel)


def test_a_kernel_row_of_tiny_mass_sums_below_one_and_only_softmax_refuses_it():
    """kappa / (S + 1e-9) with S = 2.4e-8 on a one-key row sums to S / (S + 1e-9) = 0.96."""
    T, S = 6, 2.4e-8
    attn = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    attn[0, 0] = S / (S + 1e-9)
    maps = attn[None, None].astype(np.float16)
    schema.check_attention("a", "m", maps, strict=False, kernel=True)
    schema.check_attention("a", "m", maps, strict=False, kernel=None)
    with pytest.raises(InputError, match="row 0 of layer 0, head 0 sums to 0.96, expected 1"):
        schema.check_attention("a", "m", maps, strict=False, kernel=False)


def test_the_shipped_expected_files_meet_their_schemas():
    from attngeom.expected import EXPECTED_DIR

    schema.check(json.loads((EXPECTED_DIR / "claims.json").read_text()), schema.CLAIMS_JSON, "claims.json")
    schema.check(json.loads((EXPECTED_DIR / "rerun.json").read_text()), schema.RERUN_JSON, "rerun.json")
