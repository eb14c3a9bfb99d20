//! The main job, `examples/digits_mlp.jl`, ported to Rust for machines without Julia (the
//! lent GPU machines have only this workspace's binaries and python3), so its figures can
//! be taken with the compute on a real GPU:0.
//!
//! It builds the same graph through oxiflow-core's Rust API, op for op as the Julia package
//! builds it through the C ABI (`julia/Oxiflow/src/layers.jl`, `optimizers.jl`, `ops.jl`):
//! an MLP 64-128-64-10 with batch normalization (TF 1.15's non-fused layer: `bn1`, `bn2`,
//! shared by the training tower and the two inference towers) and ReLU, mean softmax
//! cross-entropy, gradients with `colocate=true`, Adam(0.01) as TF's `AdamOptimizer`
//! (slots, `beta1_power`/`beta2_power`, `ApplyAdam`, the power updates, the `Adam` group),
//! bound to the batch-norm moving-statistics updates (`UPDATE_OPS`) by control dependencies.
//! Variables go to /cpu:0 and every other op to /gpu:0 through seed 000's device function.
//! The data split (seed 7, 80 % for training), standardisation, He-uniform weights (seed 1),
//! per-epoch shuffles, batch 64, 15 epochs and the traced last step are those of the Julia
//! program, with the same SplitMix64 streams: on an emulated GPU the losses, accuracies and
//! placement counts are those `make demo` prints in README.md (its placement counts were
//! taken with `OXIFLOW_FUSION=0`; with fusion, the default, four CPU steps are fused ones).
//!
//! Differences: it reads a plain CSV (not gzip); it writes no profile files unless
//! `--profile FILE` is given (the Chrome trace JSON only, no HTML); it adds the warm
//! steps/s and `--cpu`. On a real GPU the session has soft placement off (TF1's default,
//! as the Julia program's `Session()`), so an op without a GPU kernel fails instead of
//! quietly running on the CPU.
//!
//! ```text
//! gunzip -c data/digits.csv.gz > /tmp/digits.csv
//! cargo run --release -p oxiflow-cuda --example digits_gpu -- /tmp/digits.csv [--cpu] [--profile FILE]
//! ```
//!
//! Without a GPU it runs on one emulated GPU and says so; `--cpu` runs the same graph with
//! no GPU at all (soft placement on). Exits non-zero if the held-out accuracy is below 95 %.

use oxiflow_core::autodiff::gradients;
use oxiflow_core::graph::{keys, DeviceScope, NodeDef};
use oxiflow_core::ops::reduce::reduce;
use oxiflow_core::ops::AttrValue;
use oxiflow_core::{DType, Graph, Layout, NodeId, NodeSpec, Output, Session, SessionOptions, Tensor};
use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::sync::{Arc, RwLock};
use std::time::Instant;

type R<T> = oxiflow_core::Result<T>;
const F64: DType = DType::Float64;
const EPOCHS: usize = 15;
const BATCH: usize = 64;
const LR: f64 = 0.01;
const SEED: u64 = 1;
/// Batch normalization's defaults (TF 1.15).
const MOMENTUM: f64 = 0.99;
const BN_EPSILON: f64 = 1e-3;

// ------------------------------------------------------------------ data

/// SplitMix64, as digits_mlp.jl's `SplitMix` (split, shuffles, weights).
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    fn rand01(&mut self) -> f64 {
        (self.next() >> 11) as f64 * 2f64.powi(-53)
    }
    /// Julia's `shuffle_perm`, 0-based: the same swaps in the same order.
    fn shuffle_perm(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (2..=n).rev() {
            let j = (self.next() % i as u64) as usize;
            p.swap(i - 1, j);
        }
        p
    }
}

/// `parse_digits`: rows of 64 pixels (0..16) and a label (0..9); blank lines skipped; rows
/// counted 1-based in the file. Returns the pixels row-major and the labels.
fn parse_digits(text: &str, source: &str) -> Result<(Vec<f64>, Vec<usize>), String> {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (k, line) in text.lines().enumerate() {
        let err = |msg: String| format!("{source}, row {}: {msg}", k + 1);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 65 {
            return Err(err(format!("expected 65 comma-separated values (64 pixels and a label), got {}", f.len())));
        }
        let mut v = [0i64; 65];
        for (j, s) in f.iter().enumerate() {
            v[j] = s.trim().parse().map_err(|_| err(format!("value {} ({:?}) is not an integer", j + 1, s.trim())))?;
        }
        if let Some(j) = (0..64).find(|&j| !(0..=16).contains(&v[j])) {
            return Err(err(format!("pixel {} is {}, outside 0..16", j + 1, v[j])));
        }
        if !(0..=9).contains(&v[64]) {
            return Err(err(format!("label {} is outside 0..9", v[64])));
        }
        x.extend(v[..64].iter().map(|&p| p as f64));
        y.push(v[64] as usize);
    }
    if y.is_empty() {
        return Err(format!("{source}, row 0: no data rows"));
    }
    Ok((x, y))
}

