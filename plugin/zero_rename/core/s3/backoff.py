"""The pause before asking the store again: one rule for every retry of the core."""

from __future__ import annotations

import random
import time


def backoff(round_number: int, base: float = 0.05, cap: float = 2.0) -> None:
    """Sleep before another round: exponential with full jitter (botocore's
    standard mode backs off so), so processes that lost the same race, or were
    refused by the same throttled store, do not ask again in step."""
    time.sleep(random.uniform(0, min(cap, base * 2**round_number)))
