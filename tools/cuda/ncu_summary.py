#!/usr/bin/env python3
"""Folds an ncu --csv report (metrics gpu__time_duration.sum and dram__bytes_read.sum, as
tools/cuda/moe_profile_on_device.sh writes it) into one line per kernel and launch shape over
the last N launches (a decode step's worth, or a few): launches, time per launch, DRAM bytes per
launch, the bandwidth that is, and the share of the time.

    python3 tools/cuda/ncu_summary.py ncu_qwen3-30b-a3b.csv [last_launches=600]
"""
import collections
import csv
import sys


def main() -> None:
    path = sys.argv[1]
    last = int(sys.argv[2]) if len(sys.argv) > 2 else 600
    with open(path) as f:
        rows = list(csv.DictReader(line for line in f if line.startswith('"')))
    launches = collections.OrderedDict()
    for r in rows:
        key = (r["ID"], r["Kernel Name"][:100], r["Grid Size"], r["Block Size"])
        launches.setdefault(key, {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    items = list(launches.items())[-last:]
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for (_, name, grid, block), m in items:
        a = agg[(name, grid, block)]
        a[0] += 1
        a[1] += m.get("gpu__time_duration.sum", 0.0)
        a[2] += m.get("dram__bytes_read.sum", 0.0)
    total = sum(a[1] for a in agg.values()) or 1.0
    print(f"{len(items)} launches, {total / 1e3:.1f} us")
    print(f"{'n':>5} {'us/launch':>9} {'MB/launch':>9} {'GB/s':>7} {'share':>6}  kernel, grid, block")
    for (name, grid, block), (n, t, b) in sorted(agg.items(), key=lambda x: -x[1][1]):
        bw = b / t if t else 0.0
        print(f"{n:5d} {t / n / 1e3:9.2f} {b / n / 1e6:9.2f} {bw:7.1f} {100 * t / total:5.1f}%  "
              f"{name[:70]} {grid} {block}")


if __name__ == "__main__":
    main()
