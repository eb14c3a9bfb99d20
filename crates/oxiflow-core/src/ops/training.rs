//! Training ops: TF's `training_ops` kernels `ApplyGradientDescent`, `ApplyMomentum`,
//! `ApplyAdam`, `ApplyRMSProp`, `ApplyAdagrad`, `ApplyAdadelta`, `ApplyAdagradDA` (what
//! `tf.train.*Optimizer.apply_gradients` adds), and `StopGradient` (`tf.stop_gradient`,
//! ADCME's `independent`).
//!
//! The `Apply*` ops take the variable and its slot variables (accumulators) as *reference*
//! inputs, like `Assign` (`OpDef::ref_inputs`): the kernel reads their current values from
//! the session's variable store, updates them in place and outputs the variable's new value
//! (TF's `out`, a reference to `var`). Their hyperparameters are scalars of the variable's
//! dtype (`ApplyAdagradDA`'s `global_step` is an Int64 scalar); `grad` has the variable's
//! shape. Being on reference edges, each update op is placed with its variable. They have
//! no gradient (TF registers none). GPU kernels exist in TF for Float32/Float64, so
//! `GPU_FLOATS`, except for `ApplyAdagradDA` (CPU only in TF, and here).
//!
//! Update rules, from TF's `training_ops.cc` (`functor::Apply*`):
//! - `ApplyGradientDescent(var, alpha, delta)`: `var -= alpha * delta`.
//! - `ApplyMomentum(var, accum, lr, grad, momentum; use_nesterov)`:
//!   `accum = accum * momentum + grad`; `var -= lr * accum`
//!   (Nesterov: `var -= grad * lr + accum * momentum * lr`).
//! - `ApplyAdam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad;
//!   use_nesterov)`: `lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)`,
//!   `m += (grad - m) * (1 - beta1)`, `v += (grad^2 - v) * (1 - beta2)`,
//!   `var -= lr_t * m / (sqrt(v) + epsilon)` (Nesterov: `m * beta1 + (1 - beta1) * grad`
//!   in place of `m`).
//! - `ApplyRMSProp(var, ms, mom, lr, rho, momentum, epsilon, grad)`:
//!   `ms += (grad^2 - ms) * (1 - rho)`, `mom = mom * momentum + lr * grad / sqrt(ms + epsilon)`,
//!   `var -= mom`.

use super::math::def;
use super::*;
use crate::tensor::Element;
use ndarray::{ArcArray, ArrayD, ArrayViewMutD, IxDyn, ShapeBuilder};
use std::ops::{Add, Div, Mul, Sub};

/// Float element arithmetic the update rules need.
trait Real: Element + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> {
    fn one() -> Self;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    /// -1, 0 or 1 (0 for both zeros; NaN stays NaN), as Eigen's `sign`.
    fn sign(self) -> Self;
    /// `x as Self` (rounding to nearest for f32).
    fn from_f64(x: f64) -> Self;
}
macro_rules! real {
    ($t:ty) => {
        impl Real for $t {
            fn one() -> Self {
                1.0
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn sign(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else {
                    self * 0.0
                }
            }
            fn from_f64(x: f64) -> Self {
                x as $t
            }
        }
    };
}
real!(f32);
real!(f64);

/// Shape function of every `Apply*` op, from its declared inputs (`OpDef::inputs`): the
/// first is the variable (a float dtype); the slots (`Ref`) and `LikeFirst` inputs (the
/// gradient) have the variable's type; `Scalar` inputs are rank-0 hyperparameters of the variable's dtype; an
/// `Int64Scalar` (`global_step`) is a rank-0 Int64. Errors
/// name the input (attribute types are checked before, by `OpDef::check_attrs`). Output:
/// the variable's type.
fn infer_apply(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let def = lookup(ctx.op)?;
    let var = &ctx.inputs[0];
    ctx.require_float(var.dtype)?;
    for ((i, t), d) in ctx.inputs.iter().enumerate().zip(def.inputs).skip(1) {
        let step = d.role == InputRole::Int64Scalar;
        let want = if step { DType::Int64 } else { var.dtype };
        if t.dtype != want {
            let what = if step { "must be Int64" } else { "must have the variable's dtype" };
            return Err(ctx.dtype_error(want, t.dtype, format!(" (input {i}, {}, {what})", d.name)));
        }
        let like_var = matches!(d.role, InputRole::Ref | InputRole::LikeFirst);
        if like_var && t.shape != var.shape {
            return Err(ctx.shape_error(&var.shape, &t.shape, format!(" (input {i}, {}, must have the variable's shape)", d.name)));
        }
        if !like_var && t.shape.rank() != 0 {
            return Err(ctx.shape_error(&Shape(vec![]), &t.shape, format!(" (input {i}, {}, is a hyperparameter and must be a scalar)", d.name)));
        }
    }
    Ok(vec![var.clone()])
}

/// Reference input `i`'s value `t` as `T`, checked against the op's dtype and the variable's
/// declared shape.
fn checked_ref<'t, T: Real>(ctx: &KernelCtx, i: usize, t: &'t Tensor) -> Result<&'t ArcArray<T, IxDyn>> {
    let a = T::view(t).ok_or_else(|| ctx.error(format!("input {i} holds {} but the op runs on {}", t.dtype(), T::DTYPE)))?;
    if a.shape() != ctx.node.outputs[0].shape.dims() {
        return Err(ctx.error(format!("input {i} has shape {} but the variable was declared {}", Shape(a.shape().to_vec()), ctx.node.outputs[0].shape)));
    }
    Ok(a)
}

