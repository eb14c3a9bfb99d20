#!/usr/bin/env python3
"""`make bench-peers-rounds`: the MLP step and MatMul workloads of `make bench-peers`, run in
several alternating rounds, so that the ratios do not hang on one moment of a shared VM.

On this project's 2-vCPU VMs one `make bench-peers` run can land in a slow spell: in
single processes sampled every 0.5 s, Oxiflow's float64 MLP step moved between ~590 and
~370 steps/s for seconds at a time and JAX's between ~500 and ~360, and a profile of the
slow spells showed the same kernels taking longer (docs/performance/peers.md). A ratio of
two figures taken minutes apart then says more about the machine than about the engines.
Here each round runs every side once, back to back (peers first in odd rounds, Oxiflow
first in even ones), and the table gives each round's ratio and their median.

    python3 bench/peers/rounds.py --peers-python .deps/peers/bin/python \\
        --julia "OXIFLOW_LIB=$PWD/target/release/liboxiflow.so julia --project=julia/Oxiflow" \\
        [--rounds 5] [--workloads mlp,matmul] [--out out/bench-peers-rounds]

Per round: `peers.py tf1 torch jax` with PEERS_WORKLOADS=mlp, `peers.py numpy` with
PEERS_WORKLOADS=matmul, and `oxiflow.jl` with both groups (each as in `make bench-peers`:
same definitions, warm-ups and per-block medians). Writes OUT.jsonl (every record, with
its round) and OUT.md (the table); prints the table. The reference of a ratio is the best
of TF1, PyTorch and JAX for `mlp_step` (the goal: Oxiflow >= 1.2x it) and NumPy for
`matmul_N` (the goal: >= 95 % of it); `matmul_fed_N` has no peer here.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MLP_PEERS = ("tf1", "torch", "jax")


def run_lines(name, cmd, env_extra, rnd, log):
    """Runs `cmd` (a shell string) with `env_extra` added; returns its JSON lines tagged with
    round `rnd`. Its stderr goes to `log`; `name` labels the progress line. A failing
    command ends the script."""
    env = dict(os.environ)
    env.update(env_extra)
    t0 = time.time()
    r = subprocess.run(cmd, shell=True, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    print(f"  round {rnd}: {name} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    if r.returncode != 0:
        sys.exit(f"rounds.py: `{cmd}` exited with {r.returncode} (its stderr: {log.name})")
    recs = []
    for line in r.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            rec = json.loads(line)
            rec["round"] = rnd
            recs.append(rec)
    return recs


def reference(workload):
    """The frameworks a workload's ratio is taken against (best of them), or () for none."""
    if workload == "mlp_step":
        return MLP_PEERS
    if workload.startswith("matmul_") and not workload.startswith("matmul_fed_"):
        return ("numpy",)
    return ()


def fmt(v):
    return "—" if v is None else (f"{v:.3g}" if v < 100 else f"{v:.0f}")


def table(recs, rounds):
    """The markdown table: one row per (workload, dtype) and round, then the medians."""
    vals = {}
    for r in recs:
        if "workload" in r and r.get("value") is not None:
            vals[(r["workload"], r["dtype"], r["framework"], r["round"])] = r["value"]
    keys = sorted({(w, d) for (w, d, _, _) in vals}, key=lambda k: (not k[0].startswith("mlp"), len(k[0]), k))
    fws = ["oxiflow", "tf1", "torch", "jax", "numpy"]
    out = ["| workload | dtype | round | " + " | ".join(fws) + " | Oxiflow / reference |",
           "|---|---|---|" + "---:|" * (len(fws) + 1)]
    summary = []
    for w, d in keys:
        ref = reference(w)
        ratios = []
        for rnd in range(1, rounds + 1):
            row = [vals.get((w, d, f, rnd)) for f in fws]
            refs = [vals[(w, d, f, rnd)] for f in ref if (w, d, f, rnd) in vals]
            ox = vals.get((w, d, "oxiflow", rnd))
            ratio = ox / max(refs) if ox is not None and refs else None
            if ratio is not None:
                ratios.append(ratio)
            out.append(f"| {w} | {d} | {rnd} | " + " | ".join(fmt(v) for v in row) + f" | {fmt(ratio)} |")
        meds = []
        for f in fws:
            xs = [vals[(w, d, f, rnd)] for rnd in range(1, rounds + 1) if (w, d, f, rnd) in vals]
            meds.append(statistics.median(xs) if xs else None)
        med_ratio = statistics.median(ratios) if ratios else None
        out.append(f"| **{w}** | **{d}** | **median** | " + " | ".join(fmt(v) for v in meds) + f" | **{fmt(med_ratio)}** |")
        if ratios:
            summary.append(f"- {w} {d}: Oxiflow / {'best of ' + ', '.join(ref) if len(ref) > 1 else ref[0]} "
                           f"median {med_ratio:.3f}, rounds {min(ratios):.3f} to {max(ratios):.3f}")
    return "\n".join(out + [""] + summary) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workloads", default="mlp,matmul", help="comma list of mlp, matmul")
    ap.add_argument("--peers-python", default=sys.executable)
    ap.add_argument("--julia", required=True, help="the command that runs Julia with Oxiflow, e.g. Makefile's JULIA_RUN")
    ap.add_argument("--out", default="out/bench-peers-rounds")
    a = ap.parse_args(argv[1:])
    groups = [g.strip() for g in a.workloads.split(",") if g.strip()]
    if not groups or any(g not in ("mlp", "matmul") for g in groups) or a.rounds < 1:
        ap.error("--workloads takes mlp and/or matmul; --rounds at least 1")
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    peers = os.path.join(HERE, "peers.py")
    oxiflow = os.path.join(HERE, "oxiflow.jl")
    recs = []
    with open(a.out + ".log", "w") as log:
        for rnd in range(1, a.rounds + 1):
            recs.append({"meta": "loadavg", "at": "start", "round": rnd, "value": os.getloadavg()[0]})
            sides = []
            if "mlp" in groups:
                sides.append(("peers mlp", f"{shlex.quote(a.peers_python)} {peers} {' '.join(MLP_PEERS)}", {"PEERS_WORKLOADS": "mlp"}))
            if "matmul" in groups:
                sides.append(("numpy matmul", f"{shlex.quote(a.peers_python)} {peers} numpy", {"PEERS_WORKLOADS": "matmul"}))
            ox = ("oxiflow", f"{a.julia} --startup-file=no {oxiflow}", {"PEERS_WORKLOADS": ",".join(groups)})
            sides = sides + [ox] if rnd % 2 else [ox] + sides
            for name, cmd, env in sides:
                recs.extend(run_lines(name, cmd, env, rnd, log))
            recs.append({"meta": "loadavg", "at": "end", "round": rnd, "value": os.getloadavg()[0]})
    with open(a.out + ".jsonl", "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    loads = [r["value"] for r in recs if r.get("meta") == "loadavg"]
    text = (f"# bench-peers-rounds: {a.rounds} rounds of {', '.join(groups)}\n\n"
            f"1-minute load at the rounds' starts and ends: {min(loads):.2f} to {max(loads):.2f}\n\n"
            + table(recs, a.rounds))
    with open(a.out + ".md", "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
