"""The bundle format, every file of it (names, one search of a folder, validated reading and writing), the
laws every array obeys, what a folder of bundles is (its evidence), a run folder's manifest as its readers
see it, and the companion's runs."""
