//! The tiled convolution kernels with the system BLAS (the `gemm` crate where none is
//! installed): values in every storage order against the defining sums
//! (`conv_cases/mod.rs`).

mod common;
#[path = "conv_cases/mod.rs"]
mod conv_cases;
use oxiflow_core::DType;

#[test]
fn tiled_convolutions_match_the_defining_sums_in_f64() {
    conv_cases::check_all(DType::Float64, 1e-12);
}

#[test]
fn tiled_convolutions_match_the_defining_sums_in_f32() {
    conv_cases::check_all(DType::Float32, 1e-5);
}
