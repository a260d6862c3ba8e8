"""The report of a verification: REPORT.md (`markdown`), the page (`page`, with `assets/`), the six
figures and the toy's (`figures`, `figures_toy`, `drawing`), and the report folder written whole (`outputs`)."""
