//! Wall-clock ops for timing parts of a graph from inside it: `Timestamp` (TF's
//! `tf.timestamp`) and `SleepFor` (ADCME's `sleep_for` kernel). Both are CPU only and
//! stateful, so they are never folded, deduplicated or skipped, and neither has a gradient
//! (an output of either is a measurement, not a function of the inputs).
//!
//! ADCME's `timestamp(deps)` is `Timestamp` under a control dependency on `deps`, so the
//! time is read after `deps` has run; the Julia side builds it that way.

use super::*;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn infer_timestamp(_: &InferCtx) -> Result<Vec<TensorType>> {
    Ok(vec![TensorType::new(DType::Float64, Shape::scalar())])
}

/// TF's `Timestamp`: seconds since the Unix epoch as a Float64 scalar, with the system
/// clock's resolution (microseconds or finer on Linux).
fn kernel_timestamp(ctx: &KernelCtx) -> Result<Outputs> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| ctx.error(format!("the system clock is before 1970: {e}")))?;
    Ok(smallvec![Tensor::scalar(now.as_secs_f64())])
}

fn infer_sleep_for(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let t = &ctx.inputs[0];
    if t.dtype != DType::Float64 {
        return Err(ctx.dtype_error(DType::Float64, t.dtype, "the time to sleep is a Float64 number of seconds"));
    }
    if t.shape.rank() != 0 {
        return Err(ctx.shape_error(&t.shape, &Shape::scalar(), "the time to sleep is a scalar"));
    }
    Ok(vec![TensorType::new(DType::Float64, Shape::scalar())])
}

/// ADCME's `SleepFor`: blocks the thread running it for `t` seconds (a Float64 scalar) and
/// outputs the seconds that passed, measured with a monotonic clock. ADCME's kernel outputs
/// whole seconds (its integer division drops the fraction); this outputs the fraction too.
/// InvalidArgument for a negative, NaN or infinite `t`.
fn kernel_sleep_for(ctx: &KernelCtx) -> Result<Outputs> {
    let t = ctx.inputs[0].to_f64_vec();
    let secs = *t.first().ok_or_else(|| ctx.error("the time to sleep is empty"))?;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(ctx.error(format!("cannot sleep for {secs} seconds: give a finite number >= 0")));
    }
    // `from_secs_f64` panics past u64::MAX seconds; such a sleep is refused instead
    let d = Duration::try_from_secs_f64(secs).map_err(|_| ctx.error(format!("cannot sleep for {secs} seconds")))?;
    let start = Instant::now();
    std::thread::sleep(d);
    Ok(smallvec![Tensor::scalar(start.elapsed().as_secs_f64())])
}

pub(crate) fn register(r: &mut Registry) {
    let stateful = |d: OpDef| OpDef { stateful: true, ..d };
    r.add(stateful(super::math::def("Timestamp", "Timestamp", Arity::Fixed(0), infer_timestamp, kernel_timestamp, GpuSupport::None, None)));
    r.add(stateful(super::math::def("SleepFor", "SleepFor", Arity::Fixed(1), infer_sleep_for, kernel_sleep_for, GpuSupport::None, None)));
}

#[cfg(test)]
mod tests {
    use crate::eval::{evaluate, HostState};
    use crate::graph::Graph;
    use crate::tensor::Tensor;

    #[test]
    fn sleep_for_sleeps_and_timestamp_moves_on() {
        let mut g = Graph::new();
        let t0 = g.op("Timestamp", &[]).unwrap();
        let d = g.constant(Tensor::scalar(0.05f64)).unwrap();
        let s = g.op("SleepFor", &[d]).unwrap();
        let got = evaluate(&g, &[], &[t0, s], &[], &HostState::default()).unwrap();
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let (stamp, slept) = (got[0].to_f64_vec()[0], got[1].to_f64_vec()[0]);
        assert!(stamp <= wall && wall - stamp < 60.0, "timestamp {stamp}, now {wall}");
        assert!((0.05..1.0).contains(&slept), "slept {slept} s for 0.05");
    }

    #[test]
    fn sleep_for_refuses_negative_and_non_float() {
        let mut g = Graph::new();
        let d = g.constant(Tensor::scalar(-1.0f64)).unwrap();
        let s = g.op("SleepFor", &[d]).unwrap();
        let err = evaluate(&g, &[], &[s], &[], &HostState::default()).unwrap_err().to_string();
        assert!(err.contains("SleepFor") && err.contains("-1"), "{err}");
        let i = g.constant(Tensor::scalar(1i64)).unwrap();
        assert!(g.op("SleepFor", &[i]).is_err());
    }
}
