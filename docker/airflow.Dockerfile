# The Airflow image of docker-compose.yml: the official Airflow 3 image with this provider installed,
# a Java 17 runtime for spark-submit (the streaming job's driver runs next to Airflow in client mode) and
# Spark's Kafka source jars, resolved by Maven from jvm/spark-kafka/pom.xml as `make setup` does, and the
# job's record-id jar, compiled from jvm/record-id/src (a JDK in the build stage only).
# Built from the repository root: docker compose build (or docker build -f docker/airflow.Dockerfile .).

FROM apache/airflow:3.3.2-python3.11 AS runtime

USER root
# AIRFLOW__KAFKA_FAILOVER__JOB_JARS: the provider's job_jars option (spark-submit --jars accepts globs).
ENV JAVA_HOME=/opt/java-17 \
    AKF_PROJECT_ROOT=/opt/kafka-failover-src \
    AKF_JARS_DIR=/opt/kafka-failover-jars \
    AIRFLOW__KAFKA_FAILOVER__JOB_JARS=/opt/kafka-failover-jars/spark-kafka/*.jar,/opt/kafka-failover-jars/record-id/akf-record-id.jar
# The man folder is missing from the slim base image, and the JRE's post-install step needs it.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && apt-get autoremove -yqq --purge \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" "${JAVA_HOME}" \
    && mkdir -p "${AKF_PROJECT_ROOT}" "${AKF_JARS_DIR}" \
    && chown airflow:0 "${AKF_PROJECT_ROOT}" "${AKF_JARS_DIR}" \
    && chmod 0775 "${AKF_JARS_DIR}"

USER airflow
COPY --chown=airflow:0 pyproject.toml README.md ${AKF_PROJECT_ROOT}/
COPY --chown=airflow:0 jvm ${AKF_PROJECT_ROOT}/jvm
COPY --chown=airflow:0 airflow_kafka_failover ${AKF_PROJECT_ROOT}/airflow_kafka_failover
# The development tools: the demo producer service and the jar resolver below.
COPY --chown=airflow:0 devtools ${AKF_PROJECT_ROOT}/devtools
# Pinning apache-airflow keeps pip from moving the image's own Airflow while it resolves the provider. The
# `spark` extra brings pyspark: the jobs run as local-mode drivers inside these containers.
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" "${AKF_PROJECT_ROOT}[spark]" "${AKF_PROJECT_ROOT}/devtools"

# Login admin / admin (the simple auth manager reads passwords from this file and writes to it).
RUN echo '{"admin": "admin"}' > /opt/airflow/simple_auth_manager_passwords.json \
    && chmod 0664 /opt/airflow/simple_auth_manager_passwords.json


FROM runtime AS spark-kafka-jars
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends maven openjdk-17-jdk-headless \
    && rm -rf /var/lib/apt/lists/*
USER airflow
# The development tools' resolver and compiler, so the folders carry the manifests it checks before every submit.
RUN python -c "from akf_devtools.sandbox.jars import ArtifactSet, record_id_jar; ArtifactSet('spark-kafka').ensure(check_zip=True); record_id_jar()" \
    && chmod -R g+rwX "${AKF_JARS_DIR}"


FROM runtime
# Group 0 may write the lock file: the containers run as another uid with group 0 (see docker-compose.yml).
COPY --from=spark-kafka-jars --chown=airflow:0 ${AKF_JARS_DIR} ${AKF_JARS_DIR}
