//! The tiled convolution kernels with the `gemm` crate's products (`OXIFLOW_BLAS=gemm`, set
//! before any kernel loads a BLAS; this file is its own test process), column-major inputs
//! included (`OXIFLOW_CONV=im2col`, where they would otherwise take the direct kernel): the
//! strided and accumulating calls of that path against the defining sums
//! (`conv_cases/mod.rs`).

mod common;
#[path = "conv_cases/mod.rs"]
mod conv_cases;
use oxiflow_core::DType;

#[test]
fn tiled_convolutions_by_the_gemm_crate_match_the_defining_sums() {
    std::env::set_var("OXIFLOW_BLAS", "gemm");
    std::env::set_var("OXIFLOW_CONV", "im2col");
    assert_eq!(oxiflow_core::ops::blas::backend_name(), "gemm crate");
    assert_eq!(oxiflow_core::ops::conv::kernel_name(), "im2col");
    conv_cases::check_all(DType::Float64, 1e-12);
    conv_cases::check_all(DType::Float32, 1e-5);
}
