//! The direct kernel for column-major batches in its 256-bit build (`OXIFLOW_CONV=avx2`, set
//! before the first convolution; this file is its own test process) against the defining
//! sums (`conv_cases/mod.rs`). On a CPU without AVX2 and FMA the im2col path runs instead,
//! and the test says so.

mod common;
#[path = "conv_cases/mod.rs"]
mod conv_cases;
use oxiflow_core::DType;

#[test]
fn the_avx2_direct_kernel_matches_the_defining_sums() {
    std::env::set_var("OXIFLOW_CONV", "avx2");
    let kernel = oxiflow_core::ops::conv::kernel_name();
    #[cfg(target_arch = "x86_64")]
    let fma = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let fma = false;
    if fma {
        assert_eq!(kernel, "direct AVX2");
    } else {
        assert_eq!(kernel, "im2col");
        eprintln!("this CPU has no AVX2 and FMA: the im2col path was checked instead of the direct kernel");
    }
    conv_cases::check_all(DType::Float64, 1e-12);
    conv_cases::check_all(DType::Float32, 1e-5);
}
