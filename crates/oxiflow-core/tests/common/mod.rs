//! Helpers shared by the op and autodiff tests: deterministic inputs, evaluation through
//! `eval::evaluate`, naive reference computations, and central-finite-difference checks.
#![allow(dead_code)]

use oxiflow_core::autodiff::gradients;
use oxiflow_core::eval::{evaluate, HostState};
use oxiflow_core::{DType, Graph, Layout, Output, Result, Tensor};

/// xorshift64* (Vigna 2016): deterministic draws from a seed, for test inputs and fuzz cases.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `[0, 1)`, 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// One element of `v`, uniformly.
    pub fn pick<T: Clone>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())].clone()
    }
    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.uniform() < p
    }
}

/// Deterministic pseudo-random values in `[lo, hi)` ([`Rng`]).
pub fn rand_vec(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut r = Rng::new(seed);
    (0..n).map(|_| lo + (hi - lo) * r.uniform()).collect()
}

/// A row-major Float64 tensor.
pub fn t64(dims: &[usize], v: Vec<f64>) -> Tensor {
    Tensor::from_vec(dims, v, Layout::RowMajor).unwrap()
}

/// A row-major Float32 tensor.
pub fn t32(dims: &[usize], v: Vec<f64>) -> Tensor {
    Tensor::from_vec(dims, v.into_iter().map(|x| x as f32).collect(), Layout::RowMajor).unwrap()
}

/// Logical (row-major) values `v` of shape `dims` in column-major storage order (Julia's):
/// the element at logical index `ix` goes to position `sum(ix[d] * prod(dims[..d]))`.
pub fn column_major_order(dims: &[usize], v: &[f64]) -> Vec<f64> {
    let rs = strides(dims);
    let mut out = vec![0.0; v.len()];
    for (flat, &x) in v.iter().enumerate() {
        let (mut pos, mut step) = (0, 1);
        for d in 0..dims.len() {
            pos += (flat / rs[d]) % dims[d] * step;
            step *= dims[d];
        }
        out[pos] = x;
    }
    out
}

/// A random Float64 tensor.
pub fn rand_t(dims: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    t64(dims, rand_vec(dims.iter().product(), seed, lo, hi))
}

/// Evaluates `outs` with `feeds` on a fresh variable store.
pub fn eval(g: &Graph, feeds: &[(Output, Tensor)], outs: &[Output]) -> Result<Vec<Tensor>> {
    evaluate(g, feeds, outs, &[], &HostState::default())
}

/// Evaluates one output.
pub fn eval1(g: &Graph, feeds: &[(Output, Tensor)], o: Output) -> Tensor {
    eval(g, feeds, &[o]).unwrap().remove(0)
}

/// Row-major strides of `dims`.
pub fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// NumPy broadcasting computed by hand: the output shape and `f` applied at every output
/// index, each operand indexed with its size-1 and missing leading axes pinned to 0.
pub fn naive_broadcast(a: &[f64], ash: &[usize], b: &[f64], bsh: &[usize], f: impl Fn(f64, f64) -> f64) -> (Vec<usize>, Vec<f64>) {
    let n = ash.len().max(bsh.len());
    let pad = |s: &[usize]| -> Vec<usize> { vec![1; n - s.len()].into_iter().chain(s.iter().copied()).collect() };
    let (pa, pb) = (pad(ash), pad(bsh));
    let out: Vec<usize> = (0..n)
        .map(|i| {
            assert!(pa[i] == pb[i] || pa[i] == 1 || pb[i] == 1, "not broadcastable");
            if pa[i] == 1 {
                pb[i]
            } else {
                pa[i]
            } // NumPy: 1 against 0 gives 0
        })
        .collect();
    let (sa, sb, so) = (strides(&pa), strides(&pb), strides(&out));
    let total: usize = out.iter().product();
    let vals = (0..total)
        .map(|flat| {
            let (mut ia, mut ib) = (0, 0);
            for d in 0..n {
                let idx = (flat / so[d]) % out[d];
                if pa[d] != 1 {
                    ia += idx * sa[d];
                }
                if pb[d] != 1 {
                    ib += idx * sb[d];
                }
            }
            f(a[ia], b[ib])
        })
        .collect();
    (out, vals)
}