/// `split_standardize(X, y; seed=7, train_fraction=0.8)`: rows (row-major, 64 wide).
struct Split {
    xtr: Vec<f64>,
    ytr: Vec<usize>,
    xte: Vec<f64>,
    yte: Vec<usize>,
}
fn split_standardize(x: &[f64], y: &[usize], seed: u64, train_fraction: f64) -> Split {
    let n = y.len();
    let p = SplitMix(seed).shuffle_perm(n);
    let ntr = (train_fraction * n as f64).round_ties_even() as usize;
    let (tr, te) = p.split_at(ntr);
    let mut mu = [0.0; 64];
    let mut sd = [0.0; 64];
    for j in 0..64 {
        mu[j] = tr.iter().map(|&i| x[i * 64 + j]).sum::<f64>() / ntr as f64;
        let ss: f64 = tr.iter().map(|&i| (x[i * 64 + j] - mu[j]).powi(2)).sum();
        sd[j] = (ss / (ntr as f64 - 1.0)).sqrt(); // Statistics.std: corrected
        if sd[j] == 0.0 {
            sd[j] = 1.0;
        }
    }
    let z = |rows: &[usize]| rows.iter().flat_map(|&i| (0..64).map(move |j| (x[i * 64 + j] - mu[j]) / sd[j])).collect::<Vec<f64>>();
    Split { xtr: z(tr), ytr: tr.iter().map(|&i| y[i]).collect(), xte: z(te), yte: te.iter().map(|&i| y[i]).collect() }
}

/// Share of rows whose first largest logit is the label (Julia's `argmax`).
fn accuracy(logits: &[f64], y: &[usize]) -> f64 {
    let hits = y
        .iter()
        .enumerate()
        .filter(|&(i, &c)| {
            let row = &logits[i * 10..i * 10 + 10];
            (0..10).fold(0, |b, k| if row[k] > row[b] { k } else { b }) == c
        })
        .count();
    hits as f64 / y.len() as f64
}

// ------------------------------------------------------------------ graph helpers

fn out(n: NodeId) -> Output {
    Output::new(n, 0)
}
fn reshape(g: &mut Graph, x: Output, dims: &[usize]) -> R<Output> {
    g.op_spec(NodeSpec::new("Reshape", &[x]).attr("shape", AttrValue::Shape(dims.to_vec())))
}
/// `name_scope(f, name)`.
fn scoped<T>(g: &mut Graph, name: &str, f: impl FnOnce(&mut Graph) -> R<T>) -> R<T> {
    g.push_name_scope(name);
    let r = f(g);
    g.pop_name_scope();
    r
}
/// `colocate_with(f, node)`.
fn colocated<T>(g: &mut Graph, node: NodeId, f: impl FnOnce(&mut Graph) -> R<T>) -> R<T> {
    g.push_colocation(node, false)?;
    let r = f(g);
    g.pop_colocation();
    r
}
/// `control_dependencies(f, deps)`.
fn after<T>(g: &mut Graph, deps: &[NodeId], f: impl FnOnce(&mut Graph) -> R<T>) -> R<T> {
    g.push_control_dependencies(deps);
    let r = f(g);
    g.pop_control_dependencies();
    r
}

/// `get_variable(full; initializer)` with `AUTO_REUSE`: created once as `full` exactly.
fn get_variable(g: &mut Graph, store: &mut HashMap<String, NodeId>, full: String, value: Tensor, trainable: bool) -> R<NodeId> {
    if let Some(&v) = store.get(&full) {
        return Ok(v);
    }
    let v = g.variable(value, Some(&format!("{full}/")), trainable)?;
    store.insert(full, v);
    Ok(v)
}

