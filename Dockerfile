FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml ./
COPY lifecycle ./lifecycle
COPY workflows ./workflows
COPY activities ./activities
COPY api ./api
COPY devstack ./devstack
COPY bench ./bench
COPY worker.py ./
RUN pip install --no-cache-dir .
RUN useradd --system --create-home app && mkdir -p /var/lib/lifecycle && chown app /var/lib/lifecycle
USER app
