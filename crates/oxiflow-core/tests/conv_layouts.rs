//! The convolution kernels this CPU gets by default (the direct kernel for column-major
//! batches where the CPU has FMA, its AVX-512 build where it has that; the tiled im2col
//! kernels with the system BLAS, or the `gemm` crate where none is installed, for the
//! rest): values in every storage order against the defining sums (`conv_cases/mod.rs`).

mod common;
#[path = "conv_cases/mod.rs"]
mod conv_cases;
use oxiflow_core::DType;

#[test]
fn column_major_batches_take_the_best_kernel_the_cpu_has() {
    #[cfg(target_arch = "x86_64")]
    let want = match (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"), is_x86_feature_detected!("avx512f")) {
        _ if std::env::var_os("OXIFLOW_NO_FMA").is_some() || std::env::var_os("OXIFLOW_CONV").is_some() => {
            eprintln!("OXIFLOW_NO_FMA or OXIFLOW_CONV is set: the default kernel choice is not checked in this run");
            return;
        }
        (true, true) => "direct AVX-512",
        (true, false) => "direct AVX2",
        (false, _) => "im2col",
    };
    #[cfg(not(target_arch = "x86_64"))]
    let want = "im2col";
    assert_eq!(oxiflow_core::ops::conv::kernel_name(), want);
}

#[test]
fn tiled_convolutions_match_the_defining_sums_in_f64() {
    conv_cases::check_all(DType::Float64, 1e-12);
}

#[test]
fn tiled_convolutions_match_the_defining_sums_in_f32() {
    conv_cases::check_all(DType::Float32, 1e-5);
}

#[test]
fn empty_batches_channels_and_images_give_empty_or_zero_results() {
    use oxiflow_core::{Graph, Layout, NodeSpec};
    // (input, filter): no images, no input channels (a zero gradient), no output channels,
    // an image of no rows; each in both storage orders
    for (xd, fd) in [([0, 5, 5, 2], [3, 3, 2, 4]), ([9, 5, 5, 0], [3, 3, 0, 4]), ([9, 5, 5, 2], [3, 3, 2, 0]), ([9, 0, 5, 2], [3, 3, 2, 4])] {
        for layout in [Layout::RowMajor, Layout::ColumnMajor] {
            let n = |d: &[usize]| d.iter().product::<usize>();
            let mut g = Graph::new();
            let x = g.constant(conv_cases::stored(&xd, &vec![1.0; n(&xd)], layout, DType::Float64)).unwrap();
            let f = g.constant(conv_cases::stored(&fd, &vec![1.0; n(&fd)], layout, DType::Float64)).unwrap();
            let spec = |op: &str, ins: &[oxiflow_core::Output]| NodeSpec::new(op, ins).attr("strides", vec![1i64, 1, 1, 1]).attr("padding", "SAME");
            let y = g.op_spec(spec("Conv2D", &[x, f])).unwrap();
            let yd = [xd[0], xd[1], xd[2], fd[3]];
            let dy = g.constant(conv_cases::stored(&yd, &vec![1.0; n(&yd)], layout, DType::Float64)).unwrap();
            let dx = g.op_spec(spec("Conv2DBackpropInput", &[x, f, dy])).unwrap();
            let df = g.op_spec(spec("Conv2DBackpropFilter", &[x, f, dy])).unwrap();
            let got = common::eval(&g, &[], &[y, dx, df]).unwrap();
            let what = format!("x {xd:?} f {fd:?} {layout:?}");
            assert_eq!(got[0].dims(), &yd[..], "{what}");
            assert_eq!(got[1].dims(), &xd[..], "{what}");
            assert_eq!(got[2].dims(), &fd[..], "{what}");
            // an empty sum is zero: the filter gradient of an empty batch or image
            assert!(got[2].to_f64_vec().iter().all(|&v| v == 0.0), "{what}");
        }
    }
}