/// layers.jl's `add_moving_average!`: `v -= (v - value) * (1 - momentum)` next to `v`, in
/// `UPDATE_OPS`.
fn moving_average(g: &mut Graph, v: NodeId, value: Output, opname: &str) -> R<()> {
    g.push_device(DeviceScope::Reset);
    let upd = colocated(g, v, |g| {
        scoped(g, opname, |g| {
            let d = g.op("Sub", &[out(v), value])?;
            let k = g.scalar(F64, 1.0 - MOMENTUM)?;
            let delta = g.op("Mul", &[d, k])?;
            let nv = g.op("Sub", &[out(v), delta])?;
            g.op("Assign", &[out(v), nv])
        })
    });
    g.pop_device()?;
    g.add_to_collection(keys::UPDATE_OPS, upd?);
    Ok(())
}

/// layers.jl's `batch_normalization(x; training, name)` for an `N×C` `x` (axis -1).
fn batch_norm(g: &mut Graph, store: &mut HashMap<String, NodeId>, x: Output, name: &str, training: bool) -> R<Output> {
    let c = g.shape_of(x)?.dims()[1];
    scoped(g, name, |g| {
        let gamma = get_variable(g, store, format!("{name}/gamma"), Tensor::full(&[c], 1.0f64), true)?;
        let beta = get_variable(g, store, format!("{name}/beta"), Tensor::full(&[c], 0.0f64), true)?;
        let mmean = get_variable(g, store, format!("{name}/moving_mean"), Tensor::full(&[c], 0.0f64), false)?;
        let mvar = get_variable(g, store, format!("{name}/moving_variance"), Tensor::full(&[c], 1.0f64), false)?;
        let (mean_u, var_u) = if training {
            let m_keep = scoped(g, "moments", |g| reduce(g, "Mean", x, &[0], true))?;
            let mean_b = reshape(g, m_keep, &[c])?;
            let sg = g.op("StopGradient", &[m_keep])?;
            let d = g.op("Sub", &[x, sg])?;
            let sq = g.op("Square", &[d])?;
            let v = reduce(g, "Mean", sq, &[0], true)?;
            let var_b = reshape(g, v, &[c])?;
            moving_average(g, mmean, mean_b, "AssignMovingAvg")?;
            moving_average(g, mvar, var_b, "AssignMovingAvg_1")?;
            (mean_b, var_b)
        } else {
            (out(mmean), out(mvar))
        };
        let inv = scoped(g, "batchnorm", |g| {
            let eps = g.scalar(F64, BN_EPSILON)?;
            let a = g.op("Add", &[var_u, eps])?;
            let s = g.op("Sqrt", &[a])?;
            let one = g.scalar(F64, 1.0)?;
            let r = g.op("RealDiv", &[one, s])?;
            g.op("Mul", &[r, out(gamma)])
        })?;
        let mi = g.op("Mul", &[mean_u, inv])?;
        let offset = g.op("Sub", &[out(beta), mi])?;
        let inv2 = reshape(g, inv, &[1, c])?;
        let xs = g.op("Mul", &[x, inv2])?;
        let off2 = reshape(g, offset, &[1, c])?;
        g.op("Add", &[xs, off2])
    })
}

/// `mlp_params(; seed)`: He-uniform `W1`, `W2`, `W3` (filled column-major, as Julia's
/// comprehension draws them) and zero `b3`.
fn mlp_params(g: &mut Graph, seed: u64) -> R<[NodeId; 4]> {
    let mut r = SplitMix(seed);
    let mut he = |g: &mut Graph, m: usize, n: usize, name: &str| {
        let v: Vec<f64> = (0..m * n).map(|_| (2.0 * r.rand01() - 1.0) * (6.0 / m as f64).sqrt()).collect();
        g.variable(Tensor::from_vec(&[m, n], v, Layout::ColumnMajor)?, Some(name), true)
    };
    let w1 = he(g, 64, 128, "W1")?;
    let w2 = he(g, 128, 64, "W2")?;
    let w3 = he(g, 64, 10, "W3")?;
    let b3 = g.variable(Tensor::full(&[10], 0.0f64), Some("b3"), true)?;
    Ok([w1, w2, w3, b3])
}

/// `mlp_logits(p, x; training)`: `relu(bn(x W1)) -> relu(bn(h W2)) -> h W3 + b3`.
fn mlp_logits(g: &mut Graph, store: &mut HashMap<String, NodeId>, p: &[NodeId; 4], x: Output, training: bool) -> R<Output> {
    let a = g.op("MatMul", &[x, out(p[0])])?;
    let a = batch_norm(g, store, a, "bn1", training)?;
    let h1 = g.op("Relu", &[a])?;
    let a = g.op("MatMul", &[h1, out(p[1])])?;
    let a = batch_norm(g, store, a, "bn2", training)?;
    let h2 = g.op("Relu", &[a])?;
    let l = g.op("MatMul", &[h2, out(p[2])])?;
    g.op("Add", &[l, out(p[3])])
}

