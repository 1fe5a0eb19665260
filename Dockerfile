# Seedbed's image for the web app and the workers (docker-compose.yml).
# One Python 3.11 image; the GPU worker is built with EXTRAS=gpu (vLLM). PyTorch's and vLLM's wheels carry
# their own CUDA runtime libraries, and the NVIDIA container toolkit mounts the host driver, so the same
# slim base serves CPU and GPU services.
# Front-end packages (htmx, Plotly's basic bundle, pinned in package-lock.json), built apart so the runtime image needs no Node.js.
FROM node:20-slim AS assets
WORKDIR /assets
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error

FROM python:3.11-slim

ARG EXTRAS=""
ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=webapp.settings \
    SEEDBED_HOME=/data \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# bubblewrap and an unprivileged user for the code verifier's sandbox (training/verifiers/sandbox.py): the
# worker runs as root and bwrap switches each model-written program to seedbed-sandbox (its tests to
# seedbed-sandbox-tests, which the programs cannot signal or read) inside its own
# namespaces. The worker services need cap_add SYS_ADMIN and seccomp/apparmor unconfined for bwrap to create
# those namespaces (docker-compose.yml; README "Production").
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap curl && rm -rf /var/lib/apt/lists/* \
    && useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
       seedbed-sandbox \
    && useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
       seedbed-sandbox-tests
WORKDIR /app

# Dependencies first (cached while only the code changes); pinned in pyproject.toml and nowhere else.
COPY pyproject.toml ./
RUN mkdir -p training webapp workers && touch training/__init__.py webapp/__init__.py workers/__init__.py \
    && pip install --no-cache-dir ".${EXTRAS:+[$EXTRAS]}" && pip uninstall -y seedbed

COPY manage.py ./
COPY training ./training
COPY webapp ./webapp
COPY workers ./workers
COPY templates ./templates
COPY static ./static
COPY --from=assets /assets/node_modules/htmx.org/dist ./node_modules/htmx.org/dist
COPY --from=assets /assets/node_modules/plotly.js-basic-dist-min ./node_modules/plotly.js-basic-dist-min
RUN pip install --no-cache-dir --no-deps . && mkdir -p /data

EXPOSE 8000
CMD ["gunicorn", "webapp.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4", "--threads", "4"]
