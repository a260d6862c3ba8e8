"""Training: corpus and batches, the character GPT (Flax NNX), the harness, run folders, the local rerun.

`data` and `runs` need only numpy; `model`, `train` and the body of a rerun need jax, which the
verification never loads.
"""
