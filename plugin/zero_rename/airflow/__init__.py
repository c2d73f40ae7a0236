"""Airflow provider: hooks, operators, sensors and the Commits page."""
