"""Training: configuration, corpus and batches, the character GPT (Flax NNX), the harness, run folders, the local rerun.

`config`, `data` and `runs` need only numpy; `model` and `train` need jax, which `rerun` loads only
where it starts training and the verification never loads.
"""
