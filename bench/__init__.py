"""Benchmarks of the committer; run them with ``python -m bench.<name>``."""
