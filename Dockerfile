# The rackplan agent as a container (used by docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY assignor ./assignor
COPY agent ./agent
RUN pip install --no-cache-dir . && useradd --uid 10001 rackplan
USER rackplan
EXPOSE 9464
ENTRYPOINT []
CMD ["rackplan", "agent", "run"]