/// layers.jl's dense `softmax_cross_entropy_with_logits`: TF's fused
/// `SoftmaxCrossEntropyWithLogits` (its output 0, the per-row loss), labels through
/// `StopGradient`.
fn softmax_xent(g: &mut Graph, logits: Output, labels: Output) -> R<Output> {
    scoped(g, "softmax_cross_entropy_with_logits", |g| {
        let lb = g.op("StopGradient", &[labels])?;
        g.op("SoftmaxCrossEntropyWithLogits", &[logits, lb])
    })
}

/// optimizers.jl's `AdamOptimizer(lr).apply_gradients(zip(grads, vars))`: returns the
/// `Adam` group (a `NoOp`).
fn adam(g: &mut Graph, lr: f64, gv: &[(Output, NodeId)]) -> R<NodeId> {
    let (b1, b2, eps) = (0.9, 0.999, 1e-8);
    let mut slots = Vec::new();
    for &(_, v) in gv {
        let name = format!("{}/Adam", g.node(v)?.name);
        let dims = g.shape_of(out(v))?.dims().to_vec();
        slots.push(colocated(g, v, |g| {
            Ok((g.variable(Tensor::full(&dims, 0.0f64), Some(&name), false)?, g.variable(Tensor::full(&dims, 0.0f64), Some(&name), false)?))
        })?);
    }
    let (p1, p2) = colocated(g, gv[0].1, |g| {
        Ok((g.variable(Tensor::scalar(b1), Some("beta1_power"), false)?, g.variable(Tensor::scalar(b2), Some("beta2_power"), false)?))
    })?;
    let scope = g.push_name_scope("Adam");
    let updates = (|| -> R<Vec<NodeId>> {
        let named = |g: &mut Graph, v: f64, name: &str| g.op_spec(NodeSpec::new("Const", &[]).attr("value", Tensor::scalar(v)).attr("dtype", F64).name(name));
        let h = [named(g, lr, "learning_rate")?, named(g, b1, "beta1")?, named(g, b2, "beta2")?, named(g, eps, "epsilon")?];
        let mut updates = Vec::new();
        for (&(grad, v), &(m, s)) in gv.iter().zip(&slots) {
            let vname = g.node(v)?.name.clone();
            let ins = [out(v), out(m), out(s), out(p1), out(p2), h[0], h[1], h[2], h[3], grad];
            updates.push(scoped(g, &format!("update_{vname}"), |g| colocated(g, v, |g| Ok(g.op("ApplyAdam", &ins)?.node)))?);
        }
        let fin = after(g, &updates.clone(), |g| {
            colocated(g, p1, |g| {
                let mut a = Vec::new();
                for (p, b) in [(p1, b1), (p2, b2)] {
                    let k = g.scalar(F64, b)?;
                    let mul = g.op("Mul", &[out(p), k])?;
                    a.push(g.op("Assign", &[out(p), mul])?.node);
                }
                Ok(a)
            })
        })?;
        updates.extend(fin);
        Ok(updates)
    })();
    g.pop_name_scope();
    let updates = updates?;
    after(g, &updates, |g| g.add_node(NodeSpec::new("NoOp", &[]).name(format!("{scope}/"))))
}

/// Seed 000's `assign_to_device`: variables on the parameter device, the rest on /gpu:0.
fn assign_to_device(node: &NodeDef) -> Result<String, String> {
    let ps = ["Variable", "VariableV2", "AutoReloadVariable"].contains(&node.op.as_str());
    Ok(if ps { "/device:CPU:0" } else { "/device:GPU:0" }.to_string())
}

struct Model {
    x: Output,
    labels: Output,
    loss: Output,
    train_logits: Output,
    test_logits: Output,
    train_op: NodeId,
    init: NodeId,
}

