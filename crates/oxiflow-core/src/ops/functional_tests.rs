//! `WhileGrad`'s tape: which loop variables it rebuilds from the loop's final value instead
//! of keeping ([`scatter_chain`]), and that for a loop writing a tensor row by row it keeps
//! one row per iteration, the row each write overwrote, which rebuilds every iteration's
//! tensor exactly. Oracle: the rows the loop wrote, computed by hand.

use super::*;
use crate::eval::HostState;
use crate::tensor::Layout;

fn row_update(g: &mut Graph, t: Output, row: Output, value: Output) -> Output {
    let idx = g.op_spec(NodeSpec::new("Reshape", &[row]).attr("shape", AttrValue::Shape(vec![1, 1]))).unwrap();
    let ones = g.constant(Tensor::from_vec(&[1, 3], vec![1.0; 3], Layout::RowMajor).unwrap()).unwrap();
    let upd = g.op("Mul", &[ones, value]).unwrap();
    g.op("TensorScatterUpdate", &[t, idx, upd]).unwrap()
}

#[test]
fn a_variable_updated_only_by_scatters_or_passed_through_is_rebuilt() {
    let mut g = Graph::new();
    let vars: Vec<Output> = ["x", "y", "z", "w"].iter().map(|n| g.placeholder(DType::Float64, &[4, 3], Some(n)).unwrap()).collect();
    let (zero, two) = (g.constant(Tensor::scalar(0i64)).unwrap(), g.constant(Tensor::scalar(2i64)).unwrap());
    let v = g.constant(Tensor::scalar(5.0f64)).unwrap();
    // x: two writes and an Identity; y: a write, then an Add; z: passed through; w: a write
    // into x, not into w
    let x1 = row_update(&mut g, vars[0], zero, v);
    let x2 = row_update(&mut g, x1, two, v);
    let x3 = g.op("Identity", &[x2]).unwrap();
    let y1 = row_update(&mut g, vars[1], zero, v);
    let y2 = g.op("Add", &[y1, y1]).unwrap();
    let w1 = row_update(&mut g, vars[0], two, v);
    let body = Function::new(g, vars.clone(), vec![x3, y2, vars[2], w1]).unwrap();
    assert_eq!(scatter_chain(&body, 0), Some(vec![x2.node, x1.node]));
    assert_eq!(scatter_chain(&body, 1), None);
    assert_eq!(scatter_chain(&body, 2), Some(vec![]));
    assert_eq!(scatter_chain(&body, 3), None);
    let tape = Tape::rebuilding(&body);
    assert_eq!(tape.rebuilt, [true, false, true, false]);
    assert_eq!((tape.taps.len(), tape.tap_var.as_slice()), (2, &[0usize, 0][..]));
}

#[test]
fn a_tape_keeps_the_overwritten_row_per_iteration_and_rebuilds_each_iteration_exactly() {
    // While(i, rows): while i < 6, row i of rows ([6, 3]) becomes 10 i + 1
    let n = 6i64;
    let vars = |f: &mut Graph| vec![f.placeholder(DType::Int64, &[], Some("i")).unwrap(), f.placeholder(DType::Float64, &[6, 3], Some("rows")).unwrap()];
    let mut c = Graph::new();
    let cv = vars(&mut c);
    let nn = c.constant(Tensor::scalar(n)).unwrap();
    let less = c.op("Less", &[cv[0], nn]).unwrap();
    let cond = Arc::new(Function::new(c, cv, vec![less]).unwrap());
    let mut b = Graph::new();
    let bv = vars(&mut b);
    let one = b.constant(Tensor::scalar(1i64)).unwrap();
    let i1 = b.op("Add", &[bv[0], one]).unwrap();
    let fi = b.op_spec(NodeSpec::new("Cast", &[bv[0]]).attr("DstT", DType::Float64)).unwrap();
    let (ten, onef) = (b.constant(Tensor::scalar(10.0f64)).unwrap(), b.constant(Tensor::scalar(1.0f64)).unwrap());
    let ti = b.op("Mul", &[fi, ten]).unwrap();
    let value = b.op("Add", &[ti, onef]).unwrap();
    let rows1 = row_update(&mut b, bv[1], bv[0], value);
    let body = Arc::new(Function::new(b, bv, vec![i1, rows1]).unwrap());
    let mut g = Graph::new();
    let init = [g.constant(Tensor::scalar(0i64)).unwrap(), g.constant(Tensor::from_vec(&[6, 3], vec![-1.0; 18], Layout::RowMajor).unwrap()).unwrap()];
    let w = g.add_node(NodeSpec::new("While", &init).attr("cond", AttrValue::Func(cond)).attr("body", AttrValue::Func(body.clone()))).unwrap();
    let node = g.node(w).unwrap().clone();
    let inputs = [Tensor::scalar(0i64), Tensor::from_vec(&[6, 3], vec![-1.0; 18], Layout::RowMajor).unwrap()];
    let state = HostState::default();
    let ctx = KernelCtx { node: &node, inputs: &inputs, state: &state };
    let row = |k: usize| 10.0 * k as f64 + 1.0;

    let mut tape = Tape::rebuilding(&body);
    assert_eq!(tape.rebuilt, [false, true]);
    let last = run_loop(&ctx, inputs.to_vec(), Some(&mut tape)).unwrap();
    let want: Vec<f64> = (0..6).flat_map(|k| [row(k); 3]).collect();
    assert_eq!(last[1].to_f64_vec(), want);
    assert_eq!(tape.iterations.len(), 6);
    // per iteration: the counter kept, the rows not (a scalar stands in), and one record of
    // the 3 elements the write overwrote, still -1
    for (i, (kept, undo)) in tape.iterations.iter().enumerate() {
        assert_eq!(kept[0].to_f64_vec(), [i as f64]);
        assert_eq!(kept[1].dims(), &[] as &[usize]);
        assert_eq!(undo.len(), 1);
        assert_eq!(undo[0].1.old.to_f64_vec(), [-1.0; 3]);
    }
    // undoing the writes from the last rebuilds the rows each iteration got: rows 0..i
    // written, the others -1
    let mut t = last[1].clone();
    for (i, (_, undo)) in tape.iterations.iter().enumerate().rev() {
        t = crate::ops::scatter::scatter_restore(t, &undo[0].1).unwrap();
        let want: Vec<f64> = (0..6).flat_map(|k| [if k < i { row(k) } else { -1.0 }; 3]).collect();
        assert_eq!(t.to_f64_vec(), want, "iteration {i}");
    }
    // keeping everything (WhileGradGrad) keeps each iteration's rows as they were
    let mut all = Tape::keeping_all(2);
    run_loop(&ctx, inputs.to_vec(), Some(&mut all)).unwrap();
    for (i, (kept, undo)) in all.iterations.iter().enumerate() {
        let want: Vec<f64> = (0..6).flat_map(|k| [if k < i { row(k) } else { -1.0 }; 3]).collect();
        assert_eq!(kept[1].to_f64_vec(), want, "iteration {i}");
        assert!(undo.is_empty());
    }
}
