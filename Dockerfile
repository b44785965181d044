# evalstream worker image: slim, non-root, health-checked on /healthz. Python 3.11: CI runs the
# whole suite (live workers and brokers included) on it; on 3.12 and 3.13 the unit suite.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY schemas schemas
COPY stream_app stream_app
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
# bubblewrap: the sandbox of functional correctness (stream_app/code_quality/sandbox.py). It needs no
# capability (--cap-drop ALL is fine) but must create user namespaces as this non-root user, which
# Docker's defaults refuse; run the image with
#   --security-opt seccomp=unconfined      (or Docker's default profile plus clone/unshare with
#                                           CLONE_NEW* flags, mount, umount2 and pivot_root)
#   --security-opt apparmor=unconfined     (hosts with AppArmor: docker-default refuses mount)
#   --security-opt systempaths=unconfined  (bwrap --disable-userns writes the sandbox's own
#                                           /proc/sys/user/max_user_namespaces)
# Without them the worker runs, and evaluate_source refuses untrusted code (SandboxUnavailable).
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*
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
