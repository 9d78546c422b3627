#!/usr/bin/env bash
# headprune as an installed library and as a Debian package, from the build in ./build:
#   1. cmake --install into a temporary prefix; the installed program runs;
#   2. examples/consumer, a program outside the tree, is configured with find_package(headprune)
#      against that prefix, built, and run: it loads a checkpoint, removes two heads and saves;
#      the installed program confirms the saved model has two heads fewer;
#   3. when the Python module was built: its pytest suite (tests/python) against the installed
#      package directory and the installed program;
#   4. cpack builds the .deb; `apt-get install ./headprune_*.deb` installs it, the installed
#      headprune (on PATH) runs `demo --family encoder_classifier`, Debian's python3 imports the
#      installed module (when built), and the package is removed.
# Step 4 needs root or sudo; HP_PACKAGE_DEB=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
generator=()
if command -v ninja > /dev/null 2>&1; then generator=(-G Ninja); fi

cmake --install build --prefix "$tmp/prefix" > "$tmp/install.log"
hp=$tmp/prefix/bin/headprune
"$hp" --version
cat > "$tmp/model.json" <<'JSON'
{"arch": "encoder_classifier", "vocab_size": 64, "d_model": 32, "d_ff": 64, "n_heads": 4,
 "n_encoder_layers": 2, "n_classes": 2, "max_positions": 32}
JSON
"$hp" --seed 1 init --config "$tmp/model.json" --out "$tmp/ckpt"

cmake -S examples/consumer -B "$tmp/consumer" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/consumer.log"
cmake --build "$tmp/consumer" >> "$tmp/consumer.log"
"$tmp/consumer/prune_two" "$tmp/ckpt" "$tmp/pruned" encoder_self:0:1,encoder_self:1:3
"$hp" info "$tmp/pruned" | tee "$tmp/info.txt"
grep -q "encoder_self heads  6/8 kept" "$tmp/info.txt" || { echo "the consumer's model does not have 6 heads"; exit 1; }
if "$tmp/consumer/prune_two" "$tmp/ckpt" "$tmp/bad" encoder_self:5:0 2> "$tmp/bad.txt"; then
  echo "the consumer accepted a head that does not exist"; exit 1
fi
echo "consumer: $(cat "$tmp/bad.txt")"

py_pkg=$(find "$tmp/prefix" -path "*-packages/headprune/__init__.py" -printf "%h\n" | head -n1)
if [ -d build/python/headprune ]; then
  [ -n "$py_pkg" ] || { echo "the Python module was built but not installed under $tmp/prefix"; exit 1; }
  env -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1 HEADPRUNE_PYTHONPATH="$(dirname "$py_pkg")" HEADPRUNE_CLI="$hp" \
    /usr/bin/python3 -m pytest -q -p no:cacheprovider -p no:hypothesispytest tests/python
fi

if [ "${HP_PACKAGE_DEB:-1}" != 0 ]; then
  (cd build && cpack -G DEB -B "$tmp/deb" > "$tmp/cpack.log")
  deb=$(ls "$tmp"/deb/headprune_*.deb)
  dpkg-deb --field "$deb" Package Version Depends
  if dpkg -s headprune > /dev/null 2>&1; then echo "a headprune package is installed already; not touching it"; exit 1; fi
  $SUDO apt-get install -y -qq "$deb" > "$tmp/apt.log"
  (cd "$tmp" && command -v headprune && headprune --version &&
    headprune --log-level warn demo --family encoder_classifier --out "$tmp/demo" > "$tmp/demo.txt")
  grep -q "fine-tuned" "$tmp/demo.txt" || { echo "the installed demo did not finish"; cat "$tmp/demo.txt"; exit 1; }
  if [ -n "$py_pkg" ]; then
    (cd "$tmp" && env -u PYTHONPATH /usr/bin/python3 -c "import headprune; print('python module', headprune.__version__, headprune.__file__)")
  fi
  $SUDO apt-get remove -y -qq headprune > /dev/null
  ! command -v headprune > /dev/null || { echo "headprune still installed after removal"; exit 1; }
fi
echo "package check OK"
