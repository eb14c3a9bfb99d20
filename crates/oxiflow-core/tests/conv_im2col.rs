//! The tiled im2col kernels for column-major inputs too (`OXIFLOW_CONV=im2col`, set before
//! the first convolution; this file is its own test process), with the system BLAS: values
//! in every storage order against the defining sums (`conv_cases/mod.rs`).

mod common;
#[path = "conv_cases/mod.rs"]
mod conv_cases;
use oxiflow_core::DType;

#[test]
fn im2col_convolutions_in_every_order_match_the_defining_sums() {
    std::env::set_var("OXIFLOW_CONV", "im2col");
    assert_eq!(oxiflow_core::ops::conv::kernel_name(), "im2col");
    conv_cases::check_all(DType::Float64, 1e-12);
    conv_cases::check_all(DType::Float32, 1e-5);
}
