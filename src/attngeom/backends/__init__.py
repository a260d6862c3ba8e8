"""Remote backends: Kaggle kernels through the official client, and the CUDA Docker image."""
