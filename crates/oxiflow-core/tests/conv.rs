//! `Conv2D` and its backprop ops: values against a direct loop over TF's definition (NHWC,
//! HWIO, SAME padding with the smaller half before), gradients and second derivatives
//! against finite differences, an unknown batch, and the errors.

mod common;
use common::*;
use oxiflow_core::{DType, Graph, NodeSpec, Output, OxiflowError, Tensor};

/// TF's conv2d by its definition: `y[b, oy, ox, o] = sum x[b, oy sh + ky - pt, ox sw + kx - pl,
/// c] f[ky, kx, c, o]` over taps inside the input.
fn direct(x: &Tensor, xd: [usize; 4], f: &Tensor, fd: [usize; 4], s: (usize, usize), same: bool) -> (Vec<usize>, Vec<f64>) {
    let (xv, fv) = (x.to_f64_vec(), f.to_f64_vec());
    let [n, h, w, c] = xd;
    let [kh, kw, _, oc] = fd;
    let out = |i: usize, k: usize, s: usize| if same { i.div_ceil(s) } else { (i - k) / s + 1 };
    let (oh, ow) = (out(h, kh, s.0), out(w, kw, s.1));
    let pad = |i: usize, k: usize, s: usize, o: usize| if same { ((o - 1) * s + k).saturating_sub(i) / 2 } else { 0 };
    let (pt, pl) = (pad(h, kh, s.0, oh), pad(w, kw, s.1, ow));
    let mut y = vec![0.0; n * oh * ow * oc];
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                for o in 0..oc {
                    let mut acc = 0.0;
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let (iy, ix) = ((oy * s.0 + ky) as isize - pt as isize, (ox * s.1 + kx) as isize - pl as isize);
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            for ch in 0..c {
                                acc += xv[((b * h + iy as usize) * w + ix as usize) * c + ch] * fv[((ky * kw + kx) * c + ch) * oc + o];
                            }
                        }
                    }
                    y[((b * oh + oy) * ow + ox) * oc + o] = acc;
                }
            }
        }
    }
    (vec![n, oh, ow, oc], y)
}

fn conv(g: &mut Graph, x: Output, f: Output, s: (usize, usize), padding: &str) -> oxiflow_core::Result<Output> {
    g.op_spec(NodeSpec::new("Conv2D", &[x, f]).attr("strides", vec![1i64, s.0 as i64, s.1 as i64, 1]).attr("padding", padding))
}

#[test]
fn conv2d_matches_the_direct_sum() {
    for (xd, fd) in [([2, 5, 4, 3], [3, 2, 3, 2]), ([1, 6, 6, 1], [2, 2, 1, 3]), ([3, 4, 7, 2], [1, 3, 2, 4])] {
        for s in [(1, 1), (2, 1), (2, 3)] {
            for same in [true, false] {
                let (x, f) = (rand_t(&xd, 1, -1.0, 1.0), rand_t(&fd, 2, -1.0, 1.0));
                let mut g = Graph::new();
                let (xo, fo) = (g.constant(x.clone()).unwrap(), g.constant(f.clone()).unwrap());
                let y = conv(&mut g, xo, fo, s, if same { "SAME" } else { "VALID" }).unwrap();
                let (dims, want) = direct(&x, xd, &f, fd, s, same);
                let got = eval1(&g, &[], y);
                let what = format!("x {xd:?} f {fd:?} strides {s:?} same {same}");
                assert_eq!(got.dims(), &dims[..], "{what}");
                assert_eq!(g.shape_of(y).unwrap().0, dims, "static shape, {what}");
                assert_close(&got.to_f64_vec(), &want, 1e-13, &what);
                // f32 gives the same values to f32's precision
                let mut g32 = Graph::new();
                let (x32, f32_) = (g32.constant(t32(&xd, x.to_f64_vec())).unwrap(), g32.constant(t32(&fd, f.to_f64_vec())).unwrap());
                let y32 = conv(&mut g32, x32, f32_, s, if same { "SAME" } else { "VALID" }).unwrap();
                assert_close(&eval1(&g32, &[], y32).to_f64_vec(), &want, 1e-5, &what);
            }
        }
    }
}

#[test]
fn conv2d_gradients_match_finite_differences() {
    for (s, padding) in [((1, 1), "SAME"), ((2, 2), "SAME"), ((2, 1), "VALID")] {
        let inputs = [rand_t(&[2, 5, 4, 2], 3, -1.0, 1.0), rand_t(&[3, 2, 2, 3], 4, -1.0, 1.0)];
        check_grads(&inputs, |g, xs| conv(g, xs[0], xs[1], s, padding));
        // the backprop ops' own gradients (second derivatives of a bilinear map)
        check_second_grads(&inputs, 1e-6, |g, xs| conv(g, xs[0], xs[1], s, padding));
    }
}

