"""The zero-rename protocol, its commit data and its S3 store layer.

This layer imports neither Airflow nor Spark: any Python worker can use it.
"""
