"""Training: corpus and batches, the character GPT (Flax NNX), the harness, checkpoints, run folders,
the local rerun into bundles, and the side-by-side check against the author's script.

`data` and `runs` need only numpy; `model` and `train` need jax, which `local_run` loads only where
it starts training and the verification never loads (nothing below this package imports it). The
trajectory's code hash (`trajectory.code_hash`) covers every module here but the bookkeeping.
"""