/// Current value of reference input `i` (a variable), owned for an update.
fn read_ref<T: Real>(ctx: &KernelCtx, i: usize) -> Result<ArrayD<T>> {
    let var = ctx.node.inputs[i].node;
    let t = ctx.state.read_variable(var).ok_or_else(|| {
        let name = ctx.node.name.clone();
        OxiflowError::Uninitialized { variable: format!("node {var} (input {i} of {name})"), node: name }
    })?;
    Ok(checked_ref::<T>(ctx, i, &t)?.to_owned())
}

/// Applies `update` to reference inputs `0..K` (the variable, then its slots, in input
/// order) and outputs the variable's new value (TF's `out`). In place where the store
/// allows ([`StateAccess::update_variables`]): no copy and no new buffer, as TF's training
/// kernels write the variable's own buffer; otherwise on copies that are assigned back.
/// Either way, a tensor a run read from the variable before keeps that value. The
/// variables take the layout of `like`, the gradient ([`match_layout`]).
fn update_refs<T: Real, const K: usize>(ctx: &KernelCtx, like: &ArcArray<T, IxDyn>, update: impl Fn(&mut [ArrayViewMutD<T>; K])) -> Result<Outputs> {
    let vars: Vec<NodeId> = (0..K).map(|i| ctx.node.inputs[i].node).collect();
    let mut in_place = |ts: &mut [&mut Tensor]| -> Result<()> {
        let mut views = Vec::with_capacity(ts.len());
        for (i, t) in ts.iter_mut().enumerate() {
            checked_ref::<T>(ctx, i, t)?;
            let a = T::view_mut(t).ok_or_else(|| ctx.error(format!("input {i} changed its dtype")))?;
            match_layout(a, like);
            views.push(a.view_mut());
        }
        update(&mut k_views(ctx, views)?);
        Ok(())
    };
    if let Some(values) = ctx.state.update_variables(&vars, &mut in_place) {
        return Ok(smallvec![values?.swap_remove(0)]);
    }
    let mut owned = (0..K).map(|i| read_ref::<T>(ctx, i).map(ArrayD::into_shared)).collect::<Result<Vec<_>>>()?;
    owned.iter_mut().for_each(|a| match_layout(a, like));
    update(&mut k_views(ctx, owned.iter_mut().map(|a| a.view_mut()).collect())?);
    let mut out = None;
    for (i, a) in owned.into_iter().enumerate().rev() {
        let t = T::wrap(a);
        ctx.state.assign_variable(vars[i], t.clone())?;
        out = Some(t);
    }
    out.map(|t| smallvec![t]).ok_or_else(|| ctx.error("no variable to update"))
}

/// The `K` views of an update as an array (an error, never a panic, if the store handed
/// over another number).
fn k_views<'a, T, const K: usize>(ctx: &KernelCtx, views: Vec<ArrayViewMutD<'a, T>>) -> Result<[ArrayViewMutD<'a, T>; K]> {
    let got = views.len();
    views.try_into().map_err(|_| ctx.error(format!("{got} variables for an update of {K}")))
}