/// `train_digits`'s graph.
fn build(g: &mut Graph, d: &Split) -> R<Model> {
    let mut store = HashMap::new();
    g.push_device(DeviceScope::Function(Arc::new(assign_to_device)));
    let built = (|| -> R<(Output, Output, Output, Output, Output)> {
        let p = mlp_params(g, SEED)?;
        let x = g.placeholder(F64, &[BATCH, 64], Some("x"))?;
        let labels = g.placeholder(F64, &[BATCH, 10], Some("labels"))?;
        let logits = mlp_logits(g, &mut store, &p, x, true)?;
        let xent = softmax_xent(g, logits, labels)?;
        let loss = reduce(g, "Mean", xent, &[0], false)?;
        let mut towers = Vec::new();
        for (rows, name) in [(&d.xtr, "train_images"), (&d.xte, "test_images")] {
            let t = Tensor::from_vec(&[rows.len() / 64, 64], rows.clone(), Layout::RowMajor)?;
            let c = g.op_spec(NodeSpec::new("Const", &[]).attr("value", t).attr("dtype", F64).name(name))?;
            towers.push(mlp_logits(g, &mut store, &p, c, false)?);
        }
        Ok((x, labels, loss, towers[0], towers[1]))
    })();
    g.pop_device()?;
    let (x, labels, loss, train_logits, test_logits) = built?;
    let vars: Vec<Output> = g.collection(keys::TRAINABLE_VARIABLES).to_vec();
    let grads = gradients(g, &[loss], &vars, None, true)?;
    let update_ops: Vec<NodeId> = g.collection(keys::UPDATE_OPS).iter().map(|o| o.node).collect();
    let gv: Vec<(Output, NodeId)> = grads.iter().zip(&vars).filter_map(|(d, v)| d.map(|d| (d, v.node))).collect();
    let train_op = after(g, &update_ops, |g| adam(g, LR, &gv))?;
    let init = g.global_variables_initializer()?;
    Ok(Model { x, labels, loss, train_logits, test_logits, train_op, init })
}

// ------------------------------------------------------------------ main

fn progress_bar(k: usize, n: usize) -> String {
    let w = (20.0 * k as f64 / n as f64).round() as usize;
    format!("[{}{}] {k}/{n}", "#".repeat(w), "-".repeat(20 - w))
}

