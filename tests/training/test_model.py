"""The character GPT: the original's parameter counts and initial sums, causality, kernel rows."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from attngeom.base.train_config import PRESETS
from attngeom.training import data
from attngeom.training.model import MODEL_VARIANTS, ModelConfig, build, kernel_scores, param_stats
from attngeom.training.train import init_state, make_probe

# ORIGINAL_RUNS.md, fidelity figures (paper preset, seed 0).
ORIGINAL_INIT = {
    "softmax": (2_719_169, 2505.5316277, 136670.684339),
    "yat_b": (2_719_217, 2505.5316277, 136670.684339),
    "goat_v": (2_274_545, 2468.1854793, 110417.022445),
}
TINY = ModelConfig(vocab=11, d_model=16, layers=2, heads=2, seq_len=8, d_ff=32)


@pytest.mark.parametrize("variant", sorted(ORIGINAL_INIT))
def test_initial_parameters_match_the_original(variant):
    count, total, absolute = param_stats(build(variant, ModelConfig(), seed=0))
    want_count, want_total, want_abs = ORIGINAL_INIT[variant]
    assert count == want_count
    assert total == pytest.approx(want_total, rel=1e-8)
    assert absolute == pytest.approx(want_abs, rel=1e-8)


def test_seed_changes_the_initial_parameters():
    assert param_stats(build("softmax", TINY, 0))[1] != param_stats(build("softmax", TINY, 1))[1]


def _eval_forward(variant: str, tokens_BT: np.ndarray):
    model = nnx.view(build(variant, TINY, seed=3), deterministic=True)
    return model.forward(jnp.asarray(tokens_BT))


@pytest.mark.parametrize("variant", MODEL_VARIANTS)
def test_a_future_token_never_changes_an_earlier_output(variant):
    rng = np.random.default_rng(0)
    tokens_BT = rng.integers(0, TINY.vocab, (2, TINY.seq_len))
    base_BTV, _ = _eval_forward(variant, tokens_BT)
    for t in range(1, TINY.seq_len):
        changed_BT = tokens_BT.copy()
        changed_BT[:, t] = (changed_BT[:, t] + 1) % TINY.vocab
        out_BTV, _ = _eval_forward(variant, changed_BT)
        np.testing.assert_allclose(out_BTV[:, :t], base_BTV[:, :t], rtol=0, atol=1e-6)
        assert not np.allclose(out_BTV[:, t], base_BTV[:, t])


@pytest.mark.parametrize("variant", MODEL_VARIANTS)
def test_attention_rows_are_weights_over_the_visible_keys(variant):
    tokens_BT = np.random.default_rng(1).integers(0, TINY.vocab, (2, TINY.seq_len))
    _, probe = _eval_forward(variant, tokens_BT)
    w_LBHTT = np.asarray(probe["attn"])
    T = TINY.seq_len
    assert w_LBHTT.shape == (TINY.layers, 2, TINY.heads, T, T)
    assert probe["q"].shape == probe["k"].shape == (TINY.layers, 2, TINY.heads, T, TINY.head_dim)
    strict = variant.startswith("goat")
    visible_TT = np.tril(np.ones((T, T), bool), k=-1 if strict else 0)
    assert (w_LBHTT[..., ~visible_TT] == 0).all()
    assert (w_LBHTT >= 0).all()
    sums = w_LBHTT.sum(-1)
    if strict:
        assert (sums[..., 0] == 0).all()  # row 0 has no keys
        sums = sums[..., 1:]
    # kernel rows are kappa / (sum + 1e-9): a row whose kappa sum is tiny falls short of 1 by 1e-9 / sum
    np.testing.assert_allclose(sums, 1.0, atol=1e-4)


def test_goat_queries_and_keys_are_the_raw_head_slices():
    tokens_BT = np.random.default_rng(2).integers(0, TINY.vocab, (1, TINY.seq_len))
    _, probe = _eval_forward("goat_v", tokens_BT)
    np.testing.assert_array_equal(probe["q"], probe["k"])


def test_kernel_scores_formula():
    rng = np.random.default_rng(3)
    q_BHTD, k_BHTD = (rng.normal(size=(1, 2, 3, 4)).astype(np.float32) for _ in range(2))
    b_H, eps_H = np.array([0.5, 2.0], np.float32), np.array([0.1, 1.0], np.float32)
    got = np.asarray(kernel_scores(q_BHTD, k_BHTD, b_H, eps_H))
    dot = np.einsum("bhtd,bhsd->bhts", q_BHTD, k_BHTD).astype(np.float64)
    dist = ((q_BHTD[:, :, :, None] - k_BHTD[:, :, None]) ** 2).sum(-1)
    want = (dot + b_H[None, :, None, None]) ** 2 / (dist + eps_H[None, :, None, None])
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="unknown variant"):
        build("nope", TINY, 0)


@pytest.mark.parametrize(("bundle", "variant"), [("qk", "softmax"), ("qk", "yat_b"), ("goat", "goat_v")])
def test_initial_maps_match_the_published_step0_maps(published_root, bundle, variant):
    """The untrained model's maps on the fixed window equal the author's `step0` to one float16 ulp."""
    with np.load(published_root / f"kgl_blog-attngeom-{bundle}" / f"attn_{variant}_s0.npz") as z:
        tokens_T, theirs = z["tokens"], z["step0"]
    np.testing.assert_array_equal(tokens_T, data.telemetry_window(data.load_corpus(), 128))
    _, eval_graphdef, _, (params, rest, _) = init_state(variant, PRESETS["paper"], seed=0)
    ours = np.asarray(make_probe(eval_graphdef)(params, rest, tokens_T)[2], dtype=np.float16)
    ulp = np.spacing(np.maximum(np.abs(ours), np.abs(theirs)))
    assert (np.abs(ours.astype(np.float32) - theirs.astype(np.float32)) <= ulp).all()
