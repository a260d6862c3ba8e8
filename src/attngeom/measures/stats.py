"""The statistics behind the quoted numbers, per trained model, in float64 from the float16 bundles.

Definitions follow the original analysis as the posts state it: scorable rows have at least two
available keys, a row's winner is the argmax over its available keys, and every statistic is
kept per head (L, H) so the report can show the spread as well as the mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attngeom.base import blocks
from attngeom.bundles.layout import BundleModel
from attngeom.geometry import export_rounding, laws

SCALES = (0.5, 0.8, 1.25, 2.0, 4.0)
SWEEP_SCALES = tuple(np.geomspace(0.25, 4.0, 41).tolist())
SWEEP_HEAD = (0, 0)
CENSUS_HEAD = (3, 0)
FIXED_HEADS = {"the census head": CENSUS_HEAD, "the scale sweep's head": SWEEP_HEAD}  # (layer, head) read by position


def by_band(row_fn: Callable[[slice, slice, np.ndarray], np.ndarray], T: int, strict: bool) -> np.ndarray:
    """row_fn(rows, keys, hidden_RR) on each of laws.row_bands, joined: a value per scorable row, (..., R)."""
    return np.concatenate([row_fn(*band) for band in laws.row_bands(T, strict)], -1)


def band_winners(score: Callable[[slice, slice], np.ndarray], T: int, strict: bool) -> np.ndarray:
    """Winner of each scorable row, the argmax over its available keys, from each row band's scores
    `score(rows, keys)`, a fresh array this overwrites with -inf on the keys a row may not attend: (..., R)."""
    return by_band(lambda rows, keys, hidden: laws.hide(score(rows, keys), rows, hidden, -np.inf).argmax(-1), T, strict)


def zeroed_winners(bands: list[np.ndarray]) -> np.ndarray:
    """The winners of row bands of scores that are never negative, zero on the keys a row may not
    attend (a map, or kappa): the argmax of each row is its winner among the available keys, as with
    those keys at -inf: the first largest score, or key 0 where every score is 0. (..., R)."""
    return np.concatenate([band.argmax(-1) for band in bands], -1)


def winners(scores_NTS: np.ndarray, strict: bool) -> np.ndarray:
    """Winner of each scorable row of whole scores (..., T, T): (..., R). Float16 maps are compared in
    float32 (every float16 is one exactly), other scores in their own precision."""
    dtype = np.result_type(scores_NTS.dtype, np.float32)
    return band_winners(lambda rows, keys: scores_NTS[..., rows, keys].astype(dtype), scores_NTS.shape[-2], strict)


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
    _at_one: dict[bool, list[np.ndarray]] = field(default_factory=dict, compare=False, repr=False)

    def __call__(self, t: float) -> np.ndarray:
        if self.b is None:
            return t * self.dots
        return laws.kernel(self.dots, self.qq, self.kk, self.b, self.eps, t)

    def band(self, rows: slice, keys: slice) -> Scorer:
        """The scorer of the queries `rows` against the keys `keys` (the same numbers, element by element)."""
        return Scorer(self.dots[..., rows, keys], self.qq[..., rows], self.kk[..., keys], self.b, self.eps)

    def at_one(self, strict: bool) -> list[np.ndarray]:
        """The kernel at t = 1 on each row band (laws.row_bands), 0 on the keys a row may not attend,
        computed once: the scale test's reference winners and the weights the reconstruction compares."""
        if strict not in self._at_one:
            T = self.dots.shape[-1]
            self._at_one[strict] = [
                laws.hide(self.band(rows, keys)(1.0), rows, hidden, 0.0)
                for rows, keys, hidden in laws.row_bands(T, strict)
            ]
        return self._at_one[strict]

    def winners(self, t: float, strict: bool) -> np.ndarray:
        """winners(self(t), strict), each row band scored on the keys its rows see only (laws.row_bands):
        3/8 of the scores are never computed. Every score is the one self(t) holds, and so is every
        winner. A kernel at t = 1 takes them from `at_one` (zeroed_winners)."""
        if t == 1.0 and self.b is not None:
            return zeroed_winners(self.at_one(strict))
        return band_winners(lambda rows, keys: self.band(rows, keys)(t), self.dots.shape[-1], strict)

    def nearest(self, strict: bool) -> np.ndarray:
        """Each scorable row's nearest available key, argmin |q - k|^2 = |q|^2 + |k|^2 - 2 q.k, band by band: (..., R)."""
        return band_winners(
            lambda rows, keys: -(self.qq[..., rows, None] + self.kk[..., None, keys] - 2 * self.dots[..., rows, keys]),
            self.dots.shape[-1],
            strict,
        )


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


def scale_sweep(model: BundleModel, head: tuple[int, int] | None = SWEEP_HEAD, scales=SWEEP_SCALES) -> np.ndarray:
    """The sweep's changed fraction per scale: (S,) on one head, (S, ..., L, H) on every head (`head` None)."""
    return sweep_changed_rows(model, head, scales).mean(-1)


