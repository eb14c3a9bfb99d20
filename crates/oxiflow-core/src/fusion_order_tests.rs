//! A fused cluster reading a matrix in the other memory order (Julia's `x'` next to `x`):
//! transposed tile by tile, over several tiles and two threads, to the unfused run's bits.

use super::mask_tests::column_major;
use super::tests::{bits, fused_steps, run, session, tensor, Rng};
use crate::dtype::DType;
use crate::graph::{Graph, NodeSpec};
use std::sync::{Arc, RwLock};

#[test]
fn a_transposed_operand_fuses_over_tiles_and_threads_with_the_unfused_bits() {
    // `exp(0.5 * (x + x'))` and `y - x'`: x' is Transpose's view of a column-major x, so
    // row-major; the lines (1003 long, not a whole number of tiles or register blocks) are
    // transposed a group at a time; and the same with a row-major x (a column-major x')
    for dtype in [DType::Float32, DType::Float64] {
        for x_column_major in [true, false] {
            let dims = [1003usize, 1003];
            let mut g = Graph::new();
            let x = g.placeholder(dtype, &dims, Some("x")).unwrap();
            let y = g.placeholder(dtype, &dims, Some("y")).unwrap();
            let h = g.placeholder(dtype, &[], Some("h")).unwrap();
            let xt = g.op_spec(NodeSpec::new("Transpose", &[x]).attr("perm", vec![1i64, 0])).unwrap();
            let s = g.op("Add", &[x, xt]).unwrap();
            let m = g.op("Mul", &[h, s]).unwrap();
            let e = g.op("Exp", &[m]).unwrap();
            let d = g.op("Sub", &[y, xt]).unwrap();
            let g = Arc::new(RwLock::new(g));
            let xv = if x_column_major { column_major(dtype, &dims, 3) } else { tensor(dtype, &dims, &mut Rng(3)) };
            let feeds = [(x, xv), (y, column_major(dtype, &dims, 4)), (h, tensor(dtype, &[], &mut Rng(5)))];
            let (want, _) = run(&session(&g, false, 0), &feeds, &[e, d]);
            let (got, st) = run(&session(&g, true, 0), &feeds, &[e, d]);
            assert_eq!(fused_steps(&st), 1, "{dtype:?}: one fused step");
            for k in 0..2 {
                assert!(bits(&got[k]) == bits(&want[k]), "{dtype:?}, column-major x {x_column_major}: output {k}");
            }
        }
    }
}
