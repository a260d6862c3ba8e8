"""Claims and their judgement: one function per claim, the expected values and bands, the verdicts, the
extra windows and seeds, and every measured trajectory of the paper's training beside each claim."""
