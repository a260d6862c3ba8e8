"""Every reader accepts what a valid run of any variant writes, and refuses corrupt copies of it.

Valid outputs are generated from each variant's own law: the maps, q and k of the model's real
attention (`training.model.Attention`, its projections set so that q and k are the drawn points,
its b and eps the drawn ones through softplus), or `laws` for the fixed-scalar `yat`, rounded to
float16 as the rerun writes them. The draws reach the edges the mathematics allows: kernel mass
near 0 (q.k = -b on a row's only key), tiny eps, ties, identical keys, rows with one key, values
that float16 rounds or flushes to zero, huge and tiny norms. The outputs are written into real
files in the original format (`bundle_tools`) and read by the bundle reader, the windows reader,
the run JSON's schema and evidence's recognition (the losses, checkpoints and manifests around them
in `test_acceptance_records`).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers.bundles import rewrite_npz, write_bundle, write_manifest
from helpers.properties import FAST, D, H, T
from hypothesis import assume, example, given
from hypothesis import strategies as st

from attngeom.base.errors import InputError
from attngeom.base.train_config import PRESETS, ModelConfig
from attngeom.base.variants import TRAINABLE, find, kernel_law, strict_mask
from attngeom.bundles import arrays, evidence, layout
from attngeom.geometry import laws
from attngeom.jobs.verify import run_verify
from attngeom.measures import stats
from attngeom.training.model import Attention

C = H * D
VARIANTS = (*TRAINABLE, "yat")  # yat (b = 0, eps = 1) is not trained here: its maps come from `laws`
# float16 values: ties and identical keys from a few integers, else anything float16 holds up to 1e3
# (subnormals that round or flush to zero included; k = s q + c stays far below 65504)
VALUE = st.one_of(st.sampled_from([-2.0, -1.0, 0.0, 1.0, 2.0]), st.floats(-1e3, 1e3, width=16))
B_VALUES = (0.0, 1e-8, 0.1, 1.0, 30.0)
EPS_VALUES = (1e-12, 1e-6, 1e-3, 1.0, 10.0)


@dataclass(frozen=True)
class Output:
    """One layer of one model as a rerun writes it: float16 q, k (H, T, D) and map (H, T, T); b, eps (H,)."""

    variant: str
    q: np.ndarray
    k: np.ndarray
    attn: np.ndarray
    b: np.ndarray | None
    eps: np.ndarray | None


def _probe_module(module: Attention, x_BTC: jnp.ndarray) -> dict:
    return module(x_BTC)[1]


_probe = nnx.jit(_probe_module)


@functools.cache
def _attention(variant: str, T: int, H: int, D: int) -> Attention:
    cfg = ModelConfig(vocab=65, d_model=H * D, layers=1, heads=H, seq_len=T, d_ff=4, dropout=0.0)
    return Attention(variant, cfg, rngs=nnx.Rngs(0))


def _inverse_softplus(v: np.ndarray) -> np.ndarray:
    """raw with softplus(raw) = v: log(e^v - 1), which is v itself in float32 from v = 30 on; -inf for v = 0."""
    v = np.asarray(v, np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(v > 30, v, np.log(np.expm1(v))).astype(np.float32)


def model_output(variant: str, x_TC: np.ndarray, k_scale: float, k_shift_C: np.ndarray, b_H, eps_H) -> Output:
    """The model's attention on x: q = x, k = k_scale x + k_shift where the variant projects (goat: q = k = x)."""
    T, C = x_TC.shape
    H = len(b_H)
    if variant == "yat":  # the fixed kernel, from the laws in float64
        q = k = x_TC.reshape(T, H, C // H).transpose(1, 0, 2).astype(np.float64)
        k = k * k_scale + k_shift_C.reshape(H, 1, C // H)
        kappa = laws.kernel(laws.dots(q, k), (q * q).sum(-1), (k * k).sum(-1), np.zeros(H), np.ones(H))
        w = laws.kernel_weights(kappa, laws.available_TT(T, False))
        b, eps = np.zeros(H), np.ones(H)
    else:
        a = _attention(variant, T, H, C // H)
        if a.spec.qk_proj:
            a.q_proj.kernel[...] = jnp.eye(C)
            a.q_proj.bias[...] = jnp.zeros(C)
            a.k_proj.kernel[...] = k_scale * jnp.eye(C)
            a.k_proj.bias[...] = jnp.asarray(k_shift_C, jnp.float32)
        b = eps = None
        if a.spec.kernel:
            a.b_raw[...] = jnp.asarray(_inverse_softplus(b_H))
            a.eps_raw[...] = jnp.asarray(_inverse_softplus(eps_H))
            b, eps = (np.asarray(v, np.float64) for v in a.scalars())  # what the run JSON records
        p = _probe(a, jnp.asarray(x_TC, jnp.float32)[None])
        q, k, w = (np.asarray(p[name][0]) for name in ("q", "k", "attn"))
    return Output(variant, q.astype(np.float16), k.astype(np.float16), w.astype(np.float16), b, eps)


@st.composite
def outputs(draw, variant: str) -> Output:
    """A valid output of `variant`, at the edges its law allows."""
    x_TC = np.array(draw(st.lists(VALUE, min_size=T * C, max_size=T * C)), np.float32).reshape(T, C)
    spec = find(variant)
    mode = draw(
        st.sampled_from(["free", "identical keys", "mass near 0"] if spec.kernel else ["free", "identical keys"])
    )
    k_scale, k_shift = draw(st.sampled_from([1.0, -1.0, 0.5, 2.0])), np.zeros(C, np.float32)
    b = np.array(draw(st.lists(st.sampled_from(B_VALUES), min_size=H, max_size=H)))
    eps = np.array(draw(st.lists(st.sampled_from(EPS_VALUES), min_size=H, max_size=H)))
    if mode == "identical keys":  # every key the same point (goat: q = k, so identical rows of x)
        k_scale, k_shift = 0.0, np.array(draw(st.lists(VALUE, min_size=C, max_size=C)), np.float32)
        if not spec.qk_proj:
            x_TC[:] = x_TC[0]
    elif mode == "mass near 0" and variant == "yat":  # b = 0 fixed: q0 = k0 = 0 gives kappa = 0 on row 0's key
        x_TC[0] = 0.0
    elif mode == "mass near 0":  # the one key of the first row with keys: q.k + b = delta, a kernel mass S ~ 0
        if spec.strict_mask:
            x_TC[1] = -x_TC[0]  # q1.k0 = -|x0|^2, |q1 - k0|^2 = 4 |x0|^2
        else:
            k_scale = -1.0  # q0.k0 = -|x0|^2, |q0 - k0|^2 = 4 |x0|^2
        x0_HD = x_TC[0].reshape(H, C // H).astype(np.float64)
        n_H = (x0_HD * x0_HD).sum(-1)
        mass = draw(st.sampled_from([0.0, 1e-10, 1e-9, 2.4e-8, 1e-6]))  # the row sums to S / (S + 1e-9)
        b = n_H + np.sqrt(mass * (4 * n_H + eps))  # kappa = delta^2 / (4 |x0|^2 + eps) = S
    out = model_output(variant, x_TC, k_scale, k_shift, b, eps)
    # A valid run's outputs are finite and its q, k fit float16 (else the model itself gave NaN or inf).
    assume(all(np.isfinite(a).all() for a in (out.q, out.k, out.attn)))
    return out


def _record(out: Output, L: int = 1) -> dict:
    """The run record's learned scalars per layer and head, as the rerun writes them (none for softmax)."""
    if out.b is None:
        return {}
    return {"b_learned": np.tile(out.b, (L, 1)).tolist(), "eps_learned": np.tile(out.eps, (L, 1)).tolist()}


def write_model(folder: Path, out: Output, name: str | None = None) -> None:
    """One output as a one-layer bundle (its map at two telemetry steps) beside a windows file of two
    windows (the fixed one, then the same output on other tokens)."""
    attn_LHTT, q_LHTD, k_LHTD = out.attn[None], out.q[None], out.k[None]
    name = name or out.variant
    cfg = PRESETS["smoke"].original_cfg()
    tokens_T = write_bundle(folder, name, 0, {0: attn_LHTT, 7: attn_LHTT}, q_LHTD, k_LHTD, cfg, **_record(out))
    maps = {s: np.stack([attn_LHTT] * 2) for s in (0, 7)}
    tokens_WT = np.stack([tokens_T, tokens_T[::-1]])
    path = layout.windows_file(folder, name, 0)
    layout.write_windows_npz(path, tokens_WT, maps, np.stack([q_LHTD] * 2), np.stack([k_LHTD] * 2))


def read_all(folder: Path, name: str) -> layout.BundleModel:
    """Every reader on one model: bundle, run JSON, windows file, evidence's recognition."""
    model = layout.load_model(folder, name, 0)
    windowed = layout.read_windows(layout.windows_file(folder, name, 0), model)
    evidence.describe({name: model}, folder, {})
    return windowed


def for_each_variant(test):
    """A property test per variant, drawing its outputs (and more) from `data`."""
    return pytest.mark.parametrize("variant", VARIANTS)(FAST(given(data=st.data())(test)))


@for_each_variant
def test_every_reader_accepts_a_valid_output_of_each_variant(variant, data):
    out = data.draw(outputs(variant))
    strict, kernel = strict_mask(variant), kernel_law(variant)
    arrays.check_attention("m", "attn", out.attn, strict, kernel)
    arrays.check_attention("m", "attn", out.attn, False, None)  # a file that does not say its variant
    with tempfile.TemporaryDirectory() as tmp:  # nested: evidence looks for a manifest two folders up
        write_model(Path(tmp) / "run" / "bundle", out)
        windowed = read_all(Path(tmp) / "run" / "bundle", variant)
        assert windowed.q_LHTD.shape == (2, 1, H, T, D)
    with tempfile.TemporaryDirectory() as tmp:  # the same files under a name the variants table lacks
        write_model(Path(tmp) / "run" / "bundle", out, name="unlisted")
        read_all(Path(tmp) / "run" / "bundle", "unlisted")


def _within_room(out: Output) -> float:
    """The largest reconstruction gap of one output as a share of the room its float16 export leaves it."""
    run = {"best_val": 1.0, **_record(out)}
    maps = out.attn[None]
    tokens_T = np.zeros(maps.shape[-1], np.int32)
    model = layout.BundleModel(out.variant, 0, tokens_T, {0: maps}, out.q[None], out.k[None], maps, run, {})
    return float(stats.reconstruction(model)[1].max())


@pytest.mark.parametrize("variant", [v for v in VARIANTS if kernel_law(v)])
@FAST
@given(data=st.data())
def test_every_kernel_output_lies_within_the_room_its_float16_export_leaves(variant, data):
    """The rule that judges the export identity (export_rounding, claim reconstruction.yat_b.float16):
    no exported weight is further from the kernel recomputed from the exported q, k, b, eps than
    float16 rounding and float32 arithmetic can put it, at every edge the laws allow."""
    assert _within_room(data.draw(outputs(variant))) <= 1.0


@pytest.mark.parametrize("variant", ["yat_b", "goat_v"])
@pytest.mark.parametrize("scale", [0.1, 1.0, 20.0])
def test_the_models_exports_at_a_trained_models_sizes_lie_within_their_room(variant, scale):
    """As above, with 8 dimensions per head and 12 positions, b and eps as trained heads learn them."""
    rng = np.random.default_rng(1)
    x_TC = (rng.normal(size=(12, 16)) * scale).astype(np.float32)
    shift = (rng.normal(size=16) * scale).astype(np.float32)
    out = model_output(variant, x_TC, 0.5, shift, np.array([0.97, 0.13]), np.array([0.69, 0.0025]))
    assert 0 < _within_room(out) <= 1.0


# how -> (the array of one layer it damages, the refusal it must get)
CORRUPTIONS = {
    "a negative weight": ("attn", r"negative attention weights"),
    "a row summing over 1 + tol": ("attn", r"sums to 1\.25, expected"),
    "weight on a key the row cannot see": ("attn", r"keys a row cannot see"),
    "NaN in the map": ("attn", r"NaN or inf"),
    "NaN in q": ("q", r"NaN or inf"),
    "a q beyond float16": ("q", r"NaN or inf \(float16 holds finite values up to 65504\)"),
    "a map of the wrong shape": ("attn", r"has shape"),
    "a map of the wrong dtype": ("attn", r"expected float16"),
}


def corrupt(out: Output, how: str) -> np.ndarray:
    """A corrupt copy of the output's map (H, T, T) or q (H, T, D)."""
    a = (out.q if CORRUPTIONS[how][0] == "q" else out.attn).copy()
    last = T - 1  # a row that sees every key but its own under the strict mask, every key otherwise
    if how == "a negative weight":
        a[0, last, 0] = -0.5
    elif how == "a row summing over 1 + tol":
        a[0, last] = 0
        a[0, last, 0] = 1.25
    elif how == "weight on a key the row cannot see":
        a[0, 0, 0 if strict_mask(out.variant) else 1] = 0.5  # under the strict mask: a non-zero row 0
    elif how in ("NaN in the map", "NaN in q"):
        a[0, last, 0] = np.nan
    elif how == "a q beyond float16":
        with np.errstate(over="ignore"):
            a = (a.astype(np.float32) + 7e4).astype(np.float16)  # overflows to inf
    elif how == "a map of the wrong shape":
        a = a[..., :-1]
    elif how == "a map of the wrong dtype":
        a = a.astype(np.float32)
    return a


@for_each_variant
def test_corrupt_copies_of_a_valid_output_are_refused(variant, data):
    out = data.draw(outputs(variant))
    how = data.draw(st.sampled_from(sorted(CORRUPTIONS)))
    kind, match = CORRUPTIONS[how]
    bad = corrupt(out, how)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_model(folder, out)
        model = layout.load_model(folder, variant, 0)
        if data.draw(st.booleans(), label="in the windows file"):  # its second window
            path = layout.windows_file(folder, variant, 0)
            key = "attn_7" if kind == "attn" else "q_WLHTD"
            with np.load(path) as z:
                good = z[key]
            same_shape = bad.shape == good.shape[2:]  # else the whole array takes the wrong shape
            rewrite_npz(path, **{key: np.stack([good[0], bad[None]]) if same_shape else bad[None, None]})
            with pytest.raises(InputError, match=match):
                layout.read_windows(path, model)
        else:
            rewrite_npz(folder / f"geom_{variant}_s0.npz", **{kind: bad[None]})
            with pytest.raises(InputError, match=match):
                layout.load_model(folder, variant, 0)


@FAST
@given(data=st.data())
def test_a_softmax_row_summing_to_0_9_is_refused_and_the_same_kernel_row_accepted(data):
    """exp(s) / sum(exp(s)) sums to 1; kappa / (S + 1e-9) to S / (S + 1e-9), 0.9 at S = 9e-9."""
    row = np.zeros(T, np.float16)
    row[data.draw(st.integers(0, T - 1))] = 0.9
    for variant in ("softmax", "yat_b"):
        out = data.draw(outputs(variant))
        attn = out.attn.copy()
        attn[0, T - 1] = row
        with tempfile.TemporaryDirectory() as tmp:
            write_model(Path(tmp), out)
            rewrite_npz(Path(tmp) / f"geom_{variant}_s0.npz", attn=attn[None])
            if variant == "softmax":
                with pytest.raises(InputError, match=r"head 0 sums to 0\.(9|8999), expected 1 "):
                    layout.load_model(Path(tmp), variant, 0)
            else:
                layout.load_model(Path(tmp), variant, 0)


PAPER_TELEMETRY = PRESETS["paper"].telemetry_steps()


@FAST
@given(stop=st.integers(1, PRESETS["paper"].steps - 2), windows=st.integers(1, 256), variant=st.sampled_from(VARIANTS))
@example(stop=2, windows=16, variant="softmax")  # before the second telemetry step: the step-0 maps only
@example(stop=1200, windows=1, variant="goat_v")  # exactly at a telemetry step
def test_a_run_stopped_at_any_step_is_recognised_as_what_it_reached(stop, windows, variant):
    """`--stop-after STEP` (1 <= STEP <= steps - 2) writes the telemetry maps up to STEP (step 0 always),
    STOPPED_AFTER in the cfg and stopped_after in the manifest; verify judges what it reached."""
    out = model_output(variant, np.ones((T, C), np.float32), 1.0, np.zeros(C), np.ones(H), np.ones(H))
    maps = {s: out.attn[None] for s in PAPER_TELEMETRY if s <= stop}
    cfg = PRESETS["paper"].original_cfg() | {"STOPPED_AFTER": stop}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_bundle(root / "bundle", variant, 0, maps, out.q[None], out.k[None], cfg, curve=[], **_record(out))
        write_manifest(root, "paper", (variant,), stopped_after=stop, windows=windows)
        model = layout.load_model(root / "bundle", variant, 0)
        ev = evidence.describe({variant: model}, root / "bundle", {})
    assert (ev.kind, ev.stopped_after, sorted(model.maps)) == ("truncated paper run", stop, sorted(maps))


def _tiny_mass_layers(L: int, W: int) -> tuple[np.ndarray, ...]:
    """yat_b's q, k, maps (W, L, H, T, T) from the model's attention, with every head's row 0 of mass
    S = b^2 / eps = 2.4e-8: q0 = k0 = 0 (its only key), b = 1e-4, eps = 1e-8 / 2.4e-8, so the row sums
    to S / (S + 1e-9) = 0.96; the other rows are drawn from a fixed seed."""
    rng = np.random.default_rng(0)
    eps = 1e-8 / 2.4e-8
    outs = []
    for _ in range(W * L):
        x_TC = rng.normal(size=(8, C)).astype(np.float32)
        x_TC[0] = 0.0
        outs.append(model_output("yat_b", x_TC, 1.0, np.zeros(C), np.full(H, 1e-4), np.full(H, eps)))
    q, k, attn = (
        np.stack([getattr(o, n) for o in outs]).reshape(W, L, *getattr(outs[0], n).shape) for n in ("q", "k", "attn")
    )
    return q, k, attn, outs[0]


@pytest.mark.parametrize("shape", ["bundle", "windows file", "rerun output"])
def test_a_kernel_row_of_mass_1e_8_is_accepted_and_judged(shape, tmp_path):
    """The Intel smoke rerun's case: a one-key kernel row of mass ~2.4e-8 sums to ~0.96, which the
    softmax law refuses and the kernel's accepts; verify then judges the run (exit 0 or 1, never 2).
    The run JSON carries the paper's cfg, so every claim about yat_b is judged, not only the smoke ones."""
    L, W = 4, 3  # the census head is layer 4
    q, k, attn, first = _tiny_mass_layers(L, W)
    assert np.allclose(attn[..., 0, :].astype(np.float64).sum(-1), 0.96, atol=2e-3)
    with pytest.raises(InputError, match=r"row 0 of window 0, layer 0, head 0 sums to 0\.96"):
        arrays.check_attention("w", "attn", attn, strict=False, kernel=False)
    root = tmp_path / "run"
    folder = root / "attngeom-qk"
    curve = [{"step": 500, "val": 3.1}, {"step": 12000, "val": 2.9}]
    record = _record(first, L) | {"best_val": 2.9, "curve": curve}
    maps = {s: attn[0] for s in PAPER_TELEMETRY}
    tokens_T = write_bundle(folder, "yat_b", 0, maps, q[0], k[0], PRESETS["paper"].original_cfg(), **record)
    if shape != "bundle":
        tokens_WT = np.concatenate([tokens_T[None], np.random.default_rng(1).integers(0, 65, (W - 1, 8))])
        path = layout.windows_file(folder, "yat_b", 0)
        layout.write_windows_npz(path, tokens_WT, {s: attn for s in PAPER_TELEMETRY}, q, k)
    if shape == "rerun output":
        write_manifest(root, "paper", ("yat_b",), windows=W)
    status = run_verify(root, tmp_path / "report", variants=("yat_b",))
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    judged = {r["id"]: r["verdict"] for r in report["claims"] if ".yat_b." in f".{r['id']}." and r["verdict"] != "SKIP"}
    assert status in (0, 1) and report["evidence"]["kind"] == "paper rerun"
    assert {"hull.yat_b.inside", "reconstruction.yat_b.float16", "entropy.yat_b"} <= set(judged), judged
    assert judged["reconstruction.yat_b.float16"] == "PASS"  # the export identity holds on the edge row too
    robust = json.loads((tmp_path / "report" / "results.json").read_text())["robustness"]
    assert (robust.get("yat_b", {}).get("windows") == {"0": W}) == (shape != "bundle")  # the windows file was read
    if shape == "rerun output":  # and the command line, as a user runs it
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "attngeom",
                "--bundles",
                str(root),
                "--variants",
                "yat_b",
                "--out",
                str(tmp_path / "cli"),
            ],
            capture_output=True,
            text=True,
        )
        assert cli.returncode in (0, 1), cli.stderr
        assert "evidence: paper rerun" in cli.stdout and "error:" not in cli.stderr
