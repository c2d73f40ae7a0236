"""Spark 4 Python Data Source for zero-rename."""
