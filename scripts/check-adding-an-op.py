#!/usr/bin/env python3
"""Follows docs/adding-an-op.md's running example in a scratch copy of the repository and
checks that the op then works end to end.

The doc marks each step of its example with an HTML comment right before a fenced code
block (invisible when the Markdown is rendered):

    <!-- example: insert into PATH after the line containing `TEXT` -->
    <!-- example: insert into PATH before the line containing `TEXT` -->
    <!-- example: append to PATH -->
    <!-- example: julia test -->

`TEXT` must match exactly one line of `PATH`. The block's lines are inserted there (or at
the end of `PATH`), and nothing else is changed: the steps the doc lists are the only
edits. The block marked `julia test` is also run on its own. Then, in the copy:

1. the C library builds (`cargo build --release -p oxiflow-capi`);
2. the example's Rust tests pass (`cargo test` of the test files the doc added to, filtered
   by the op's snake-case name);
3. the kernel compile check passes with the new `.cu` entries (every entry the registry
   asks for exists and takes the arguments of the op's launch family;
   needs NVRTC, as `make test`);
4. the doc's Julia test block runs, through the new library, on the CPU and on an
   emulated GPU.

Usage: scripts/check-adding-an-op.py [--keep] (run from anywhere; `make test-adding-an-op`).
The copy's target directory starts as a copy of this checkout's `target/release` (its
dependencies' builds) when there is one, so only the workspace's crates are rebuilt, without
optimization (QUICK_PROFILE). Exit status 0 when every check passes.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "adding-an-op.md")
MARKER = re.compile(r"<!-- example: (?:insert into (\S+) (after|before) the line containing `(.+?)`|append to (\S+)|(julia test)) -->")


def steps(doc):
    """The doc's insertions, `(path, where, anchor, lines)` with `where` one of "after",
    "before", "end", and its Julia test block. Markers stand on the lines right before the
    fenced block they apply to (several may share one block)."""
    lines = doc.split("\n")
    out, julia, pending = [], None, []
    i = 0
    while i < len(lines):
        m = MARKER.search(lines[i])
        if m:
            pending.append(m)
        elif lines[i].startswith("```") and pending:
            k = i + 1
            while k < len(lines) and not lines[k].startswith("```"):
                k += 1
            if k >= len(lines):
                sys.exit(f"adding-an-op check: the code block on line {i + 1} of the doc is not closed")
            block = lines[i + 1:k]
            for m in pending:
                if m.group(5):
                    julia = "\n".join(block)
                elif m.group(4):
                    out.append((m.group(4), "end", None, block))
                else:
                    out.append((m.group(1), m.group(2), m.group(3), block))
            pending, i = [], k
        elif pending and lines[i].strip():
            sys.exit(f"adding-an-op check: line {i + 1} of the doc stands between an example marker and its code block")
        i += 1
    return out, julia


def apply(copy, path, where, anchor, block):
    full = os.path.join(copy, path)
    with open(full) as f:
        text = f.read()
    if where == "end":
        with open(full, "w") as f:
            f.write(text.rstrip("\n") + "\n" + "\n".join(block) + "\n")
        return
    text = text.split("\n")
    hits = [n for n, line in enumerate(text) if anchor in line]
    if len(hits) != 1:
        sys.exit(f"adding-an-op check: `{anchor}` is on {len(hits)} lines of {path}, not one: the doc's step no longer applies")
    at = hits[0] + (1 if where == "after" else 0)
    text[at:at] = block
    with open(full, "w") as f:
        f.write("\n".join(text))


# The workspace's crates are rebuilt in the copy (its path differs, so cargo cannot reuse
# them) with no optimization and no debug info: the check asks whether the doc's steps build
# and pass, not how fast, and this cuts the build from about 4 minutes to under 1 (2-core
# machine). The dependencies keep the release profile, so their builds seeded from
# target/release stay valid.
WORKSPACE = ("oxiflow-core", "oxiflow-cuda", "oxiflow-mpi", "oxiflow-capi")
QUICK_PROFILE = [a for p in WORKSPACE for kv in ("opt-level=0", "debug=0") for a in ("--config", f"profile.release.package.{p}.{kv}")]


def seed_target(src, dst):
    """Copies `src` (target/release) to `dst` without what the copy rebuilds anyway or never
    uses: the workspace's own artifacts, test and bench executables, examples."""
    def skip(dirpath, names):
        rel = os.path.relpath(dirpath, src)
        if rel == ".":
            return [n for n in names if n in ("examples", "incremental") or n.startswith("liboxiflow")]
        if rel == "deps":
            out = []
            for n in names:
                full = os.path.join(dirpath, n)
                executable = os.path.isfile(full) and os.access(full, os.X_OK) and "." not in n
                if executable or n.startswith(("oxiflow", "liboxiflow")):
                    out.append(n)
            return out
        return []
    shutil.copytree(src, dst, symlinks=True, ignore=skip)