#[test]
fn an_unknown_batch_is_specialised_when_fed() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[oxiflow_core::shape::UNKNOWN, 4, 4, 1], Some("x")).unwrap();
    let f = g.constant(rand_t(&[3, 3, 1, 2], 5, -1.0, 1.0)).unwrap();
    let y = conv(&mut g, x, f, (1, 1), "SAME").unwrap();
    assert_eq!(g.shape_of(y).unwrap().0[1..], [4, 4, 2]);
    let loss = g.op("Sum", &[y]).unwrap();
    let d = oxiflow_core::autodiff::gradients(&mut g, &[loss], &[f], None, false).unwrap()[0].unwrap();
    for n in [1, 3] {
        let xv = rand_t(&[n, 4, 4, 1], 6, -1.0, 1.0);
        let out = eval(&g, &[(x, xv.clone())], &[y, d]).unwrap();
        assert_eq!(out[0].dims(), &[n, 4, 4, 2]);
        assert_eq!(out[1].dims(), &[3, 3, 1, 2]);
        let (_, want) = direct(&xv, [n, 4, 4, 1], &rand_t(&[3, 3, 1, 2], 5, -1.0, 1.0), [3, 3, 1, 2], (1, 1), true);
        assert_close(&out[0].to_f64_vec(), &want, 1e-13, "batch of {n}");
    }
}

#[test]
fn bad_convolutions_are_named_errors() {
    let mut g = Graph::new();
    let x = g.constant(rand_t(&[1, 3, 3, 2], 7, -1.0, 1.0)).unwrap();
    let f = g.constant(rand_t(&[2, 2, 3, 1], 8, -1.0, 1.0)).unwrap();
    let e = conv(&mut g, x, f, (1, 1), "SAME").unwrap_err().to_string();
    assert!(e.contains("input depth 2 does not match the filter's in_channels 3"), "{e}");
    let f2 = g.constant(rand_t(&[4, 1, 2, 1], 9, -1.0, 1.0)).unwrap();
    let e = conv(&mut g, x, f2, (1, 1), "VALID").unwrap_err().to_string();
    assert!(e.contains("the filter's height 4 exceeds the input's height 3 with VALID padding"), "{e}");
    let f3 = g.constant(rand_t(&[2, 2, 2, 1], 10, -1.0, 1.0)).unwrap();
    let e = conv(&mut g, x, f3, (1, 1), "FULL").unwrap_err().to_string();
    assert!(e.contains("padding must be \"SAME\" or \"VALID\""), "{e}");
    let with = |g: &mut Graph, k: &str, v: oxiflow_core::ops::AttrValue| {
        g.op_spec(NodeSpec::new("Conv2D", &[x, f3]).attr("strides", vec![1i64, 1, 1, 1]).attr("padding", "SAME").attr(k, v))
    };
    let e = with(&mut g, "data_format", "NCHW".into()).unwrap_err();
    assert!(matches!(e, OxiflowError::Unimplemented(_)) && e.to_string().contains("only NHWC"), "{e}");
    let e = with(&mut g, "dilations", vec![1i64, 2, 2, 1].into()).unwrap_err();
    assert!(matches!(e, OxiflowError::Unimplemented(_)), "{e}");
    let e = g.op_spec(NodeSpec::new("Conv2D", &[x, f3]).attr("strides", vec![2i64, 1, 1, 1]).attr("padding", "SAME")).unwrap_err();
    assert!(matches!(e, OxiflowError::Unimplemented(_)) && e.to_string().contains("batch and depth"), "{e}");
    let e = g.op_spec(NodeSpec::new("Conv2D", &[x, f3]).attr("strides", vec![1i64, 0, 1, 1]).attr("padding", "SAME")).unwrap_err();
    assert!(e.to_string().contains("4 positive ints"), "{e}");
    // the graph still builds a good one
    assert!(conv(&mut g, x, f3, (1, 1), "SAME").is_ok());
}

#[test]
fn an_output_gradient_of_another_batch_is_a_named_error() {
    let mut g = Graph::new();
    let u = oxiflow_core::shape::UNKNOWN;
    let x = g.placeholder(DType::Float64, &[u, 4, 4, 1], Some("x")).unwrap();
    let dy = g.placeholder(DType::Float64, &[u, 4, 4, 2], Some("dy")).unwrap();
    let f = g.constant(rand_t(&[3, 3, 1, 2], 5, -1.0, 1.0)).unwrap();
    let spec = |op: &str, ins: &[Output]| NodeSpec::new(op, ins).attr("strides", vec![1i64, 1, 1, 1]).attr("padding", "SAME");
    let dx = g.op_spec(spec("Conv2DBackpropInput", &[x, f, dy])).unwrap();
    let df = g.op_spec(spec("Conv2DBackpropFilter", &[x, f, dy])).unwrap();
    for o in [dx, df] {
        let feeds = [(x, rand_t(&[2, 4, 4, 1], 6, -1.0, 1.0)), (dy, rand_t(&[3, 4, 4, 2], 7, -1.0, 1.0))];
        let e = eval(&g, &feeds, &[o]).unwrap_err().to_string();
        assert!(e.contains("incompatible shapes [2,4,4,2] and [3,4,4,2] (out_backprop must have the convolution's output shape)"), "{e}");
        // matching batches still run
        let feeds = [(x, rand_t(&[3, 4, 4, 1], 6, -1.0, 1.0)), (dy, rand_t(&[3, 4, 4, 2], 7, -1.0, 1.0))];
        assert!(eval(&g, &feeds, &[o]).is_ok());
    }
}
