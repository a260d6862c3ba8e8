"""The jobs the commands run: verify (judge a folder of bundles, write the report), rerun (train, then
judge), ensemble (K trajectories of one training), summary (judged runs as one small JSON) and bands
(rerun bands derived from measured trajectories)."""
