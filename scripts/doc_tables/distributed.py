"""bench/results/distributed.json (bench/distributed.sh): processes against threads.

docs/distributed.md: distributed.
"""
from .core import fmt, load, table, thousands


DISTRIBUTED = "bench/results/distributed.json"
WORKLOADS = {"sst2": "SST-2 model (configs/sst2.json: 4 layers, d 256, bf16 autocast)",
             "synthetic_mt": "synthetic translation (d 64, 2+2 layers)"}


@table("distributed", DISTRIBUTED)
def distributed():
    """Training throughput of processes against threads (bench/distributed.sh); the machine in the file."""
    t = load(DISTRIBUTED)
    lines = ["| Workload | Processes × threads | Tokens/s | ms/step | vs 1 × 1 | Final training loss |",
             "|---|---|---:|---:|---:|---:|"]
    for r in t["rows"]:
        lines.append("| %s | %d × %d | %s | %s | ×%s | %s |" % (
            WORKLOADS.get(r["workload"], r["workload"]), r["processes"], r["threads_per_process"],
            thousands(r["tokens_per_s"], 0), fmt(r["step_ms"], 1), fmt(r["vs_1x1"], 2), fmt(r["last_train_loss"])))
    return lines
