#!/usr/bin/env python3
"""The ratio table of `make bench-peers`, from the JSON lines of peers.py and oxiflow.jl.

    python3 bench/peers/table.py [--outdir out] FILE.jsonl...

Plain python3 (no NumPy). Reads every JSON line of the files (other lines are skipped),
prints a Markdown report and writes it to OUTDIR/bench-peers.md, the records it read to
OUTDIR/bench-peers.jsonl. One row per workload and dtype: each framework's figure, the best
peer's, and the ratio Oxiflow / best peer, turned so that it always reads "Oxiflow is x
times as fast as the best peer" (above 1: Oxiflow ahead): figure / best for rates
(steps/s, GFLOP/s, Gelem/s, GB/s), best / figure for times (us/op, us/iter, ms, s). "—": the
framework does not run that workload; "not installed", "failed": as the records say. Under
the table: the machine (lscpu's model name, nproc), the date, the frameworks' versions and
the figures outside the columns (TF1 with Grappler off, notes such as JAX's compile time).
"""
import datetime
import json
import os
import re
import subprocess
import sys

COLUMNS = [("oxiflow", "Oxiflow"), ("tf1", "TF1"), ("torch", "PyTorch"), ("jax", "JAX"), ("numpy", "NumPy")]
PEERS = [c for c, _ in COLUMNS[1:]]
TIME_UNITS = {"us/op", "us/iter", "ms", "s"}
ORDER = ["mlp_step", "matmul", "matmul_fed", "unary", "feed_fetch", "chain10k", "chain10k_grad", "while10k", "digits_epoch"]
UNARY = ["tanh", "exp", "log", "sigmoid", "sqrt", "relu", "sin", "cos"]


def runs(framework, workload):
    """Whether the bench measures `workload` in `framework` (for "not installed" cells)."""
    base = split(workload)[0]
    if framework == "oxiflow":
        return base != "digits_epoch"
    if framework == "tf1":
        return base != "digits_epoch" and not base.startswith("op_")
    if framework == "numpy":
        return base in ("matmul", "unary") or base.startswith("op_")
    if framework == "jax":
        return base in ("mlp_step", "matmul", "unary", "chain10k", "chain10k_grad", "while10k") or base.startswith("grad_")
    return base in ("mlp_step", "matmul", "unary", "chain10k", "chain10k_grad") or base.startswith("grad_")   # torch


def split(workload):
    """(family, size, unary op) of a workload name such as matmul_fed_1024 or unary_exp."""
    m = re.fullmatch(r"(matmul(?:_fed)?)_(\d+)", workload)
    if m:
        return m.group(1), int(m.group(2)), ""
    if workload.startswith("unary_"):
        return "unary", 0, workload[len("unary_"):]
    return workload, 0, ""


def sort_key(row):
    workload, dtype = row
    base, n, op = split(workload)
    return (ORDER.index(base) if base in ORDER else len(ORDER), workload if base not in ORDER else "",
            n, UNARY.index(op) if op in UNARY else 0, dtype)


def fmt(x):
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def machine():
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        model = m.group(1).strip() if m else ""
    except OSError:
        pass
    if not model:
        try:
            with open("/proc/cpuinfo") as f:
                m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
                model = m.group(1).strip() if m else "unknown CPU"
        except OSError:
            model = "unknown CPU"
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        flags = ", AVX-512" if " avx512f" in text else ", AVX2" if " avx2" in text else ""
    except OSError:
        pass
    return f"{model}{flags}, nproc {os.cpu_count()}"


def read_records(paths):
    recs = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return recs


