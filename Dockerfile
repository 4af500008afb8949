# The sidecar's image: `docker build -t triton-sidecar .` (compose.yaml builds it as triton-sidecar:local).
# Triton itself runs from NVIDIA's image; this one holds only the sidecar (no Triton, no CUDA). NVML is loaded
# from the host driver when the container runs with the NVIDIA runtime; without it the GPU source reports no GPU.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sidecar ./sidecar
COPY exporters ./exporters
COPY dashboards ./dashboards
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[dashboards]"

FROM python:3.11-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/sidecar --create-home sidecar
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER sidecar
WORKDIR /var/lib/sidecar
EXPOSE 9500
HEALTHCHECK --interval=10s --timeout=5s --retries=6 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://localhost:9500/healthz', timeout=3)"]
ENTRYPOINT []
CMD ["sidecar", "run", "--config", "/etc/sidecar/sidecar.yaml"]