fn fail(msg: String) -> ! {
    eprintln!("digits_gpu: {msg}");
    std::process::exit(1)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cpu = args.iter().any(|a| a == "--cpu");
    let profile_path = args.iter().position(|a| a == "--profile").map(|i| args.get(i + 1).cloned().unwrap_or_else(|| fail("--profile needs a file".into())));
    let positional: Vec<&String> =
        args.iter().enumerate().filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--profile")).map(|(_, a)| a).collect();
    let [path] = positional[..] else { fail("usage: digits_gpu <digits.csv> [--cpu] [--profile FILE]".into()) };

    let reason = oxiflow_cuda::provider::register();
    let gpus = oxiflow_core::device::provider::gpu_provider().map(|p| p.gpus()).unwrap_or_default();
    let base = SessionOptions::from_process_defaults().unwrap_or_else(|e| fail(format!("session options: {e}")));
    let opts = if cpu {
        println!("--cpu: no GPU in the session; the /gpu:0 requests fall back to the CPU (soft placement on).");
        SessionOptions { emulated_gpus: Some(0), gpu_count: Some(0), allow_soft_placement: true, ..base }
    } else if let Some(g0) = gpus.first() {
        println!("Computing on {} (real GPU:0; soft placement off).", oxiflow_cuda::discovery::describe(0, g0));
        SessionOptions { emulated_gpus: Some(0), allow_soft_placement: false, ..base }
    } else {
        println!("No GPU present: computing on one emulated GPU (host memory, CPU kernels, GPU placement rules).");
        if let Some(r) = reason {
            println!("  (CUDA: {r})");
        }
        SessionOptions { emulated_gpus: Some(1), allow_soft_placement: false, ..base }
    };

    let source = std::path::Path::new(path.as_str()).file_name().map_or(path.clone(), |s| s.to_string_lossy().into_owned());
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| fail(format!("cannot read {path}: {e}")));
    let (x, y) = parse_digits(&text, &source).unwrap_or_else(|e| fail(e));
    let d = split_standardize(&x, &y, 7, 0.8);
    println!("digits: {} images ({} training, {} held out), 64 features, 10 classes", y.len(), d.ytr.len(), d.yte.len());
    let run_on = if cpu { " (requested; this run: all on the CPU)" } else { "" };
    println!("MLP 64-128-64-10, batch norm + ReLU, Adam({LR}), batch {BATCH}; variables on /cpu:0, compute on /gpu:0{run_on}");

    let t_all = Instant::now();
    let mut g = Graph::new();
    let m = build(&mut g, &d).unwrap_or_else(|e| fail(format!("building the graph: {e}")));
    let sess = Session::new(Arc::new(RwLock::new(g)), opts).unwrap_or_else(|e| fail(format!("session: {e}")));
    if !cpu {
        println!("session GPU:0: {}", sess.devices().devices[1].attributes().description);
    }
    sess.run(&[], &[], &[m.init], false).unwrap_or_else(|e| fail(format!("init: {e}")));

    let mut rng = SplitMix(SEED + 0x1234);
    let nb = d.ytr.len() / BATCH;
    let ytr = &d.ytr;
    let tty = std::io::stdout().is_terminal();
    let (mut warm_steps, mut warm_s) = (0usize, 0.0f64);
    let (mut stats, mut acc) = (None, 0.0);
    for epoch in 1..=EPOCHS {
        let t0 = Instant::now();
        let perm = rng.shuffle_perm(d.ytr.len());
        let mut ls = 0.0;
        for b in 0..nb {
            let idx = &perm[b * BATCH..(b + 1) * BATCH];
            let xb: Vec<f64> = idx.iter().flat_map(|&i| d.xtr[i * 64..i * 64 + 64].iter().copied()).collect();
            let yb: Vec<f64> = idx.iter().flat_map(|&i| (0..10).map(move |c| if ytr[i] == c { 1.0 } else { 0.0 })).collect();
            let feeds = [
                (m.x, Tensor::from_vec(&[BATCH, 64], xb, Layout::RowMajor).unwrap()),
                (m.labels, Tensor::from_vec(&[BATCH, 10], yb, Layout::RowMajor).unwrap()),
            ];
            let trace = epoch == EPOCHS && b == nb - 1;
            let s = Instant::now();
            let r = sess.run(&feeds, &[m.loss], &[m.train_op], trace).unwrap_or_else(|e| fail(format!("training step: {e}")));
            if epoch > 1 && !trace {
                warm_s += s.elapsed().as_secs_f64();
                warm_steps += 1;
            }
            ls += r.values[0].to_f64_vec()[0];
            stats = stats.or(r.step_stats);
            if tty {
                print!("\r  epoch {epoch:2} {}", progress_bar(b + 1, nb));
                std::io::stdout().flush().ok();
            }
        }
        let r = sess.run(&[], &[m.train_logits, m.test_logits], &[], false).unwrap_or_else(|e| fail(format!("evaluation: {e}")));
        let (atr, ate) = (accuracy(&r.values[0].to_f64_vec(), &d.ytr), accuracy(&r.values[1].to_f64_vec(), &d.yte));
        acc = ate;
        println!(
            "\r  epoch {epoch:2} {}  loss {:.4}  train {:5.1}%  held-out {:5.1}%  ({:.2} s)",
            progress_bar(nb, nb),
            ls / nb as f64,
            100.0 * atr,
            100.0 * ate,
            t0.elapsed().as_secs_f64()
        );
    }
    println!("trained in {:.1} s", t_all.elapsed().as_secs_f64());
    println!(
        "warm training step (epochs 2-{EPOCHS}, {warm_steps} untraced steps): {:.1} steps/s, {:.3} ms/step",
        warm_steps as f64 / warm_s,
        1e3 * warm_s / warm_steps as f64
    );

    let stats = stats.expect("the last step was traced");
    println!("placement of one training step (from its profile):");
    let mut per: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for n in &stats.nodes {
        let l = stats.label(n);
        if l.copy.is_none() {
            per.entry(&l.device).or_default().push(&l.op);
        }
    }
    for (dev, ops) in &per {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for o in ops {
            *counts.entry(o).or_default() += 1;
        }
        let mut c: Vec<(usize, &str)> = counts.into_iter().map(|(o, n)| (n, o)).collect();
        c.sort_by(|a, b| b.cmp(a));
        let top: Vec<String> = c.iter().take(6).map(|(n, o)| format!("{o} {n}")).collect();
        println!("  {dev:<44} {:3} kernels: {}", ops.len(), top.join(", "));
    }
    let cp = stats.copies();
    println!("  cross-device copies: {} ({} bytes)", cp.count, cp.bytes);
    if let Some(p) = profile_path {
        std::fs::write(&p, stats.chrome_trace_json()).unwrap_or_else(|e| fail(format!("cannot write {p}: {e}")));
        println!("profile of the last training step: {p} (chrome://tracing, ui.perfetto.dev)");
    }
    println!("held-out accuracy: {:.1}%", 100.0 * acc);
    if acc < 0.95 {
        fail(format!("held-out accuracy {:.1}% is below the 95% this model reaches", 100.0 * acc));
    }
}