/// Stores `a` in the memory order of `like` (the update's gradient) when `like` is
/// contiguous in one order and `a` is not in that order: a variable initialised from a
/// column-major Julia array adopts its (row-major) gradients' layout at its first update,
/// and every later update walks both buffers in memory order (over mixed layouts one of
/// them is read with a stride: about 10x slower for a 256x256 weight).
fn match_layout<T: Real>(a: &mut ArcArray<T, IxDyn>, like: &ArcArray<T, IxDyn>) {
    if like.is_standard_layout() {
        if !a.is_standard_layout() {
            *a = a.as_standard_layout().into_owned().into_shared();
        }
    } else if like.t().is_standard_layout() && !a.t().is_standard_layout() {
        let mut f = ArrayD::from_elem(IxDyn(a.shape()).f(), <T as Element>::zero());
        f.assign(&*a);
        *a = f.into_shared();
    }
}

/// The input named `name` (a hyperparameter) as a scalar.
fn scalar<T: Real>(ctx: &KernelCtx, name: &str) -> Result<T> {
    let a = ctx.inputs[ctx.node.op.data_index(name)?].array::<T>()?;
    a.iter().next().copied().filter(|_| a.len() == 1).ok_or_else(|| ctx.error(format!("hyperparameter {name} must be a scalar")))
}

/// The input named `name` (the gradient) as an array of the variable's shape.
fn full<'a, T: Real>(ctx: &'a KernelCtx, name: &str) -> Result<&'a ArcArray<T, IxDyn>> {
    let a = ctx.inputs[ctx.node.op.data_index(name)?].array::<T>()?;
    if a.shape() != ctx.node.outputs[0].shape.dims() {
        return Err(ctx.error(format!("gradient has shape {} but the variable has shape {}", Shape(a.shape().to_vec()), ctx.node.outputs[0].shape)));
    }
    Ok(a)
}

/// Runs `$go::<f32>` or `$go::<f64>` by the variable's dtype.
macro_rules! by_dtype {
    ($ctx:expr, $go:ident) => {
        match $ctx.node.outputs[0].dtype {
            DType::Float32 => $go::<f32>($ctx),
            DType::Float64 => $go::<f64>($ctx),
            d => Err($ctx.error(format!("no kernel for {d}"))),
        }
    };
}

/// Elements above which [`update_elements`] shards its loop over the intra-op threads.
const UPDATE_SHARD_MIN: usize = 1 << 15;

/// The `K` reference buffers of one update, shared with the intra-op threads (each chunk
/// of the loop touches its own index range of every buffer).
struct RefPtrs<T, const K: usize>([*mut T; K]);
// SAFETY: the chunks handed to different threads cover disjoint index ranges.
unsafe impl<T, const K: usize> Sync for RefPtrs<T, K> {}
impl<T, const K: usize> RefPtrs<T, K> {
    /// The pointers (a method, so that a closure captures the `Sync` wrapper, not the array).
    fn get(&self) -> [*mut T; K] {
        self.0
    }
}

/// `f([&mut r_0[i], ..., &mut r_{K-1}[i]], grad[i])` for every element `i` of `K` reference
/// arrays (the variable and its slots, in input order) and the gradient, all of one
/// shape: the element-wise rule of a training op. When all have the gradient's strides and
/// are contiguous (`update_refs` gives the variable and slots the gradient's layout), the
/// loop runs over the buffers in memory order, compiled for `f` (a closure, not a `fn`
/// pointer) and in chunks over the intra-op threads above [`UPDATE_SHARD_MIN`] elements
/// (the caller included), as TF's training kernels shard with Eigen; otherwise element by
/// element through their indices. The same `f` for every element either way, so the
/// results are the same bits.
fn update_elements<T: Real + Send + Sync, const K: usize>(
    refs: &mut [ArrayViewMutD<T>; K],
    grad: &ArcArray<T, IxDyn>,
    f: impl Fn([&mut T; K], T) + Sync + Copy,
) {
    let same_order = refs.iter().all(|r| r.strides() == grad.strides());
    if let (true, Some(g)) = (same_order, grad.as_slice_memory_order()) {
        let slices: Option<Vec<&mut [T]>> = refs.iter_mut().map(|r| r.as_slice_memory_order_mut()).collect();
        if let Some(mut slices) = slices {
            let ptrs = RefPtrs::<T, K>(std::array::from_fn(|k| slices[k].as_mut_ptr()));
            let n = g.len();
            let run = |lo: usize, hi: usize| {
                // Local copies: pointers read through a reference would be reloaded after
                // every write (they might alias it), which stops vectorization; so did an
                // `enumerate().skip(lo)` loop. Either ran Adam's rule 2x slower.
                let (p, g) = (ptrs.get(), &g[..hi]);
                #[allow(clippy::needless_range_loop)] // `i` indexes the K buffers too
                for i in lo..hi {
                    // SAFETY: every buffer holds n >= hi elements (same shape, contiguous);
                    // the K buffers are distinct variables, and concurrent calls get
                    // disjoint ranges.
                    f(std::array::from_fn(|k| unsafe { &mut *p[k].add(i) }), g[i]);
                }
            };
            match crate::intra_op::shard_len(n, UPDATE_SHARD_MIN) {
                None => run(0, n),
                Some(chunk) => crate::intra_op::parallel_for(n.div_ceil(chunk), |c| run(c * chunk, ((c + 1) * chunk).min(n))),
            }
            return;
        }
    }
    for idx in ndarray::indices(grad.raw_dim()) {
        let mut vals: [T; K] = std::array::from_fn(|k| refs[k][idx.clone()]);
        f(vals.each_mut(), grad[idx.clone()]);
        for (r, v) in refs.iter_mut().zip(vals) {
            r[idx.clone()] = v;
        }
    }
}

