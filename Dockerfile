# Kafka-wire-protocol group coordinator / stand-in broker.
#   docker build -t kafka-group-coordinator .
#   docker run -p 9092:9092 -v kcoord-data:/data kafka-group-coordinator
# Every flag of `python -m coordinator --help` can be set with its KCOORD_* variable,
# e.g. -e KCOORD_ADVERTISED_HOST=my-host when clients reach the container by another name.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# All runtime dependencies ship manylinux wheels (amd64 and arm64): no compiler needed. Without
# one the install is pure Python (the compiled build needs gcc and Python's headers).
COPY . .
RUN pip install . \
    && rm -rf /src/build /src/*.egg-info

RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin kafka \
    && mkdir /data \
    && chown kafka:kafka /data
USER kafka
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9092 9308

# The defaults equal `--host 0.0.0.0 --advertised-host localhost --data-dir /data`, given as
# environment so that `docker run -e KCOORD_...` / compose `environment:` can override them
# (a flag on the command line would win over the variable).
ENV KCOORD_HOST=0.0.0.0 \
    KCOORD_PORT=9092 \
    KCOORD_ADVERTISED_HOST=localhost \
    KCOORD_DATA_DIR=/data \
    KCOORD_METRICS_PORT=9308

# /ready: the data dir is loaded and the Kafka port listens (Prometheus scrapes /metrics there too).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/ready' % os.environ['KCOORD_METRICS_PORT'], timeout=2)"]

# Exec form: python is PID 1 and gets SIGTERM itself (graceful shutdown, exit 0).
CMD ["python", "-m", "coordinator"]
