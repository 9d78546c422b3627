#!/usr/bin/env bash
# Installs every Debian package headprune needs to build, test and run.
# Idempotent; run as root (or with sudo) on Debian 12. Safe to re-run.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev            # LibTorch 1.13.1 (CPU)
  libopenblas0-openmp     # fast BLAS that cooperates with ATen's OpenMP threads
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  nlohmann-json3-dev
  libcli11-dev
  zlib1g-dev
  libicu-dev              # Unicode properties, case mapping and normalization (HF tokenizers)
  libdnnl-dev             # oneDNN's headers: its sgemm runs fp32 inference linear layers (src/util/gemm.cc)
  libgloo-dev             # Gloo's headers: several processes on c10d (src/util/dist.cc, headprune launch)
  python3-torch           # torchrun, and the PyTorch side-by-side baselines in bench/eager
  clang-14 libclang-rt-14-dev  # the sanitizer and libFuzzer build (scripts/fuzz.sh)
  gnuplot-nox fonts-dejavu-core  # draws the figures of headprune plot / report (SVG, PNG, PDF)
  chromium python3-pil    # tests/e2e/report.sh renders the HTML report headless and checks the screenshot
  python3-sentencepiece   # reference client for SentencePiece .model/.spm files in tests (tests/clients/spm_encode.py)
  time                    # GNU time: peak RSS of each step in bench/llm7b.py
  pybind11-dev python3-dev  # the Python module (python/): headprune's library imported from Debian's python3
  python3-pytest          # its test suite (tests/python)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[setup] all packages already installed" >&2
fi

# libtorch pulls in a BLAS; make sure the OpenMP OpenBLAS is the one selected.
for alt in libblas.so.3-x86_64-linux-gnu liblapack.so.3-x86_64-linux-gnu; do
  target=$(update-alternatives --list "$alt" 2>/dev/null | grep openblas-openmp | head -n1 || true)
  if [ -n "$target" ]; then $SUDO update-alternatives --set "$alt" "$target" >/dev/null; fi
done

# Real clients for the tests (tests/clients/): transformers.js (tokenizers), node-llama-cpp (llama.cpp's
# prebuilt CPU build, for the GGUF files) and onnxruntime-node, pinned by package-lock.json. Reinstalled only when node_modules is missing or older than the lock file.
clients="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/clients"
if [ -f "$clients/package-lock.json" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "[setup] npm not found: skipping tests/clients (install Node.js (checked with 20) and npm for the reference-client tests)" >&2
  elif [ ! -f "$clients/node_modules/.package-lock.json" ] || \
     [ "$clients/package-lock.json" -nt "$clients/node_modules/.package-lock.json" ]; then
    echo "[setup] npm ci in tests/clients (transformers.js, node-llama-cpp, onnxruntime-node)" >&2
    (cd "$clients" && npm ci --no-audit --no-fund)
  else
    echo "[setup] tests/clients/node_modules is up to date" >&2
  fi
fi