class MapRows:
    """An attention map's scorable rows, band by band (laws.row_bands), in float64 with 0 on the keys a
    row may not attend: converted once, and read by the map's winners, distinct winners, entropy and
    winner share.

    A map is never negative (arrays.check_attention refuses one): its winners are `zeroed_winners`'s."""

    def __init__(self, attn_NTT: np.ndarray, strict: bool) -> None:
        T = attn_NTT.shape[-1]
        self.T = T
        self.bands = [
            (laws.hide(attn_NTT[..., rows, keys].astype(np.float64), rows, hidden, 0.0), rows)
            for rows, keys, hidden in laws.row_bands(T, strict)
        ]
        self.n_keys_T = np.arange(T) + (0 if strict else 1)  # the keys row i may attend

    def _rows(self, row_fn: Callable[[np.ndarray, slice], np.ndarray]) -> np.ndarray:
        return np.concatenate([row_fn(p, rows) for p, rows in self.bands], -1)

    @blocks.measured
    def winners(self) -> np.ndarray:
        """The winner of each scorable row: (..., R)."""
        return zeroed_winners([p for p, _ in self.bands])

    @blocks.measured
    def occupancy(self) -> np.ndarray:
        """Distinct winners among the scorable rows, divided by T: (...)."""
        return distinct_count(self.winners) / self.T

    @blocks.measured
    def entropy(self) -> np.ndarray:
        """Mean normalised entropy of the scorable rows: (...). Each row is renormalised over its
        available keys and its entropy divided by the log of their number (i + 1 causal, i strict). A
        row of no weight at all (a kernel row whose scores all vanish) has no distribution to measure;
        like an even row, it counts as 1."""

        def entropy(weights: np.ndarray, rows: slice) -> np.ndarray:
            total = weights.sum(-1, keepdims=True)
            p = weights / np.where(total > 0, total, 1.0)
            p *= np.log(np.where(p > 0, p, 1.0))  # p log p, 0 where p = 0
            return np.where(total[..., 0] > 0, -p.sum(-1) / np.log(self.n_keys_T[rows]), 1.0)

        return self._rows(entropy).mean(-1)

    @blocks.measured
    def share(self) -> np.ndarray:
        """Mean share of its row that each scorable row's winner holds: (...).

        The posts shade each owner darker "the more of the row the winner holds": the winner's weight
        over the row's weight on its available keys (a softmax row sums to 1, a kernel row to
        S/(S + 1e-9), anything in [0, 1), so both are renormalised). A row of n keys gives a share in
        [1/n, 1]; a row of no weight at all (a kernel row whose scores all vanish) singles out no key,
        and counts as 1/n, the share of an even row."""

        def share(p: np.ndarray, rows: slice) -> np.ndarray:
            top, total = p.max(-1), p.sum(-1)
            return np.where(total > 0, top / np.where(total > 0, total, 1.0), 1.0 / self.n_keys_T[rows])

        return self._rows(share).mean(-1)


def occupancy(attn_LHTT: np.ndarray, strict: bool) -> np.ndarray:
    """Distinct winners among the scorable rows of a map, divided by T: (L, H)."""
    return MapRows(attn_LHTT, strict).occupancy


def norm_entropy(attn_LHTT: np.ndarray, strict: bool) -> np.ndarray:
    """Mean normalised entropy of the scorable rows, per head: (L, H) (MapRows.entropy)."""
    return MapRows(attn_LHTT, strict).entropy


def winner_share(attn_LHTT: np.ndarray, strict: bool) -> np.ndarray:
    """Mean share of its row that each scorable row's winner holds, per head: (L, H) (MapRows.share)."""
    return MapRows(attn_LHTT, strict).share


def reconstruction(model: BundleModel, score: Scorer | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the largest |kernel weights recomputed from exported q, k, b, eps - exported attn|, and the
    largest such gap as a share of the room float16 export and float32 arithmetic leave it
    (export_rounding: at most 1 wherever the export identity holds): (..., L, H) each.

    Row band by row band (the kernel at t = 1 the scale test computed), and the rows before the
    first scorable one whole; a key a row may not attend has weight 0 in both, the exported map's
    checked on reading (arrays.check_attention), so the keys right of a band add nothing to the gap."""
    score = score or scorer(model)
    T, strict, attn = model.attn_LHTT.shape[-1], model.strict, model.attn_LHTT
    available = laws.available_TT(T, strict)
    export = export_rounding.Export(model.q_LHTD, model.k_LHTD)
    first = slice(0, laws.first_scorable(strict))
    bands = [(score.band(first, first)(1.0), first, first)]
    bands += [(kappa, rows, keys) for kappa, (rows, keys, _) in zip(score.at_one(strict), laws.row_bands(T, strict))]
    gaps, shares = [], []
    for kappa, rows, keys in bands:
        weights = laws.kernel_weights(kappa, available[rows, keys])
        exported = attn[..., rows, keys]  # each float16 weight is a float64 exactly
        part = score.band(rows, keys)
        lo, hi = export.kappa_interval(rows, keys, part.dots, part.qq, part.kk, score.b, score.eps)
        lo, hi = export.weight_interval(lo, hi, available[rows, keys])
        shares.append(export_rounding.room_share(exported, weights, lo, hi).max((-2, -1)))
        weights -= exported
        gaps.append(np.abs(weights, out=weights).max((-2, -1)))
    return np.max(gaps, axis=0), np.max(shares, axis=0)


def reconstruction_error(model: BundleModel) -> float:
    """Largest |kernel weights recomputed from exported q, k, b, eps - exported attn| over all heads."""
    return float(reconstruction(model)[0].max())


def winner_agreement(
    model: BundleModel, score: Scorer | None = None, final: MapRows | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the share of scorable rows whose winner in the final map (`final`: its rows, if read
    already) is also the nearest key (argmin |q - k|) and the best-aligned key (argmax q.k) among the
    available keys."""
    score = score or scorer(model)
    own = (final or MapRows(model.attn_LHTT, model.strict)).winners
    nearest = score.nearest(model.strict)
    aligned = winners(score.dots, model.strict)
    return (own == nearest).mean(-1), (own == aligned).mean(-1)
