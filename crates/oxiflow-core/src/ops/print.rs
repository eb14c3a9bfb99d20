//! `Print(input, data...)`: TF1's `tf.Print`, the op behind Oxiflow's `tf.print` and ADCME's
//! `print_tensor`. Output 0 is `input` itself; when the node runs, it writes attr `template`
//! to the process's standard error (TF's default stream) with each `{}` replaced by the next
//! of the `data` tensors, formatted as NumPy and `tf.print` do (nested brackets, at most
//! `summarize` leading and trailing entries per dimension, `...` between; `summarize < 0`:
//! all). CPU only; stateful, so it is never folded, deduplicated or skipped when it is run.
//! The gradient passes to `input` unchanged and to no data tensor (TF's `_PrintGrad`).

use super::*;
use std::fmt::Write as _;
use std::io::Write as _;

fn template<'a>(attrs: &'a Attrs, op: &str) -> Result<&'a str> {
    attrs
        .get_str_opt(op, "template")?
        .ok_or_else(|| OxiflowError::InvalidArgument(format!("{op}: attr template (a string with one {{}} per printed input) is missing")))
}

fn infer_print(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let holes = template(ctx.attrs, ctx.op)?.matches("{}").count();
    if holes > ctx.inputs.len() - 1 {
        return Err(ctx.invalid(format!("template has {holes} {{}} for {} data inputs", ctx.inputs.len() - 1)));
    }
    Ok(vec![ctx.inputs[0].clone()])
}

/// Appends `values` (row-major, of shape `dims`) as nested brackets, eliding the middle of
/// any dimension longer than `2 * summarize` (when `summarize >= 0`).
fn format_nested(out: &mut String, values: &[String], dims: &[usize], summarize: i64) {
    let Some((&n, rest)) = dims.split_first() else {
        out.push_str(&values[0]);
        return;
    };
    let stride: usize = rest.iter().product();
    let keep = if summarize >= 0 && n > (summarize as usize).saturating_mul(2) { summarize as usize } else { n };
    out.push('[');
    let mut first = true;
    let mut item = |out: &mut String, i: usize| {
        if !std::mem::take(&mut first) {
            out.push_str(if rest.is_empty() { " " } else { "\n " });
        }
        format_nested(out, &values[i * stride..(i + 1) * stride], rest, summarize);
    };
    for i in 0..keep {
        item(out, i);
    }
    if keep < n {
        out.push_str(if rest.is_empty() { " ..." } else { "\n ..." });
        for i in n - keep..n {
            item(out, i);
        }
    }
    out.push(']');
}

/// A float in its shortest exact form, in scientific notation when very small or large
/// (`3.65e-9`, not `0.00000000365`).
fn float_text<T: std::fmt::Display + std::fmt::LowerExp + Into<f64> + Copy>(v: T) -> String {
    let a = v.into().abs();
    if a != 0.0 && a.is_finite() && !(1e-4..1e16).contains(&a) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// A complex value as NumPy shows it: `(1+2j)`, `(2-1j)`.
fn complex_text<T: std::fmt::Display + std::fmt::LowerExp + Into<f64> + Copy>(re: T, im: T) -> String {
    let sign = if im.into().is_sign_negative() { "" } else { "+" };
    format!("({}{sign}{}j)", float_text(re), float_text(im))
}

/// A tensor as `tf.print` shows it (a scalar as its value).
pub fn format_tensor(t: &Tensor, summarize: i64) -> String {
    let values: Vec<String> = match t {
        Tensor::F32(a) => a.iter().map(|&v| float_text(v)).collect(),
        Tensor::F64(a) => a.iter().map(|&v| float_text(v)).collect(),
        Tensor::I32(a) => a.iter().map(|v| v.to_string()).collect(),
        Tensor::I64(a) => a.iter().map(|v| v.to_string()).collect(),
        Tensor::Bool(a) => a.iter().map(|v| v.to_string()).collect(),
        Tensor::C64(a) => a.iter().map(|v| complex_text(v.re, v.im)).collect(),
        Tensor::C128(a) => a.iter().map(|v| complex_text(v.re, v.im)).collect(),
        Tensor::Device(_) => return "<tensor in device memory>".to_string(),
    };
    if values.is_empty() {
        return "[]".to_string();
    }
    let mut s = String::new();
    format_nested(&mut s, &values, t.dims(), summarize);
    s
}

fn kernel_print(ctx: &KernelCtx) -> Result<Outputs> {
    let tpl = template(&ctx.node.attrs, "Print")?;
    let summarize = match ctx.node.attrs.get("summarize") {
        Some(AttrValue::Int(v)) => *v,
        _ => 3,
    };
    let mut line = String::new();
    let mut pieces = tpl.split("{}");
    line.push_str(pieces.next().unwrap_or(""));
    for (k, piece) in pieces.enumerate() {
        let _ = write!(line, "{}", format_tensor(&ctx.inputs[k + 1].to_host()?, summarize));
        line.push_str(piece);
    }
    line.push('\n');
    // one write of the whole line, so lines of concurrent Print ops do not interleave
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    Ok(smallvec![ctx.inputs[0].clone()])
}

fn grad_print(_: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let mut g = vec![None; node.inputs.len()];
    g[0] = grads[0];
    Ok(g)
}

pub(crate) fn register(r: &mut Registry) {
    let print = super::math::def("Print", "Print", Arity::AtLeast(1), infer_print, kernel_print, GpuSupport::None, Some(grad_print));
    r.add(OpDef { stateful: true, ..print }.with_attrs(attrs!["template" => Str, "summarize" => Int]));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Layout;

    #[test]
    fn print_formats_like_numpy() {
        let m = Tensor::from_vec(&[2, 3], vec![1.0f64, 2.5, 3.0, 4.0, 5.0, 6.0], Layout::RowMajor).unwrap();
        assert_eq!(format_tensor(&m, 3), "[[1 2.5 3]\n [4 5 6]]");
        let v = Tensor::from_vec(&[8], (1..=8).collect::<Vec<i64>>(), Layout::RowMajor).unwrap();
        assert_eq!(format_tensor(&v, 2), "[1 2 ... 7 8]");
        assert_eq!(format_tensor(&v, -1), "[1 2 3 4 5 6 7 8]");
        assert_eq!(format_tensor(&v, i64::MAX), "[1 2 3 4 5 6 7 8]");
        assert_eq!(format_tensor(&Tensor::scalar(true), 3), "true");
        assert_eq!(format_tensor(&Tensor::scalar(3.5e-9f64), 3), "3.5e-9");
        assert_eq!(format_tensor(&Tensor::scalar(-2.5e20f64), 3), "-2.5e20");
        assert_eq!(format_tensor(&Tensor::scalar(0.1f32), 3), "0.1");
        assert_eq!(format_tensor(&Tensor::scalar(1e-5f32), 3), "1e-5");
        let e = Tensor::from_vec(&[0], Vec::<f32>::new(), Layout::RowMajor).unwrap();
        assert_eq!(format_tensor(&e, 3), "[]");
        let z = Tensor::from_vec(&[2], vec![crate::tensor::Complex::new(1.0f64, 2.0), crate::tensor::Complex::new(2.0, -0.5)], Layout::RowMajor).unwrap();
        assert_eq!(format_tensor(&z, 3), "[(1+2j) (2-0.5j)]");
    }
}
