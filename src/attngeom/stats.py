"""The statistics behind the quoted numbers, per trained model, in float64 from the float16 bundles.

Definitions follow the original analysis as the posts state it: scorable rows have at least two
available keys, a row's winner is the argmax over its available keys, and every statistic is
kept per head (L, H) so the report can show the spread as well as the mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attngeom import laws
from attngeom.bundles import BundleModel

SCALES = (0.5, 0.8, 1.25, 2.0, 4.0)
SWEEP_SCALES = tuple(np.geomspace(0.25, 4.0, 41).tolist())
SWEEP_HEAD = (0, 0)
CENSUS_HEAD = (3, 0)
FIXED_HEADS = {"the census head": CENSUS_HEAD, "the scale sweep's head": SWEEP_HEAD}  # (layer, head) read by position


def winners(scores_NTS: np.ndarray, strict: bool) -> np.ndarray:
    """Winner of each scorable row: argmax over the available keys, (..., rows). Float16 maps are
    compared in float32 (every float16 is one exactly), other scores in their own precision."""
    T = scores_NTS.shape[-2]
    masked = np.where(laws.available_TT(T, strict), scores_NTS, np.float32(-np.inf))
    return masked.argmax(-1)[..., laws.first_scorable(strict) :]


def distinct_count(win_NR: np.ndarray) -> np.ndarray:
    """How many distinct values each row of winners holds, (...)."""
    ordered = np.sort(win_NR, axis=-1)
    return 1 + (np.diff(ordered, axis=-1) != 0).sum(-1)


def _pick(a: np.ndarray, head: tuple[int, int] | None, tail: int) -> np.ndarray:
    """All heads (None) or head (l, h) of an array whose last `tail` axes follow L, H."""
    return a if head is None else a[(..., *head) + (slice(None),) * tail]


@dataclass(frozen=True)
class Scorer:
    """A model's raw score as a function of the query scale t: t q.k (softmax, b None) or kappa
    (kernel). The dot products and squared norms are computed once and shared by every t and by
    the statistics that need them."""

    dots: np.ndarray
    qq: np.ndarray
    kk: np.ndarray
    b: np.ndarray | None
    eps: np.ndarray | None

    def __call__(self, t: float) -> np.ndarray:
        if self.b is None:
            return t * self.dots
        return laws.kernel(self.dots, self.qq, self.kk, self.b, self.eps, t)

    def band(self, rows: slice, keys: slice) -> Scorer:
        """The scorer of the queries `rows` against the keys `keys` (the same numbers, element by element)."""
        return Scorer(self.dots[..., rows, keys], self.qq[..., rows], self.kk[..., keys], self.b, self.eps)

    def winners(self, t: float, strict: bool) -> np.ndarray:
        """winners(self(t), strict), without scoring the keys no row of the upper half can see: rows
        i < h = T/2 see keys j <= i < h only, so their winners come from the h x h scores of the top
        left, the other rows' from their whole rows; a quarter of the scores is never computed (the
        scale test on 16 windows of the published models: 0.82 s instead of 1.11 s). Every score is
        the one self(t) holds, and so is every winner."""
        T = self.dots.shape[-1]
        h = max(T // 2, laws.first_scorable(strict))
        top = winners(self.band(slice(0, h), slice(0, h))(t), strict)  # rows first_scorable .. h - 1
        masked = np.where(laws.available_TT(T, strict)[h:], self.band(slice(h, T), slice(0, T))(t), -np.inf)
        return np.concatenate([top, masked.argmax(-1)], -1)


def scorer(model: BundleModel, head: tuple[int, int] | None = None) -> Scorer:
    """The model's scorer on every head or on head (layer, head) only; q and k may carry leading
    axes (a window axis)."""
    q = _pick(model.q_LHTD, head, 2).astype(np.float64)
    k = _pick(model.k_LHTD, head, 2).astype(np.float64)
    kernel = model.b_LH is not None
    return Scorer(
        laws.dots(q, k),
        (q**2).sum(-1),
        (k**2).sum(-1),
        _pick(model.b_LH, head, 0) if kernel else None,
        _pick(model.eps_LH, head, 0) if kernel else None,
    )


def raw_scores(model: BundleModel, t: float = 1.0, head: tuple[int, int] | None = None) -> np.ndarray:
    """The model's raw score with every query scaled by t."""
    return scorer(model, head)(t)


