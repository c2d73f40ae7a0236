# Spark standalone master and worker for the zero-rename stack; also runs the
# stack's S3 init job. Executors run the zero-rename data source in Python
# workers, so the worker needs the driver's Python minor version (3.11, as in
# the Airflow image), pyarrow, boto3, pydantic and this package. pip's pyspark
# brings Spark itself: spark-class, spark-submit and the jars.
#
#   docker build -f deploy/spark.Dockerfile -t zero-rename-spark:local .
FROM python:3.11-slim-bookworm

# Spark 4 runs on Java 17. The man directory is missing in slim images and
# some JRE packages fail to configure without it.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*

# The versions the project tests (constraints.txt), pyspark 4.2.0 among them:
# the same Spark release as the driver in the Airflow image.
COPY constraints.txt pyproject.toml README.md /opt/zero-rename/
COPY plugin /opt/zero-rename/plugin
RUN pip install --no-cache-dir --constraint /opt/zero-rename/constraints.txt \
        "/opt/zero-rename[spark]"
COPY deploy/s3_init.py /opt/zero-rename/s3_init.py

# Executors start this interpreter for Python workers (the driver says the same
# through PYSPARK_PYTHON in deploy/airflow.env).
ENV PYSPARK_PYTHON=python3
RUN useradd --uid 185 --gid 0 --create-home spark
USER 185
WORKDIR /home/spark
