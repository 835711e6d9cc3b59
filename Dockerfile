# The crawler as a long-running service: `crawler daemon` on the data volume.
# Build: docker build -t crawler .   Run: docker run -v crawl-data:/data -p 127.0.0.1:9108:9108 crawler
# Seed it by dropping files of URLs into the volume's seeds/ folder; stop it with `docker stop` (SIGTERM drains).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY crawler ./crawler
RUN pip install .
COPY config.yaml /etc/crawler/config.yaml

RUN useradd --create-home --uid 10001 crawler \
    && mkdir -p /data/seeds \
    && chown -R crawler /data
USER crawler
WORKDIR /data
VOLUME ["/data"]

# Inside the container the endpoint listens on all interfaces so a published port reaches it;
# publish it on 127.0.0.1 of the host (as above) unless it should be reachable from elsewhere.
EXPOSE 9108
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9108/status', timeout=4)"]

CMD ["crawler", "daemon", "-c", "/etc/crawler/config.yaml", "-D", "crawl_dir=/data", \
     "-D", "daemon.seeds=/data/seeds", "-D", "metrics.listen=0.0.0.0:9108", "-D", "log.format=json"]
