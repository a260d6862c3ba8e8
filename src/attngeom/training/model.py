"""The character GPT of the original runs, in Flax NNX, with its attention variants.

Layers are built in the original order from one `nnx.Rngs(seed)`, because that order fixes
which random numbers each layer receives: token embedding, position embedding, then per block
LN1, attention (Q, K, V, O where the variant has them, its dropout, the per-head kernel
scalars), LN2, fc1, fc2, the block's dropout; then the final LN and the head.

Variants (their facts in `attngeom.base.variants`): `softmax` (scaled dot product), `yat_b` (the kernel
(q.k + b)^2 / (|q - k|^2 + eps) with learned per-head b, eps), `goat_v` (the kernel on the raw head
slices of LN1(x), no Q/K, strict mask j < i) and `goat_nov` (as goat_v, and v = q).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from attngeom.base.train_config import ModelConfig
from attngeom.base.variants import TRAINABLE as MODEL_VARIANTS
from attngeom.base.variants import variant as variant_spec

ROW_EPS = 1e-9


def causal_mask(seq_len: int, strict: bool) -> jax.Array:
    """(T, T) boolean: key j is visible to query i when j <= i (j < i if strict)."""
    i_T1 = jnp.arange(seq_len)[:, None]
    j_1T = jnp.arange(seq_len)[None, :]
    return j_1T < i_T1 if strict else j_1T <= i_T1


def kernel_scores(q_BHTD: jax.Array, k_BHTD: jax.Array, b_H: jax.Array, eps_H: jax.Array) -> jax.Array:
    """kappa = (q.k + b)^2 / (max(|q|^2 + |k|^2 - 2 q.k, 0) + eps), per head: (B, H, T, T)."""
    # A matmul, not an einsum: the original's float32 round-off, which adamw's first steps amplify.
    dot_BHTT = q_BHTD @ k_BHTD.swapaxes(-1, -2)
    qq_BHT1 = jnp.sum(q_BHTD * q_BHTD, axis=-1)[..., None]
    kk_BH1T = jnp.sum(k_BHTD * k_BHTD, axis=-1)[..., None, :]
    dist_BHTT = jnp.maximum(qq_BHT1 + kk_BH1T - 2.0 * dot_BHTT, 0.0)
    b = b_H[None, :, None, None]
    eps = eps_H[None, :, None, None]
    return (dot_BHTT + b) ** 2 / (dist_BHTT + eps)


class Attention(nnx.Module):
    """Multi-head attention of one variant; returns its output and what telemetry records."""

    def __init__(self, variant: str, cfg: ModelConfig, *, rngs: nnx.Rngs):
        if variant not in MODEL_VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; known: {', '.join(MODEL_VARIANTS)}")
        self.spec = variant_spec(variant)
        self.heads = cfg.heads
        d = cfg.d_model
        if self.spec.qk_proj:
            self.q_proj = nnx.Linear(d, d, rngs=rngs)
            self.k_proj = nnx.Linear(d, d, rngs=rngs)
        if self.spec.v_residual:
            self.v_proj = nnx.Linear(d, d, rngs=rngs)
        self.o_proj = nnx.Linear(d, d, rngs=rngs)
        self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)
        if self.spec.kernel:
            self.b_raw = nnx.Param(jnp.zeros((cfg.heads,)))
            self.eps_raw = nnx.Param(jnp.zeros((cfg.heads,)))

    def _split(self, x_BTC: jax.Array) -> jax.Array:
        B, T, C = x_BTC.shape
        return x_BTC.reshape(B, T, self.heads, C // self.heads).transpose(0, 2, 1, 3)

    def scalars(self) -> tuple[jax.Array, jax.Array]:
        """The kernel's b and eps per head: softplus of the learned raw values."""
        return jax.nn.softplus(self.b_raw[...]), jax.nn.softplus(self.eps_raw[...])

    def __call__(self, x_BTC: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        """Output (B, T, C), and the probe: q, k (B,H,T,Dh), weights (B,H,T,T), max raw score."""
        if self.spec.qk_proj:
            q_BHTD, k_BHTD = self._split(self.q_proj(x_BTC)), self._split(self.k_proj(x_BTC))
        else:
            q_BHTD = k_BHTD = self._split(x_BTC)
        v_BHTD = self._split(self.v_proj(x_BTC)) if self.spec.v_residual else q_BHTD
        T = x_BTC.shape[1]
        mask_TT = causal_mask(T, self.spec.strict_mask)
        if not self.spec.kernel:
            score_BHTT = jnp.einsum("bhtd,bhsd->bhts", q_BHTD, k_BHTD) / jnp.sqrt(q_BHTD.shape[-1]).astype(q_BHTD.dtype)
            score_BHTT = jnp.where(mask_TT, score_BHTT, -jnp.inf)
            w_BHTT = jax.nn.softmax(score_BHTT, axis=-1)
        else:
            b_H, eps_H = self.scalars()
            score_BHTT = jnp.where(mask_TT, kernel_scores(q_BHTD, k_BHTD, b_H, eps_H), 0.0)
            w_BHTT = score_BHTT / (jnp.sum(score_BHTT, axis=-1, keepdims=True) + ROW_EPS)
        probe = {"q": q_BHTD, "k": k_BHTD, "attn": w_BHTT, "score_max": jnp.max(score_BHTT)}
        y_BHTD = jnp.einsum("bhts,bhsd->bhtd", self.drop(w_BHTT), v_BHTD)
        B, H, _, D = y_BHTD.shape
        return self.o_proj(y_BHTD.transpose(0, 2, 1, 3).reshape(B, T, H * D)), probe


class Block(nnx.Module):
    """Pre-norm transformer block: x + attn(LN(x)), then x + dropout(fc2(gelu(fc1(LN(x)))))."""

    def __init__(self, variant: str, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(cfg.d_model, rngs=rngs)
        self.attn = Attention(variant, cfg, rngs=rngs)
        self.ln2 = nnx.LayerNorm(cfg.d_model, rngs=rngs)
        self.fc1 = nnx.Linear(cfg.d_model, cfg.d_ff, rngs=rngs)
        self.fc2 = nnx.Linear(cfg.d_ff, cfg.d_model, rngs=rngs)
        self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)

    def __call__(self, x_BTC: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        a_BTC, probe = self.attn(self.ln1(x_BTC))
        x_BTC = x_BTC + a_BTC
        x_BTC = x_BTC + self.drop(self.fc2(jax.nn.gelu(self.fc1(self.ln2(x_BTC)), approximate=True)))
        return x_BTC, probe


class GPT(nnx.Module):
    """The character GPT: token + position embedding, blocks, final LN, linear head."""

    def __init__(self, variant: str, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.variant = variant
        self.cfg = cfg
        self.tok = nnx.Embed(cfg.vocab, cfg.d_model, rngs=rngs)
        self.pos = nnx.Embed(cfg.seq_len, cfg.d_model, rngs=rngs)
        self.blocks = nnx.List([Block(variant, cfg, rngs=rngs) for _ in range(cfg.layers)])
        self.ln_f = nnx.LayerNorm(cfg.d_model, rngs=rngs)
        self.head = nnx.Linear(cfg.d_model, cfg.vocab, rngs=rngs)

    def forward(self, tokens_BT: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        """Logits (B, T, V) and every layer's probe stacked on a leading layer axis."""
        x_BTC = self.tok(tokens_BT) + self.pos(jnp.arange(tokens_BT.shape[1]))
        probes = []
        for block in self.blocks:
            x_BTC, probe = block(x_BTC)
            probes.append(probe)
        logits_BTV = self.head(self.ln_f(x_BTC))
        return logits_BTV, jax.tree.map(lambda *a: jnp.stack(a), *probes)

    def __call__(self, tokens_BT: jax.Array) -> jax.Array:
        return self.forward(tokens_BT)[0]

    def kernel_scalars(self) -> tuple[jax.Array, jax.Array]:
        """Learned b and eps of a kernel variant, (layers, heads) each."""
        pairs = [block.attn.scalars() for block in self.blocks]
        return jnp.stack([p[0] for p in pairs]), jnp.stack([p[1] for p in pairs])


def build(variant: str, cfg: ModelConfig, seed: int) -> GPT:
    """The model of one variant with its initial parameters drawn from `nnx.Rngs(seed)`."""
    return GPT(variant, cfg, rngs=nnx.Rngs(seed))


def param_stats(model: nnx.Module) -> tuple[int, float, float]:
    """Number of parameters, their sum and the sum of their absolute values (float64)."""
    leaves = [np.asarray(x, dtype=np.float64) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]
    return sum(x.size for x in leaves), float(sum(x.sum() for x in leaves)), float(sum(np.abs(x).sum() for x in leaves))
