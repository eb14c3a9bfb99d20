//! Cases shared by `conv_layouts.rs` (products by the system BLAS) and `conv_gemm_crate.rs`
//! (the `gemm` crate's): the three convolution kernels on batches large enough for several
//! tiles and several intra-op chunks, with the input and the output gradient stored
//! row-major or column-major, checked element by element against the defining sums
//! written here as plain loops over logical indices.

use crate::common::*;
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Output, Tensor};

/// Logical (row-major) values `v` of shape `dims`, stored in `layout`, as `dtype`.
pub fn stored(dims: &[usize], v: &[f64], layout: Layout, dtype: DType) -> Tensor {
    let data = match layout {
        Layout::RowMajor => v.to_vec(),
        Layout::ColumnMajor => column_major_order(dims, v),
    };
    match dtype {
        DType::Float32 => Tensor::from_vec(dims, data.iter().map(|&x| x as f32).collect(), layout).unwrap(),
        _ => Tensor::from_vec(dims, data, layout).unwrap(),
    }
}

/// Whether a tensor of rank 4 is stored column-major.
fn column_major(t: &Tensor) -> bool {
    match t.dtype() {
        DType::Float32 => {
            let a = t.array::<f32>().unwrap();
            !a.is_standard_layout() && a.t().is_standard_layout()
        }
        _ => {
            let a = t.array::<f64>().unwrap();
            !a.is_standard_layout() && a.t().is_standard_layout()
        }
    }
}

/// One convolution's sizes; `(pt, pl)` the padding before, TF's SAME split.
struct Sizes {
    x: [usize; 4],
    f: [usize; 4],
    s: (usize, usize),
    o: [usize; 4],
    pt: usize,
    pl: usize,
}

fn sizes(x: [usize; 4], f: [usize; 4], s: (usize, usize), same: bool) -> Sizes {
    let dim = |i: usize, k: usize, s: usize| if same { (i.div_ceil(s), ((i.div_ceil(s) - 1) * s + k).saturating_sub(i) / 2) } else { ((i - k) / s + 1, 0) };
    let ((oh, pt), (ow, pl)) = (dim(x[1], f[0], s.0), dim(x[2], f[1], s.1));
    Sizes { x, f, s, o: [x[0], oh, ow, f[3]], pt, pl }
}

/// Calls `visit(x index, f index, y index)` for every multiply-add of the convolution
/// (flat row-major indices of the input, the filter and the output).
fn each_tap(z: &Sizes, mut visit: impl FnMut(usize, usize, usize)) {
    let ([n, h, w, c], [kh, kw, _, oc], [_, oh, ow, _]) = (z.x, z.f, z.o);
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                for ky in 0..kh {
                    for kx in 0..kw {
                        let (iy, ix) = ((oy * z.s.0 + ky) as isize - z.pt as isize, (ox * z.s.1 + kx) as isize - z.pl as isize);
                        if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= w {
                            continue;
                        }
                        for ci in 0..c {
                            for co in 0..oc {
                                let xi = ((b * h + iy as usize) * w + ix as usize) * c + ci;
                                visit(xi, ((ky * kw + kx) * c + ci) * oc + co, ((b * oh + oy) * ow + ox) * oc + co);
                            }
                        }
                    }
                }
            }
        }
    }
}

fn conv_spec(op: &str, inputs: &[Output], z: &Sizes, same: bool) -> NodeSpec {
    NodeSpec::new(op, inputs).attr("strides", vec![1i64, z.s.0 as i64, z.s.1 as i64, 1]).attr("padding", if same { "SAME" } else { "VALID" })
}

/// Every geometry and storage order below, on 3 intra-op threads (several chunks, also on a
/// one-core machine); `tol` relative to the largest value.
pub fn check_all(dtype: DType, tol: f64) {
    use Layout::{ColumnMajor as C, RowMajor as R};
    let cases = [
        ([10, 12, 10, 5], [3, 3, 5, 6], (1, 1), true),
        ([10, 12, 10, 5], [3, 3, 5, 6], (1, 1), false),
        ([9, 13, 11, 4], [2, 4, 4, 7], (1, 1), true),
        ([10, 12, 10, 5], [3, 3, 5, 6], (2, 2), true),
        ([8, 14, 9, 3], [3, 2, 3, 8], (2, 1), false),
        ([3, 20, 18, 6], [3, 3, 6, 8], (1, 1), true),
        // whole vectors of images and a remainder, a block of output channels and a part
        ([18, 7, 6, 3], [3, 3, 3, 10], (1, 1), true),
        // one input channel (the direct filter gradient's one-channel blocks)
        ([17, 9, 8, 1], [3, 3, 1, 9], (1, 1), true),
        // chunks of 75 pixels over 3 threads: two of the direct filter gradient's sub-tiles
        ([24, 16, 14, 4], [3, 3, 4, 8], (1, 1), true),
    ];
    for (i, &(xd, fd, s, same)) in cases.iter().enumerate() {
        let z = sizes(xd, fd, s, same);
        let xv = rand_vec(xd.iter().product(), 10 + i as u64, -1.0, 1.0);
        let fv = rand_vec(fd.iter().product(), 20 + i as u64, -1.0, 1.0);
        let dyv = rand_vec(z.o.iter().product(), 30 + i as u64, -1.0, 1.0);
        let (mut y, mut dx, mut df) = (vec![0.0; dyv.len()], vec![0.0; xv.len()], vec![0.0; fv.len()]);
        each_tap(&z, |xi, fi, yi| {
            y[yi] += xv[xi] * fv[fi];
            dx[xi] += dyv[yi] * fv[fi];
            df[fi] += xv[xi] * dyv[yi];
        });
        for (xl, dyl) in [(R, R), (C, C), (C, R), (R, C)] {
            let what = format!("x {xd:?} f {fd:?} strides {s:?} same {same} {dtype} x {xl:?} dy {dyl:?}");
            let mut g = Graph::new();
            let x = g.constant(stored(&xd, &xv, xl, dtype)).unwrap();
            let f = g.constant(stored(&fd, &fv, if xl == R { C } else { R }, dtype)).unwrap();
            let dy = g.constant(stored(&z.o, &dyv, dyl, dtype)).unwrap();
            let yo = g.op_spec(conv_spec("Conv2D", &[x, f], &z, same)).unwrap();
            let dxo = g.op_spec(conv_spec("Conv2DBackpropInput", &[x, f, dy], &z, same)).unwrap();
            let dfo = g.op_spec(conv_spec("Conv2DBackpropFilter", &[x, f, dy], &z, same)).unwrap();
            let got = oxiflow_core::intra_op::with_intra_op_threads(3, || eval(&g, &[], &[yo, dxo, dfo])).unwrap();
            for ((t, want), name) in got.iter().zip([&y, &dx, &df]).zip(["Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"]) {
                let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                let scaled = |v: &[f64]| v.iter().map(|a| a / scale).collect::<Vec<_>>();
                assert_close(&scaled(&t.to_f64_vec()), &scaled(want), tol, &format!("{name}, {what}"));
            }
            // a column-major input of a batch of 8 or more gives a column-major output
            assert_eq!(column_major(&got[0]), xl == C && xd[0] >= 8, "Conv2D output order, {what}");
            // and a column-major output gradient a column-major input gradient, strided too
            assert_eq!(column_major(&got[1]), dyl == C && xd[0] >= 8, "Conv2DBackpropInput output order, {what}");
        }
    }
}
