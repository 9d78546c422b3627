#!/usr/bin/env bash
# Several processes on localhost (Gloo) against one, on the synthetic translation task (no dropout):
#   1. training, 2 processes x 1 thread (headprune launch) vs 1 process x 1 thread, same global
#      batches and seed: the same training and validation loss curve within float tolerance;
#   2. importance (gradient, confidence): the same maps within 1e-6 relative;
#   3. eval: the same loss and BLEU; and through torchrun when it is installed;
#   4. kill -9 of one of two ranks started by hand (no launcher to clean up): the other exits
#      non-zero within 60 s, and `launch --nproc 2 -- train --resume` completes the run; resuming
#      it as one process is refused;
#   5. the demo (train, score, prune, fine-tune, save, reload) as 2 processes;
#   6. while a launched 2-process run trains, no socket of its processes listens anywhere but on
#      127.0.0.1 (--master-addr's default), and its rendezvous directory is private (0700) and gone
#      afterwards.
# Usage: distributed.sh HEADPRUNE_BINARY WORK_DIR
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
g=(--threads 1 --seed 7 --log-level warn)
train=(train --family encoder_decoder --max-steps 60 --eval-every 20)

# The TCP sockets some processes listen on: LISTEN entries of /proc/net/tcp{,6} whose inode is one
# of the processes' open files, as (family, address, port, pid).
export HP_E2E_WORK=$work
cat > "$work/listeners.py" <<'EOF'
import os
def children(parent):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1]) == parent:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out
def listening(pids):
    inodes = {}
    for p in pids:
        try:
            for fd in os.listdir(f"/proc/{p}/fd"):
                try:
                    link = os.readlink(f"/proc/{p}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes[link[8:-1]] = p
        except OSError:
            pass
    found = []
    for family in ("tcp", "tcp6"):
        for line in open(f"/proc/net/{family}").read().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                addr, port = f[1].split(":")
                found.append((family, addr, int(port, 16), inodes[f[9]]))
    return found
def loopback(sock):
    family, addr = sock[0], sock[1]
    if family == "tcp":
        return addr == "0100007F"
    return addr in ("00000000000000000000000001000000", "0000000000000000FFFF00000100007F")
EOF

"$bin" "${g[@]}" "${train[@]}" --out "$work/one" > "$work/one.json"
"$bin" launch --nproc 2 -- "${g[@]}" "${train[@]}" --out "$work/two" > "$work/two.json"
left=$(cd "$work" && ls -A | grep headprune || true)  # scratch or locks (io/outputs.h) of any rank
[ -z "$left" ] || { echo "left behind by the ranks: $left"; exit 1; }

python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
one = json.load(open(f"{w}/one/history.json"))
two = json.load(open(f"{w}/two/history.json"))
assert [r["step"] for r in one] == [r["step"] for r in two], "different evaluation steps"
worst = 0.0
for a, b in zip(one, two):
    for k in ("train_loss", "loss"):
        rel = abs(a[k] - b[k]) / max(abs(a[k]), 1e-12)
        worst = max(worst, rel)
        print(f"step {a['step']:3d} {k:10s} 1 process {a[k]:.7f}  2 processes {b[k]:.7f}  rel {rel:.1e}")
assert worst <= 1e-4, f"loss curves differ by {worst:.2e} relative"
print(f"train: loss curves agree (worst relative difference {worst:.1e})")
EOF

ckpt="$work/one/best"
for m in gradient confidence; do
  "$bin" "${g[@]}" importance "$ckpt" --method "$m" --synthetic 600 --out "$work/imp1_$m" > /dev/null
  "$bin" launch --nproc 2 -- "${g[@]}" importance "$ckpt" --method "$m" --synthetic 600 --out "$work/imp2_$m" > /dev/null
done
python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
def scores(path):
    j = json.load(open(path))
    out, batches = {}, None
    for m in j["maps"]:
        batches = m["info"].get("batches", batches)
        for h in m["heads"]:
            for k, v in h.items():
                if isinstance(v, float):
                    out[(m["method"], h["attn_type"], h["layer"], h["head"], k)] = v
    return out, batches
for m in ("gradient", "confidence"):
    (a, _), (b, batches) = scores(f"{w}/imp1_{m}/importance.json"), scores(f"{w}/imp2_{m}/importance.json")
    assert a and a.keys() == b.keys(), f"{m}: the maps have different entries"
    worst = max(abs(a[k] - b[k]) / max(abs(a[k]), 1e-30) for k in a)
    print(f"importance {m}: {len(a)} head values, worst relative difference {worst:.1e}" +
          (f" ({batches} batches split over 2 processes)" if batches else ""))
    assert worst <= 1e-6, f"{m}: maps differ by {worst:.2e}"
EOF

ev=(eval "$ckpt" --synthetic 600 --beam 1)
"$bin" "${g[@]}" "${ev[@]}" > "$work/eval1.json"
"$bin" launch --nproc 2 -- "${g[@]}" "${ev[@]}" > "$work/eval2.json"
runs=("$work/eval2.json")
if command -v torchrun > /dev/null; then
  # --redirects/--tee: Debian's torchrun 1.13 under Python 3.11 fails without a per-rank mapping
  # (AttributeError: 'NoneType' object has no attribute 'get'; fixed in PyTorch 2.0).
  torchrun --nproc_per_node 2 --redirects 1:1 --tee 1:1 --log_dir "$work/torchrun_logs" --master_port "$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')" \
    --no_python "$bin" "${g[@]}" "${ev[@]}" > "$work/eval_torchrun.json" 2> "$work/torchrun.log"
  runs+=("$work/eval_torchrun.json")
fi
for r in "${runs[@]}"; do
  python3 - "$work/eval1.json" "$r" <<'EOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
def flat(x, key=()):
    if isinstance(x, dict):
        for k, v in x.items(): yield from flat(v, key + (k,))
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield key, x
fa, fb = dict(flat(a)), dict(flat(b))
keys = [k for k in fa if not any("second" in str(p) or "per_s" in str(p) or "time" in str(p) for p in k)]
assert keys, "no metrics"
for k in keys:
    assert k in fb, f"missing {k}"
    assert abs(fa[k] - fb[k]) <= 1e-6 * max(1.0, abs(fa[k])), f"{k}: {fa[k]} vs {fb[k]}"
print(f"eval {sys.argv[2].split('/')[-1]}: {len(keys)} numbers equal to the single process's")
EOF
done

# A rank killed with SIGKILL: the other notices by itself (no launcher here).
long=(train --family encoder_decoder --max-steps 2000 --eval-every 10)
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
RANK=0 "$bin" "${g[@]}" "${long[@]}" --out "$work/cut" > /dev/null 2> "$work/rank0.log" &
r0=$!
RANK=1 "$bin" "${g[@]}" "${long[@]}" --out "$work/cut" > /dev/null 2> "$work/rank1.log" &
r1=$!
unset WORLD_SIZE MASTER_ADDR MASTER_PORT
for _ in $(seq 1 1200); do
  [ -f "$work/cut/last/trainer_state.json" ] && break
  sleep 0.1
done
[ -f "$work/cut/last/trainer_state.json" ] || { echo "no resume point"; cat "$work/rank0.log"; exit 1; }
# The socket check of section 6 sees listeners: here rank 0 serves the TCP store at MASTER_PORT.
python3 -c "import sys; sys.path.insert(0, '$work'); from listeners import listening; \
assert any(s[2] == $port for s in listening([$r0])), listening([$r0])"
kill -9 "$r1"
t0=$(date +%s)
rc=0
wait "$r0" || rc=$?
t1=$(date +%s)
wait "$r1" 2> /dev/null || true
echo "rank 1 killed: rank 0 exited with status $rc after $((t1 - t0)) s: $(grep -m1 'error' "$work/rank0.log" || true)"
[ "$rc" -ne 0 ] || { echo "rank 0 did not fail"; exit 1; }
[ $((t1 - t0)) -le 60 ] || { echo "rank 0 took more than 60 s"; exit 1; }
"$bin" launch --nproc 2 -- "${g[@]}" train --family encoder_decoder --max-steps 40 --eval-every 10 \
  --out "$work/cut" --resume > "$work/resumed.json"
grep -q '"steps": 40' "$work/resumed.json" || { echo "resume did not complete"; cat "$work/resumed.json"; exit 1; }
# Resuming with another number of processes is refused, naming both numbers.
if "$bin" "${g[@]}" train --family encoder_decoder --max-steps 50 --out "$work/cut" --resume 2> "$work/one_resume.log"; then
  echo "a 2-process run resumed in 1 process"; exit 1
fi
grep -q "trained with 2 process(es); resume it with the same number (this is 1)" "$work/one_resume.log" ||
  { cat "$work/one_resume.log"; exit 1; }

# A whole job whose steps read what the previous ones wrote (train -> best/ -> score -> prune ->
# fine-tune -> save -> reload), as 2 processes: only rank 0 writes, the other reads after each write.
"$bin" launch --nproc 2 -- "${g[@]}" demo --family encoder_classifier --out "$work/demo2" > "$work/demo2.txt"
grep -q "fine-tuned" "$work/demo2.txt" || { echo "the 2-process demo did not finish"; cat "$work/demo2.txt"; exit 1; }
[ -f "$work/demo2/encoder_classifier/pruned/model/model.safetensors" ] || { echo "no pruned model"; exit 1; }
echo "demo as 2 processes: $(grep -c . "$work/demo2.txt") result lines from rank 0 only"
# A launched run's sockets (listeners.py, above), sampled from the children's start until two seconds
# into training. LibTorch 1.13's TCP store, which launch's children used, listened on 0.0.0.0; the
# Gloo connections listen only while they are being made.
"$bin" launch --nproc 2 -- "${g[@]}" train --family encoder_decoder --max-steps 100000 --eval-every 100000 \
  --out "$work/listen" > /dev/null 2> "$work/listen.log" &
launcher=$!
trap 'kill -TERM "$launcher" 2> /dev/null || true' EXIT  # never left training when a check fails
python3 - "$launcher" "$work/listen/train_config.json" "$work/listen.store" <<'EOF'
import os, stat, sys, time
sys.path.insert(0, os.environ["HP_E2E_WORK"])
from listeners import children, listening, loopback
launcher, started, note = int(sys.argv[1]), sys.argv[2], sys.argv[3]
seen, kids, until = set(), [], time.time() + 120
while time.time() < until:
    kids = children(launcher) or kids
    seen |= set(listening(kids))
    if os.path.exists(started) and len(kids) == 2:
        until = min(until, time.time() + 2)
    time.sleep(0.02)
assert len(kids) == 2 and os.path.exists(started), "the launched run did not start"
wide = [s for s in seen if not loopback(s)]
assert not wide, f"listening beyond 127.0.0.1 (family, address, port, pid): {wide}"
env = [dict(v.split("=", 1) for v in open(f"/proc/{k}/environ").read().split("\0") if "=" in v) for k in kids]
store = [e.get("HP_DIST_STORE_FILE") for e in env]
assert store[0] and store[0] == store[1], f"no common HP_DIST_STORE_FILE: {store}"
home = os.path.dirname(store[0])
st = os.stat(home)
assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid(), f"{home}: mode {oct(st.st_mode)}"
open(note, "w").write(home)
print(f"launch: {len(seen)} listening sockets seen of its 2 processes, none beyond 127.0.0.1; rendezvous in {home} (0700)")
EOF
kill -TERM "$launcher"
wait "$launcher" 2> /dev/null || true
trap - EXIT
store_dir=$(cat "$work/listen.store")
[ ! -e "$store_dir" ] || { echo "$store_dir was left behind"; exit 1; }

# 7. A pipeline of layers (issue 51): 2 processes holding one layer each of the 2-layer LLaMA-style
#    fixture give the gate gradients of 1 process (query heads and key/value groups), as does 1 process
#    recomputing layer by layer.
fixture="$(cd "$(dirname "$0")/../fixtures/hf/llama_gqa" && pwd)"
imp=(importance "$fixture" --method gradient --unit head --unit kv_group --calibration random
     --calibration-length 16 --calibration-samples 6 --json)
"$bin" "${g[@]}" "${imp[@]}" > "$work/pipe_one.json"
"$bin" "${g[@]}" "${imp[@]}" --layerwise > "$work/pipe_layerwise.json"
"$bin" launch --nproc 2 -- "${g[@]}" "${imp[@]}" --pipeline > "$work/pipe_two.json"
python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
def maps(name):
    j = json.load(open(f"{w}/{name}.json"))
    return {(m["method"], m.get("unit", "head")): {(h["attn_type"], h["layer"], h["head"]): h["score"] for h in m["heads"]}
            for m in j["maps"]}
one = maps("pipe_one")
for other in ("pipe_layerwise", "pipe_two"):
    o = maps(other)
    assert o.keys() == one.keys(), (other, o.keys())
    for k in one:
        worst = max(abs(one[k][h] - o[k][h]) / max(abs(one[k][h]), 1e-12) for h in one[k])
        assert worst <= 1e-5, f"{other} {k}: {worst:.1e} relative"
        print(f"pipeline: {other} {k[1]}: {len(one[k])} scores within {worst:.1e} relative of 1 process")
EOF

echo "distributed OK"
