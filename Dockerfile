# evalstream worker image: slim, non-root, health-checked on /healthz.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY schemas schemas
COPY stream_app stream_app
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 evalstream
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER evalstream
WORKDIR /home/evalstream
ENV PYTHONUNBUFFERED=1 \
    EVALSTREAM_WEB_BIND=0.0.0.0 \
    EVALSTREAM_WEB_PORT=6066 \
    EVALSTREAM_DATA_DIR=/home/evalstream/data
EXPOSE 6066
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('EVALSTREAM_WEB_PORT', '6066'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["stream-app"]
CMD ["worker"]
