"""The Commits page of the Airflow plugin."""