def run(cmd, cwd, env=None, title=None):
    print(f"--- {title or ' '.join(cmd)}", flush=True)
    r = subprocess.run(cmd, cwd=cwd, env=env)
    if r.returncode != 0:
        sys.exit(f"adding-an-op check: FAILED at: {title or ' '.join(cmd)} (exit {r.returncode})")


def main():
    keep = "--keep" in sys.argv
    with open(DOC) as f:
        inserts, julia = steps(f.read())
    if not inserts or julia is None:
        sys.exit("adding-an-op check: the doc has no example steps or no Julia test block")
    op = re.search(r'r\.add\(unary\("(\w+)"', "\n".join(l for _, _, _, b in inserts for l in b))
    if op is None:
        sys.exit("adding-an-op check: no `r.add(unary(\"Op\", ...))` registration among the doc's steps")
    op = op.group(1)
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()
    work = tempfile.mkdtemp(prefix="oxiflow-adding-an-op-")
    copy = os.path.join(work, "repo")
    try:
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
        for rel in filter(None, files):
            src = os.path.join(ROOT, rel)
            if os.path.isfile(src):
                os.makedirs(os.path.dirname(os.path.join(copy, rel)), exist_ok=True)
                shutil.copy2(src, os.path.join(copy, rel))
        touched = []
        for path, where, anchor, block in inserts:
            apply(copy, path, where, anchor, block)
            if path not in touched:
                touched.append(path)
        print(f"adding-an-op check: {op} added by {len(inserts)} steps of the doc, in {len(touched)} files:")
        for p in touched:
            print(f"  {p}")
        target = os.path.join(work, "target")
        if os.path.isdir(os.path.join(ROOT, "target", "release")):
            print("--- seeding the copy's target directory from target/release (the dependencies' builds)", flush=True)
            seed_target(os.path.join(ROOT, "target", "release"), os.path.join(target, "release"))
        env = dict(os.environ, CARGO_TARGET_DIR=target)
        run(["cargo", "build", "--release", *QUICK_PROFILE, "-p", "oxiflow-capi"], copy, env, "1. the library builds with the new op")
        tests = sorted({os.path.splitext(os.path.basename(p))[0] for p in touched if "/tests/" in p and p.endswith(".rs")})
        cmd = ["cargo", "test", "--release", *QUICK_PROFILE, "-p", "oxiflow-core"] + [a for t in tests for a in ("--test", t)] + ["--", snake]
        run(cmd, copy, env, f"2. the example's Rust tests ({', '.join(tests)}; filter {snake})")
        nvrtc = os.path.join(ROOT, ".deps", "nvrtc", "nvidia", "cu13", "lib")
        env_cu = dict(env, LD_LIBRARY_PATH=nvrtc + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""))
        run(["cargo", "test", "--release", *QUICK_PROFILE, "-p", "oxiflow-cuda", "--test", "kernels_compile"], copy, env_cu,
            "3. the kernel compile check with the new entries")
        script = os.path.join(work, "example_test.jl")
        with open(script, "w") as f:
            f.write("using Oxiflow, Test\nuse_emulated_gpus(1)\n" + julia + "\n")
        jenv = dict(env, OXIFLOW_LIB=os.path.join(target, "release", "liboxiflow.so"))
        if os.path.isdir(os.path.join(ROOT, ".deps", "openblas")):
            jenv.setdefault("OXIFLOW_BLAS_LIB", os.path.join(ROOT, ".deps", "openblas", "scipy_openblas32", "lib", "libscipy_openblas.so"))
        run([os.environ.get("JULIA", "julia"), "--startup-file=no", f"--project={os.path.join(copy, 'julia', 'Oxiflow')}", script], copy, jenv,
            "4. the doc's Julia test through the new library")
        print(f"adding-an-op check: {op} works end to end after the doc's {len(inserts)} steps")
    finally:
        if keep:
            print(f"adding-an-op check: the copy is kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