def report(recs):
    figures = {}      # (workload, dtype) -> framework -> record
    status = {}       # framework -> "not installed" / "failed"
    cell_status = {}  # (workload, dtype, framework) -> "skipped" / "failed"
    load = {}         # side -> {"start": x, "end": y}
    versions = {}
    for r in recs:
        if "meta" in r:
            if r["meta"] == "loadavg":
                load.setdefault(r.get("side"), {})[r.get("at")] = r.get("value")
            continue
        fw = r.get("framework")
        if "status" in r:
            if r.get("workload"):
                cell_status[(r["workload"], r.get("dtype"), fw)] = r["status"]
                figures.setdefault((r["workload"], r.get("dtype")), {})
            else:
                status[fw] = r["status"]
            continue
        if r.get("version"):
            versions[fw] = r["version"]
        if r.get("value") is not None:
            figures.setdefault((r["workload"], r["dtype"]), {})[fw] = r
    lines = ["# Oxiflow and its peers (`make bench-peers`)", ""]
    lines.append(f"Machine: {machine()}. Date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC.")
    lines.append("")
    names = dict(COLUMNS)
    lines.append("| workload | dtype | unit | " + " | ".join(n for _, n in COLUMNS) + " | best peer | Oxiflow/best |")
    lines.append("|---|---|---|" + "---:|" * len(COLUMNS) + "---|---:|")
    for key in sorted(figures, key=sort_key):
        row = figures[key]
        unit = next(iter(row.values()))["unit"] if row else ""
        lower_better = unit in TIME_UNITS
        cells = []
        for fw, _ in COLUMNS:
            if fw in row:
                cells.append(fmt(row[fw]["value"]))
            elif (key[0], key[1], fw) in cell_status:
                cells.append(cell_status[(key[0], key[1], fw)])
            elif fw in status and runs(fw, key[0]):
                cells.append(status[fw])
            else:
                cells.append("—")
        peers = [(row[p]["value"], p) for p in PEERS if p in row]
        best, ratio = "—", "—"
        if peers:
            bv, bp = min(peers) if lower_better else max(peers)
            best = names[bp]
            if "oxiflow" in row and bv > 0 and row["oxiflow"]["value"] > 0:
                ox = row["oxiflow"]["value"]
                ratio = fmt(bv / ox if lower_better else ox / bv)
        lines.append(f"| {key[0]} | {key[1]} | {unit} | " + " | ".join(cells) + f" | {best} | {ratio} |")
    lines.append("")
    lines.append("Oxiflow/best: how many times as fast as the best peer Oxiflow is (above 1: Oxiflow ahead); "
                 "for rates figure / best, for times (us/op, us/iter, ms, s) best / figure.")
    lines.append("")
    vers = [f"{names.get(fw, fw)} {versions[fw]}" for fw, _ in COLUMNS if fw in versions]
    lines.append("Versions: " + (", ".join(vers) if vers else "none recorded") + ".")
    missing = [f"{names.get(fw, fw)} ({st})" for fw, st in sorted(status.items())]
    if missing:
        lines.append("")
        lines.append("Not measured: " + ", ".join(missing) + ".")
    if load:
        sides = []
        for side, label in (("peers", "peers"), ("oxiflow", "Oxiflow")):
            if side in load:
                v = load[side]
                sides.append(f"{label} {v.get('start', 0):.2f} at the start, {v.get('end', 0):.2f} at the end")
        lines.append("")
        lines.append("Load average (1 min): " + "; ".join(sides) + ". The bench itself keeps up to 2 cores busy; "
                     "a start figure well above 0 means other processes shared the CPUs and skewed the figures.")
    extra = [r for r in recs if "status" not in r and "meta" not in r and r.get("framework") not in names
             and r.get("value") is not None]
    notes = [r for r in recs if "meta" not in r and r.get("note")]
    if extra or notes:
        lines.append("")
        lines.append("Other figures:")
        lines.append("")
        for r in extra:
            label = "TF1 with Grappler off" if r["framework"] == "tf1-nograppler" else r["framework"]
            lines.append(f"- {label}: {r['workload']} {r['dtype']} {fmt(r['value'])} {r['unit']}")
        for r in notes:
            lines.append(f"- {names.get(r['framework'], r['framework'])} {r['workload']} {r['dtype']}: {r['note']}")
    return "\n".join(lines) + "\n"


def main(argv):
    outdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "out")
    paths = []
    args = iter(argv[1:])
    for a in args:
        if a == "--outdir":
            outdir = next(args)
        else:
            paths.append(a)
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    recs = read_records(paths)
    text = report(recs)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "bench-peers.md"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "bench-peers.jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
