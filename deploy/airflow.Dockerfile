# Airflow for the zero-rename stack: the official image plus this package, the
# amazon and apache-spark providers, and what the stage task's spark-submit
# needs. With the LocalExecutor the task runs spark-submit in the scheduler's
# container and the Spark driver runs there too (client mode): hence Java and
# the full pyspark, not only the pyspark-client the provider pulls.
#
#   docker build -f deploy/airflow.Dockerfile -t zero-rename-airflow:local .
FROM apache/airflow:3.3.2-python3.11

USER root
# Spark 4 runs on Java 17 (the image is Debian bookworm).
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && apt-get autoremove -yqq --purge \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
USER airflow

# constraints.txt pins every package to the versions the project tests, among
# them pyspark and pyspark-client to the same release (4.2.0): the client's
# Python sources overwrite pyspark's, so two releases would mix. The runtime
# comes from the package's extras; requirements.txt adds only test tools.
# Airflow itself is named with the image's version so pip never replaces it.
COPY --chown=airflow:0 constraints.txt pyproject.toml README.md /opt/zero-rename/
COPY --chown=airflow:0 plugin /opt/zero-rename/plugin
RUN pip install --no-cache-dir --constraint /opt/zero-rename/constraints.txt \
        "apache-airflow==${AIRFLOW_VERSION}" "/opt/zero-rename[airflow,spark]"