fn kernel_gd(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Real>(ctx: &KernelCtx) -> Result<Outputs> {
        let alpha = scalar::<T>(ctx, "alpha")?;
        let delta = full::<T>(ctx, "delta")?;
        update_refs::<T, 1>(ctx, delta, |refs| update_elements(refs, delta, move |[v], d| *v = *v - alpha * d))
    }
    by_dtype!(ctx, go)
}

fn kernel_momentum(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Real>(ctx: &KernelCtx) -> Result<Outputs> {
        let nesterov = ctx.node.op.bool_attr(&ctx.node.attrs, "use_nesterov")?;
        let (lr, grad, momentum) = (scalar::<T>(ctx, "lr")?, full::<T>(ctx, "grad")?, scalar::<T>(ctx, "momentum")?);
        update_refs::<T, 2>(ctx, grad, |refs| {
            update_elements(refs, grad, move |[v, a], g| {
                *a = *a * momentum + g;
                *v = if nesterov { *v - (g * lr + *a * momentum * lr) } else { *v - lr * *a };
            })
        })
    }
    by_dtype!(ctx, go)
}

fn kernel_adam(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Real>(ctx: &KernelCtx) -> Result<Outputs> {
        let nesterov = ctx.node.op.bool_attr(&ctx.node.attrs, "use_nesterov")?;
        let (b1p, b2p, lr) = (scalar::<T>(ctx, "beta1_power")?, scalar::<T>(ctx, "beta2_power")?, scalar::<T>(ctx, "lr")?);
        let (b1, b2, eps) = (scalar::<T>(ctx, "beta1")?, scalar::<T>(ctx, "beta2")?, scalar::<T>(ctx, "epsilon")?);
        let grad = full::<T>(ctx, "grad")?;
        let one = T::one();
        let lr_t = lr * (one - b2p).sqrt() / (one - b1p);
        update_refs::<T, 3>(ctx, grad, |refs| {
            update_elements(refs, grad, move |[x, m, v], g| {
                *m = *m + (g - *m) * (one - b1);
                *v = *v + (g * g - *v) * (one - b2);
                let num = if nesterov { *m * b1 + (one - b1) * g } else { *m };
                *x = *x - lr_t * num / (v.sqrt() + eps);
            })
        })
    }
    by_dtype!(ctx, go)
}

fn kernel_rmsprop(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Real>(ctx: &KernelCtx) -> Result<Outputs> {
        let (lr, rho) = (scalar::<T>(ctx, "lr")?, scalar::<T>(ctx, "rho")?);
        let (momentum, eps) = (scalar::<T>(ctx, "momentum")?, scalar::<T>(ctx, "epsilon")?);
        let grad = full::<T>(ctx, "grad")?;
        let one = T::one();
        update_refs::<T, 3>(ctx, grad, |refs| {
            update_elements(refs, grad, move |[x, ms, mom], g| {
                *ms = *ms + (g * g - *ms) * (one - rho);
                *mom = *mom * momentum + lr * g / (*ms + eps).sqrt();
                *x = *x - *mom;
            })
        })
    }
    by_dtype!(ctx, go)
}

