# The rackplan agent as a container (docker-compose.yml; the Helm chart in deploy/helm/rackplan).
# docs/deploy.md: `docker build --build-arg VERSION=$(git describe --always) -t rackplan:0.1.0 .`

# The wheel is built where a C compiler is: it carries the min-cost flow's compiled core
# (assignor/flow/_flowcore.c, issue 29), which the image (no compiler) installs; the build fails
# if the core is missing from the wheel rather than ship the slower Python solver unnoticed.
FROM python:3.11-slim AS wheel
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
# rackplan/ holds links to the three package folders: copied together, they resolve.
COPY rackplan ./rackplan
COPY assignor ./assignor
COPY agent ./agent
COPY fleet ./fleet
RUN pip wheel --no-cache-dir --no-deps -w /wheels . \
    && python -c "import glob, zipfile; (w,) = glob.glob('/wheels/rackplan-*.whl'); \
assert any('/_flowcore.' in n and n.endswith('.so') for n in zipfile.ZipFile(w).namelist()), 'no flow core'"

FROM python:3.11-slim
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="rackplan" \
      org.opencontainers.image.description="The rackplan agent: rack-locality plans for Apache Kafka consumer groups and Kafka Streams apps" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.documentation="docs/deploy.md"
WORKDIR /app
COPY --from=wheel /wheels /tmp/wheels
# A numeric non-root user, so Kubernetes' runAsNonRoot can check it without a runAsUser.
RUN pip install --no-cache-dir /tmp/wheels/rackplan-*.whl \
    && rm -rf /tmp/wheels \
    && groupadd --gid 10001 rackplan \
    && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin rackplan
USER 10001:10001
# Inside the container only: listen on every interface, so a published port reaches the agent.
# Outside a container the default stays 127.0.0.1 (docs/settings.md).
ENV RACKPLAN_HTTP__HOST=0.0.0.0
EXPOSE 9464
# /healthz answers 200 while the agent serves HTTP, leader or standby (a standby's /readyz is 503:
# not a health failure). Kubernetes ignores HEALTHCHECK and uses the chart's probes.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=6 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('RACKPLAN_HTTP__PORT', '9464'), timeout=4)"]
ENTRYPOINT []
# With the supervisor (restarts the agent after a native crash of its Kafka client): for
# `docker run` without a restart policy. Under Kubernetes the chart runs `--no-supervisor`.
CMD ["rackplan", "agent", "run"]