def changed_winners(
    model: BundleModel, scales, reference: float, head: tuple[int, int] | None = None, score: Scorer | None = None
) -> np.ndarray:
    """Per scale, which scorable rows' winner differs from the winner at `reference`: (S, ..., R)."""
    score = score or scorer(model, head)
    base = score.winners(reference, model.strict)
    return np.stack([score.winners(float(t), model.strict) != base for t in scales])


def scale_changed(
    model: BundleModel, scales=SCALES, head: tuple[int, int] | None = None, score: Scorer | None = None
) -> np.ndarray:
    """Fraction of scorable rows whose winner moves when queries are scaled by t: (..., len(scales))."""
    return np.moveaxis(changed_winners(model, scales, 1.0, head, score).mean(-1), 0, -1)


def sweep_changed_rows(model: BundleModel, head=SWEEP_HEAD, scales=SWEEP_SCALES) -> np.ndarray:
    """The animation's sweep on one head: per scale, which scorable rows change winner against
    the scale nearest 1: (S, R)."""
    scales = np.asarray(scales)
    return changed_winners(model, scales, float(scales[np.argmin(np.abs(np.log(scales)))]), head)


def scale_sweep(model: BundleModel, head=SWEEP_HEAD, scales=SWEEP_SCALES) -> np.ndarray:
    """The sweep's changed fraction per scale: (S,)."""
    return sweep_changed_rows(model, head, scales).mean(-1)


def occupancy(attn_LHTT: np.ndarray, strict: bool) -> np.ndarray:
    """Distinct winners among the scorable rows of a map, divided by T: (L, H)."""
    win = winners(attn_LHTT, strict)
    return distinct_count(win) / attn_LHTT.shape[-1]


def norm_entropy(attn_LHTT: np.ndarray, strict: bool) -> np.ndarray:
    """Mean normalised entropy of the scorable rows, per head: (L, H).

    Each row is renormalised over its available keys and its entropy divided by the log of
    their number (i + 1 causal, i strict).
    """
    T = attn_LHTT.shape[-1]
    first = laws.first_scorable(strict)
    p = np.where(laws.available_TT(T, strict), attn_LHTT.astype(np.float64), 0.0)[..., first:, :]
    p = p / p.sum(-1, keepdims=True)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    n_keys = np.arange(first, T) + (0 if strict else 1)
    return (-plogp.sum(-1) / np.log(n_keys)).mean(-1)


def winner_share(attn_LHTT: np.ndarray, strict: bool) -> np.ndarray:
    """Mean share of its row that each scorable row's winner holds, per head: (L, H).

    The posts shade each owner darker "the more of the row the winner holds": the winner's weight
    over the row's weight on its available keys (a softmax row sums to 1, a kernel row to
    S/(S + 1e-9), anything in [0, 1), so both are renormalised). A row of n keys gives a share in
    [1/n, 1]; a row of no weight at all (a kernel row whose scores all vanish) singles out no key,
    and counts as 1/n, the share of an even row.
    """
    T = attn_LHTT.shape[-1]
    first = laws.first_scorable(strict)
    p = np.where(laws.available_TT(T, strict), attn_LHTT.astype(np.float64), 0.0)[..., first:, :]
    top, total = p.max(-1), p.sum(-1)
    n_keys = np.arange(first, T) + (0 if strict else 1)
    return np.where(total > 0, top / np.where(total > 0, total, 1.0), 1.0 / n_keys).mean(-1)


def reconstruction_gap(model: BundleModel, score: Scorer | None = None) -> np.ndarray:
    """Per head, largest |kernel weights recomputed from exported q, k, b, eps - exported attn|: (..., L, H)."""
    T = model.attn_LHTT.shape[-1]
    w = laws.kernel_weights((score or scorer(model))(1.0), laws.available_TT(T, model.strict))
    return np.abs(w - model.attn_LHTT.astype(np.float64)).max((-2, -1))


def reconstruction_error(model: BundleModel) -> float:
    """Largest |kernel weights recomputed from exported q, k, b, eps - exported attn| over all heads."""
    return float(reconstruction_gap(model).max())


def winner_agreement(model: BundleModel, score: Scorer | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the share of scorable rows whose winner in the final map is also the nearest key
    (argmin |q - k|) and the best-aligned key (argmax q.k) among the available keys."""
    score = score or scorer(model)
    dist2 = score.qq[..., :, None] + score.kk[..., None, :] - 2 * score.dots
    own = winners(model.attn_LHTT, model.strict)
    nearest = winners(-dist2, model.strict)
    aligned = winners(score.dots, model.strict)
    return (own == nearest).mean(-1), (own == aligned).mean(-1)