/// `|a - b| <= tol * max(1, |b|)` elementwise, with a message naming the index.
pub fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * w.abs().max(1.0), "{what}: element {i}: got {g}, want {w}");
    }
}

/// Checks the gradients of `build(xs)` with respect to each input against central finite
/// differences: the scalar `sum(build(xs) * w)` (fixed random `w`) is differentiated with
/// [`gradients`] and compared with `(L(x + eps e_j) - L(x - eps e_j)) / 2 eps` for every
/// element `j` of every input (Float64 placeholders).
pub fn check_grads_with(inputs: &[Tensor], eps: f64, tol: f64, build: impl Fn(&mut Graph, &[Output]) -> Result<Output>) {
    let mut g = Graph::new();
    let xs: Vec<Output> = inputs.iter().map(|t| g.placeholder(DType::Float64, t.dims(), None).unwrap()).collect();
    let y = build(&mut g, &xs).unwrap();
    let ydims = g.shape_of(y).unwrap().0;
    let w = g.constant(rand_t(&ydims, 4242, 0.5, 1.5)).unwrap();
    let wy = g.op("Mul", &[y, w]).unwrap();
    let loss = g.op("Sum", &[wy]).unwrap();
    let grads = gradients(&mut g, &[loss], &xs, None, false).unwrap();
    let fetch: Vec<Output> = grads.iter().enumerate().map(|(i, d)| d.unwrap_or_else(|| panic!("no gradient for input {i}"))).collect();
    let feeds = |vals: &[Tensor]| -> Vec<(Output, Tensor)> { xs.iter().copied().zip(vals.iter().cloned()).collect() };
    let analytic = eval(&g, &feeds(inputs), &fetch).unwrap();
    for (k, x) in inputs.iter().enumerate() {
        assert_eq!(analytic[k].dims(), x.dims(), "gradient {k} has the wrong shape");
        let base = x.to_f64_vec();
        let loss_at = |j: usize, delta: f64| {
            let mut v = base.clone();
            v[j] += delta;
            let mut vals = inputs.to_vec();
            vals[k] = t64(x.dims(), v);
            eval1(&g, &feeds(&vals), loss).to_f64_vec()[0]
        };
        let numeric: Vec<f64> = (0..base.len()).map(|j| (loss_at(j, eps) - loss_at(j, -eps)) / (2.0 * eps)).collect();
        assert_close(&analytic[k].to_f64_vec(), &numeric, tol, &format!("gradient of input {k}"));
    }
}

/// [`check_grads_with`] with `eps = 1e-6` and relative tolerance `1e-6`.
pub fn check_grads(inputs: &[Tensor], build: impl Fn(&mut Graph, &[Output]) -> Result<Output>) {
    check_grads_with(inputs, 1e-6, 1e-6, build)
}

/// Checks second derivatives: the first gradients of `sum(build(xs) * w)` are themselves
/// differentiated ([`check_grads_with`] on `sum_k sum(dL/dx_k * v_k)`), which holds only when
/// every gradient is built from differentiable ops.
pub fn check_second_grads(inputs: &[Tensor], tol: f64, build: impl Fn(&mut Graph, &[Output]) -> Result<Output>) {
    check_grads_with(inputs, 1e-5, tol, |g, xs| {
        let y = build(g, xs)?;
        let ydims = g.shape_of(y)?.0;
        let w = g.constant(rand_t(&ydims, 4242, 0.5, 1.5))?;
        let wy = g.op("Mul", &[y, w])?;
        let loss = g.op("Sum", &[wy])?;
        let grads = gradients(g, &[loss], xs, None, false)?;
        let mut terms = Vec::new();
        for (k, d) in grads.into_iter().enumerate() {
            let d = d.expect("first gradient");
            let v = g.constant(rand_t(inputs[k].dims(), 77 + k as u64, 0.5, 1.5))?;
            let dv = g.op("Mul", &[d, v])?;
            terms.push(g.op("Sum", &[dv])?);
        }
        if terms.len() == 1 {
            Ok(terms[0])
        } else {
            g.op("AddN", &terms)
        }
    })
}
