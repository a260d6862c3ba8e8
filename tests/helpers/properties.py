"""What the property tests of the readers share: the hypothesis settings and the small model they generate."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

T, H, D = 5, 2, 2  # rows 0 (causal) and 1 (strict) have one key; T >= bundles.MIN_WINDOW
FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Few examples, no deadline: each one trains nothing but writes and reads files."""
