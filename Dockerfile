# The rackplan agent as a container (used by docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
# rackplan/ holds links to the three package folders: copied together, they resolve.
COPY rackplan ./rackplan
COPY assignor ./assignor
COPY agent ./agent
COPY fleet ./fleet
RUN pip install --no-cache-dir . && useradd --uid 10001 rackplan
USER rackplan
# Inside the container only: listen on every interface, so a published port reaches the agent.
# Outside a container the default stays 127.0.0.1 (docs/settings.md).
ENV RACKPLAN_HTTP__HOST=0.0.0.0
EXPOSE 9464
ENTRYPOINT []
CMD ["rackplan", "agent", "run"]