fn kernel_adagrad(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Real>(ctx: &KernelCtx) -> Result<Outputs> {
        let update_slots = ctx.node.op.bool_attr(&ctx.node.attrs, "update_slots")?;
        let (lr, grad) = (scalar::<T>(ctx, "lr")?, full::<T>(ctx, "grad")?);
        let one = T::one();
        update_refs::<T, 2>(ctx, grad, |refs| {
            update_elements(refs, grad, move |[x, a], g| {
                if update_slots {
                    *a = *a + g * g;
                }
                *x = *x - g * lr * (one / a.sqrt());
            })
        })
    }
    by_dtype!(ctx, go)
}

fn kernel_adadelta(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Real>(ctx: &KernelCtx) -> Result<Outputs> {
        let (lr, rho, eps) = (scalar::<T>(ctx, "lr")?, scalar::<T>(ctx, "rho")?, scalar::<T>(ctx, "epsilon")?);
        let grad = full::<T>(ctx, "grad")?;
        let one = T::one();
        update_refs::<T, 3>(ctx, grad, |refs| {
            update_elements(refs, grad, move |[x, a, au], g| {
                *a = *a * rho + g * g * (one - rho);
                let update = (*au + eps).sqrt() * (one / (*a + eps).sqrt()) * g;
                *x = *x - update * lr;
                *au = *au * rho + update * update * (one - rho);
            })
        })
    }
    by_dtype!(ctx, go)
}

fn kernel_adagrad_da(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Real>(ctx: &KernelCtx) -> Result<Outputs> {
        let grad = full::<T>(ctx, "grad")?;
        let (lr, l1, l2) = (scalar::<T>(ctx, "lr")?, scalar::<T>(ctx, "l1")?, scalar::<T>(ctx, "l2")?);
        let step = ctx.inputs[ctx.node.op.data_index("global_step")?].array::<i64>()?;
        let step = step.iter().next().copied().filter(|_| step.len() == 1).ok_or_else(|| ctx.error("global_step must be a scalar"))?;
        let gs = T::from_f64(step as f64);
        let (zero, minus_one) = (<T as Element>::zero(), <T as Element>::zero() - T::one());
        let gs_lr = gs * lr;
        update_refs::<T, 3>(ctx, grad, |refs| {
            update_elements(refs, grad, move |[x, ga, gg], g| {
                *ga = *ga + g;
                *gg = *gg + g * g;
                let den = l2 * gs_lr + gg.sqrt();
                *x = if l1 > zero {
                    let shrunk = ga.abs() - gs * l1;
                    let shrunk = if shrunk > zero { shrunk } else { zero };
                    lr * minus_one * ga.sign() * shrunk / den
                } else {
                    lr * *ga * minus_one / den
                };
            })
        })
    }
    by_dtype!(ctx, go)
}

fn kernel_identity(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![ctx.inputs[0].clone()])
}

