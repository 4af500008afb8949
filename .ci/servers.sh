#!/usr/bin/env bash
# Installs the real model servers that tests/sources/servers/test_*_live.py start, each into its own virtualenv
# under .servers/<name>/ (their pinned dependencies clash with the project's and with each other's), from PyPI.
# TorchServe's frontend is Java: Debian's openjdk-17-jre-headless; its worker runs without torch (the test gives
# its one torch import a stand-in: torch from PyPI is some GB of CUDA wheels). Safe to run again: a venv whose
# marker holds the same requirements is skipped. Prints how long each install took (docs/tested.md has them).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# name | requirements (pip arguments)
SERVERS=(
  "mlserver|mlserver==1.7.1 mlserver-sklearn==1.7.1"
  "bentoml|bentoml==1.4.40 scikit-learn"
  "kserve|kserve==0.21.0 scikit-learn"
  "torchserve|torchserve==0.12.0 torch-model-archiver==0.12.0 pyyaml"
  "rayserve|ray[serve]==2.60.0"
)

if ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
  echo "installing Debian's openjdk-17-jre-headless for TorchServe"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

for entry in "${SERVERS[@]}"; do
  name=${entry%%|*}
  reqs=${entry#*|}
  dir=.servers/$name
  if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$reqs" ]; then
    echo "server $name: installed ($reqs)"
    continue
  fi
  start=$(date +%s)
  rm -rf "$dir"
  "$PY" -m venv "$dir"
  # shellcheck disable=SC2086  # the requirements are words
  # (this machine's pip config names local indexes; their "is ignored" lines are noise)
  "$dir/bin/python" -m pip install -q $reqs 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
  echo "$reqs" >"$dir/.installed"
  echo "server $name: installed $reqs in $(($(date +%s) - start)) s"
done
