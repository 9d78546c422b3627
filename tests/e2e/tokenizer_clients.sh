#!/usr/bin/env bash
# headprune's SentencePiece, Unigram and byte-level tokenizers against real clients: the comparison
# lives with the clients, in tests/clients/compare.py (its docstring says how; exit 77 = skipped).
#   tests/e2e/tokenizer_clients.sh HEADPRUNE TOKENIZERS_DIR TEXTS KNOWN_DIFFERENCES WORK_DIR
set -euo pipefail
# Debian's python3, where python3-sentencepiece is installed, not one a virtual environment puts first.
exec /usr/bin/python3 "$(cd "$(dirname "$0")/.." && pwd)/clients/compare.py" "$@"
