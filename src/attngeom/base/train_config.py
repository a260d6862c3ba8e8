"""What a training run depends on besides the variant and the seed: the model and the schedule.

Plain frozen dataclasses and the presets, without jax and below the training package, so that the
command line, the judgement of a run folder and the remote backends read and check a configuration
in an environment that cannot train. Hashed with the training code (training.trajectory).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from attngeom.base.variants import variant as variant_spec


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of the character GPT (the paper preset is the default)."""

    vocab: int = 65
    d_model: int = 192
    layers: int = 6
    heads: int = 4
    seq_len: int = 128
    d_ff: int = 768
    dropout: float = 0.1

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run depends on besides the variant and the seed (paper preset by default)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    batch: int = 64
    steps: int = 12_000
    eval_every: int = 500
    val_batches: int = 16
    weight_decay: float = 0.01
    lr: float | None = None  # one learning rate for every variant, else each variant's original one
    chunk: int = 50
    stop_after: int | None = None  # the last step trained: the first part of the schedule, else all of it
    windows: int = 16  # windows W the maps are also recorded on: the fixed one and W - 1 more
    member: int = (
        0  # the ensemble member: 0 trains from the seed's parameters, m >= 1 from them moved one ulp (train.perturb)
    )

    def steps_done(self) -> int:
        """How many steps a run of this configuration trains."""
        return self.steps if self.stop_after is None else self.stop_after + 1

    def lr_of(self, variant: str) -> float:
        return self.lr if self.lr is not None else variant_spec(variant).lr

    def telemetry_steps(self) -> tuple[int, ...]:
        """0 (before any update), steps//10, steps//2, steps-1 (after that step's update)."""
        return tuple(sorted({0, self.steps // 10, self.steps // 2, self.steps - 1}))

    def eval_points(self) -> tuple[int, ...]:
        """Numbers of completed steps after which the validation loss is measured."""
        return tuple(sorted({*range(self.eval_every, self.steps + 1, self.eval_every), self.steps}))

    def original_cfg(self) -> dict:
        """The `cfg` record of the original run JSON."""
        m, lr = self.model, self.lr_of("softmax")  # the original records softmax's rate
        cfg = {
            "D": m.d_model,
            "LAYERS": m.layers,
            "HEADS": m.heads,
            "T": m.seq_len,
            "FF": m.d_ff,
            "BATCH": self.batch,
            "STEPS": self.steps,
            "LR": lr,
            "DROP": m.dropout,
            "EVAL_EVERY": self.eval_every,
            "VAL_BATCHES": self.val_batches,
        }
        return cfg if self.stop_after is None else {**cfg, "STOPPED_AFTER": self.stop_after}

    @classmethod
    def from_dict(cls, record: dict) -> TrainConfig:
        """The configuration `dataclasses.asdict` wrote (a run manifest's `config.train`)."""
        return cls(**{**record, "model": ModelConfig(**record["model"])})


PRESETS = {
    "paper": TrainConfig(),
    "smoke": TrainConfig(
        model=ModelConfig(d_model=32, layers=6, heads=4, seq_len=32, d_ff=64),
        batch=8,
        steps=60,
        eval_every=20,
        val_batches=2,
        chunk=20,
    ),
}
PRESET_NAMES = tuple(PRESETS)


def preset(name: str, **overrides) -> TrainConfig:
    """A preset with some fields replaced (None values are ignored)."""
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})