pub(crate) fn register(r: &mut Registry) {
    // TF's training_ops.cc: each op's inputs by name (the variable and its slots are
    // reference inputs), `use_locking` on all (accepted; each update holds its variables),
    // `use_nesterov` on Momentum and Adam, `update_slots` (default true) on Adagrad.
    let apply = |name, inputs: &'static [InputDef], attrs, kernel, gpu| OpDef {
        name,
        default_name: name,
        arity: Arity::Fixed(inputs.len()),
        // TF's `Ref(T)` inputs, by role (the registry is built once per process)
        ref_inputs: Box::leak(inputs.iter().enumerate().filter(|(_, i)| i.role == InputRole::Ref).map(|(k, _)| k).collect::<Vec<_>>().into_boxed_slice()),
        infer: infer_apply,
        kernel,
        gpu,
        inputs,
        attrs,
        launch: if matches!(gpu, GpuSupport::None) { GpuLaunch::None } else { GpuLaunch::Training },
        grad: Gradient::Undefined,
        stateful: true,
        inexpensive: false,
        host_memory: &[],
    };
    const LOCKING: &[AttrDef] = attrs!["use_locking" => Bool];
    const NESTEROV: &[AttrDef] = attrs!["use_locking" => Bool, "use_nesterov" => Bool];
    r.add(apply("ApplyGradientDescent", inputs!["var" => Ref, "alpha" => Scalar, "delta" => LikeFirst], LOCKING, kernel_gd, GPU_FLOATS));
    r.add(apply(
        "ApplyMomentum",
        inputs!["var" => Ref, "accum" => Ref, "lr" => Scalar, "grad" => LikeFirst, "momentum" => Scalar],
        NESTEROV,
        kernel_momentum,
        GPU_FLOATS,
    ));
    r.add(apply(
        "ApplyAdam",
        inputs![
            "var" => Ref, "m" => Ref, "v" => Ref, "beta1_power" => Scalar, "beta2_power" => Scalar,
            "lr" => Scalar, "beta1" => Scalar, "beta2" => Scalar, "epsilon" => Scalar, "grad" => LikeFirst,
        ],
        NESTEROV,
        kernel_adam,
        GPU_FLOATS,
    ));
    r.add(apply(
        "ApplyRMSProp",
        inputs![
            "var" => Ref, "ms" => Ref, "mom" => Ref, "lr" => Scalar, "rho" => Scalar,
            "momentum" => Scalar, "epsilon" => Scalar, "grad" => LikeFirst,
        ],
        LOCKING,
        kernel_rmsprop,
        GPU_FLOATS,
    ));
    r.add(apply(
        "ApplyAdagrad",
        inputs!["var" => Ref, "accum" => Ref, "lr" => Scalar, "grad" => LikeFirst],
        attrs!["use_locking" => Bool, "update_slots" => Bool = true],
        kernel_adagrad,
        GPU_FLOATS,
    ));
    r.add(apply(
        "ApplyAdadelta",
        inputs!["var" => Ref, "accum" => Ref, "accum_update" => Ref, "lr" => Scalar, "rho" => Scalar, "epsilon" => Scalar, "grad" => LikeFirst],
        LOCKING,
        kernel_adadelta,
        GPU_FLOATS,
    ));
    // TF has no GPU kernel for ApplyAdagradDA.
    r.add(apply(
        "ApplyAdagradDA",
        inputs![
            "var" => Ref, "gradient_accumulator" => Ref, "gradient_squared_accumulator" => Ref, "grad" => LikeFirst,
            "lr" => Scalar, "l1" => Scalar, "l2" => Scalar, "global_step" => Int64Scalar,
        ],
        LOCKING,
        kernel_adagrad_da,
        GpuSupport::None,
    ));
    // TF's StopGradient: the identity forward, no gradient (`ops.NotDifferentiable`).
    r.add(
        def("StopGradient", "StopGradient", Arity::Fixed(1), infer_same, kernel_identity, GpuSupport::Any, None)
            .not_differentiable()
            .launched_as(GpuLaunch::DeviceHandled),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{s, Array2};

    #[test]
    fn strided_references_take_the_element_by_element_path_with_the_same_results() {
        // Every other column of [4, 10] arrays: not contiguous, so update_elements walks
        // their indices; the same rule over contiguous copies gives the same bits.
        let base = |seed: f64| Array2::from_shape_fn((4, 10), |(i, j)| (seed + i as f64 * 0.37 - j as f64 * 0.11).sin());
        let (mut x, mut m) = (base(1.0), base(2.0));
        let grad = base(3.0).slice_move(s![.., ..;2]).into_dyn().into_shared();
        assert!(grad.as_slice_memory_order().is_none());
        let rule = |[x, m]: [&mut f64; 2], g: f64| {
            *m = *m * 0.9 + g;
            *x -= 0.1 * *m;
        };
        let (mut xc, mut mc) = (x.slice(s![.., ..;2]).to_owned().into_dyn(), m.slice(s![.., ..;2]).to_owned().into_dyn());
        let gc = grad.as_standard_layout().into_owned().into_shared();
        update_elements(&mut [xc.view_mut(), mc.view_mut()], &gc, rule);
        update_elements(&mut [x.slice_mut(s![.., ..;2]).into_dyn(), m.slice_mut(s![.., ..;2]).into_dyn()], &grad, rule);
        assert_eq!(x.slice(s![.., ..;2]).into_dyn(), xc.view());
        assert_eq!(m.slice(s![.., ..;2]).into_dyn(), mc.view());
        assert_eq!(x.slice(s![.., 1..;2]), base(1.0).slice(s![.., 1..;2]), "columns outside the view are untouched");
    }
}
