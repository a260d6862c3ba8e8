"""The generated figures of README.md and docs/: each page's blocks (`pages`) and the functions that
write them from measurement files (`measured`, `bench`, `full_length`)."""
