"""What every other package stands on: errors and exit statuses, standard streams, files and folders,
the pinned remote files and their cache, the JSON schemas, the environment and its lock, work in blocks,
the attention variants, the training configuration and the typed report records. Imports nothing above it.
"""
