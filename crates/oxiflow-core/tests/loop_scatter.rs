//! A tensor written row by row in a `While` loop (a Julia `TensorArray` is one dense tensor,
//! each `write` a `TensorScatterUpdate`): the loop body updates the buffer it owns in place,
//! as TF's kernels forward an input nothing else reads, and copies it where something else
//! still reads the old value. Oracles: the rows the loop wrote, computed by hand; the
//! caller's tensor left unchanged; and the output's buffer address, which is the input's
//! when the update was in place.

use oxiflow_core::function::Function;
use oxiflow_core::graph::NodeId;
use oxiflow_core::ops::{AttrValue, StateAccess};
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Output, Result, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

/// No variables: the functions here read none.
struct NoState;
impl StateAccess for NoState {
    fn read_variable(&self, _: NodeId) -> Option<Tensor> {
        None
    }
    fn assign_variable(&self, _: NodeId, _: Tensor) -> Result<()> {
        unreachable!("no variables")
    }
}

fn address(t: &Tensor) -> *const f64 {
    match t {
        Tensor::F64(a) => a.as_ptr(),
        _ => panic!("not Float64"),
    }
}

/// `f(t) = TensorScatterUpdate(t, [[1]], [[9, 9, 9]])` for `t` of shape `[4, 3]`, and, with
/// `also_sum`, `Sum(t)` as a second output (a second reader of `t`).
fn scatter_function(also_sum: bool) -> Function {
    let mut g = Graph::new();
    let t = g.placeholder(DType::Float64, &[4, 3], Some("t")).unwrap();
    let idx = g.constant(Tensor::from_vec(&[1, 1], vec![1i64], Layout::RowMajor).unwrap()).unwrap();
    let upd = g.constant(Tensor::from_vec(&[1, 3], vec![9.0; 3], Layout::RowMajor).unwrap()).unwrap();
    let out = g.op("TensorScatterUpdate", &[t, idx, upd]).unwrap();
    let mut outs = vec![out];
    if also_sum {
        outs.push(g.op("Sum", &[t]).unwrap());
    }
    Function::new(g, vec![t], outs).unwrap()
}

#[test]
fn a_function_updates_an_argument_it_owns_in_place_and_copies_a_shared_one() {
    let f = scatter_function(false);
    let want: Vec<f64> = (0..12).map(|i| if (3..6).contains(&i) { 9.0 } else { i as f64 }).collect();
    let fresh = || Tensor::from_vec(&[4, 3], (0..12).map(f64::from).collect(), Layout::RowMajor).unwrap();
    // given up by the caller: the output is the argument's own buffer
    let a = fresh();
    let at = address(&a);
    let out = f.call_owned(vec![a], &NoState, "body", Some(0)).unwrap();
    assert_eq!(out[0].to_f64_vec(), want);
    assert_eq!(address(&out[0]), at, "the owned argument was copied");
    // still held by the caller: it keeps its values, the output is a copy
    let b = fresh();
    let out = f.call_owned(vec![b.clone()], &NoState, "body", Some(0)).unwrap();
    assert_eq!(out[0].to_f64_vec(), want);
    assert_eq!(b.to_f64_vec(), (0..12).map(f64::from).collect::<Vec<_>>());
    assert_ne!(address(&out[0]), address(&b));
    // a column-major argument (a Julia array) becomes row-major, with the same elements
    let c = Tensor::from_vec(&[4, 3], (0..12).map(|k| ((k % 4) * 3 + k / 4) as f64).collect(), Layout::ColumnMajor).unwrap();
    assert_eq!(f.call_owned(vec![c], &NoState, "body", Some(0)).unwrap()[0].to_f64_vec(), want);
    // a second reader of the argument sees its old value
    let g2 = scatter_function(true);
    let a = fresh();
    let at = address(&a);
    let out = g2.call_owned(vec![a], &NoState, "body", Some(0)).unwrap();
    assert_eq!(out[0].to_f64_vec(), want);
    assert_eq!(out[1].to_f64_vec(), vec![66.0]);
    assert_ne!(address(&out[0]), at);
    // an earlier reader (row 0 gathered, then written to row 1, as `read(ta, i - 1)` before
    // `write(ta, i, ...)`): done before the write, which is still in place
    let mut g = Graph::new();
    let t = g.placeholder(DType::Float64, &[4, 3], Some("t")).unwrap();
    let zero = g.constant(Tensor::from_vec(&[1], vec![0i64], Layout::RowMajor).unwrap()).unwrap();
    let row0 = g.op("GatherV2", &[t, zero]).unwrap();
    let idx = g.constant(Tensor::from_vec(&[1, 1], vec![1i64], Layout::RowMajor).unwrap()).unwrap();
    let w = g.op("TensorScatterUpdate", &[t, idx, row0]).unwrap();
    let copy_row = Function::new(g, vec![t], vec![w]).unwrap();
    let a = fresh();
    let at = address(&a);
    let out = copy_row.call_owned(vec![a], &NoState, "body", Some(0)).unwrap();
    assert_eq!(out[0].to_f64_vec(), [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
    assert_eq!(address(&out[0]), at, "the write after a read copied");
    // an earlier reader whose output shares the buffer (a Reshape, returned): it keeps the
    // old values, and the write goes to a copy
    let mut g = Graph::new();
    let t = g.placeholder(DType::Float64, &[4, 3], Some("t")).unwrap();
    let flat = g.op_spec(NodeSpec::new("Reshape", &[t]).attr("shape", AttrValue::Shape(vec![12]))).unwrap();
    let idx = g.constant(Tensor::from_vec(&[1, 1], vec![1i64], Layout::RowMajor).unwrap()).unwrap();
    let upd = g.constant(Tensor::from_vec(&[1, 3], vec![9.0; 3], Layout::RowMajor).unwrap()).unwrap();
    let w = g.op("TensorScatterUpdate", &[t, idx, upd]).unwrap();
    let alias = Function::new(g, vec![t], vec![w, flat]).unwrap();
    let out = alias.call_owned(vec![fresh()], &NoState, "body", Some(0)).unwrap();
    assert_eq!(out[0].to_f64_vec(), want);
    assert_eq!(out[1].to_f64_vec(), (0..12).map(f64::from).collect::<Vec<_>>());
    // an index out of range is the kernel's error, naming the node
    let mut g = Graph::new();
    let t = g.placeholder(DType::Float64, &[4, 3], Some("t")).unwrap();
    let idx = g.constant(Tensor::from_vec(&[1, 1], vec![7i64], Layout::RowMajor).unwrap()).unwrap();
    let upd = g.constant(Tensor::from_vec(&[1, 3], vec![9.0; 3], Layout::RowMajor).unwrap()).unwrap();
    let out = g.add_node(NodeSpec::new("TensorScatterUpdate", &[t, idx, upd]).name("write")).unwrap();
    let bad = Function::new(g, vec![t], vec![Output::new(out, 0)]).unwrap();
    let e = bad.call_owned(vec![fresh()], &NoState, "body", Some(0)).unwrap_err().to_string();
    assert!(e.contains("write") && e.contains("indices[0,0] = 7"), "{e}");
}

/// `While(i, rows)`: while `i < n`, row `i` of `rows` (`[n, 3]`) becomes `[i, i, i]`; with
/// `total`, a third loop variable `Sum(rows)` of the rows before each write.
fn row_loop(n: i64, total: bool) -> (Graph, Output, Vec<Output>) {
    let vars = |f: &mut Graph| {
        let mut v = vec![f.placeholder(DType::Int64, &[], Some("i")).unwrap(), f.placeholder(DType::Float64, &[n as usize, 3], Some("rows")).unwrap()];
        if total {
            v.push(f.placeholder(DType::Float64, &[], Some("total")).unwrap());
        }
        v
    };
    let mut c = Graph::new();
    let cv = vars(&mut c);
    let nn = c.constant(Tensor::scalar(n)).unwrap();
    let less = c.op("Less", &[cv[0], nn]).unwrap();
    let cond = Arc::new(Function::new(c, cv, vec![less]).unwrap());
    let mut b = Graph::new();
    let bv = vars(&mut b);
    let one = b.constant(Tensor::scalar(1i64)).unwrap();
    let i1 = b.op("Add", &[bv[0], one]).unwrap();
    let idx = b.op_spec(NodeSpec::new("Reshape", &[bv[0]]).attr("shape", AttrValue::Shape(vec![1, 1]))).unwrap();
    let fi = b.op_spec(NodeSpec::new("Cast", &[bv[0]]).attr("DstT", DType::Float64)).unwrap();
    let ones = b.constant(Tensor::from_vec(&[1, 3], vec![1.0; 3], Layout::RowMajor).unwrap()).unwrap();
    let row = b.op("Mul", &[ones, fi]).unwrap();
    let rows1 = b.op("TensorScatterUpdate", &[bv[1], idx, row]).unwrap();
    let mut outs = vec![i1, rows1];
    if total {
        outs.push(b.op("Sum", &[bv[1]]).unwrap());
    }
    let body = Arc::new(Function::new(b, bv, outs).unwrap());
    let mut g = Graph::new();
    let rows = g.placeholder(DType::Float64, &[n as usize, 3], Some("rows")).unwrap();
    let mut init = vec![g.constant(Tensor::scalar(0i64)).unwrap(), rows];
    if total {
        init.push(g.constant(Tensor::scalar(0.0f64)).unwrap());
    }
    let w = g.add_node(NodeSpec::new("While", &init).name("loop").attr("cond", AttrValue::Func(cond)).attr("body", AttrValue::Func(body))).unwrap();
    let outs = (1..init.len()).map(|k| Output::new(w, k)).collect();
    (g, rows, outs)
}

#[test]
fn a_loop_writes_each_row_and_a_second_reader_sees_the_rows_before_the_write() {
    for (n, total) in [(1i64, false), (200, false), (200, true), (0, true)] {
        let (g, rows, outs) = row_loop(n, total);
        let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
        let fed = Tensor::from_vec(&[n as usize, 3], vec![-1.0; n as usize * 3], Layout::RowMajor).unwrap();
        let got = sess.run(&[(rows, fed.clone())], &outs, &[], false).unwrap().values;
        let want: Vec<f64> = (0..n).flat_map(|r| [r as f64; 3]).collect();
        assert_eq!(got[0].to_f64_vec(), want, "n = {n}");
        // the fed tensor is not written through
        assert_eq!(fed.to_f64_vec(), vec![-1.0; n as usize * 3]);
        if total {
            // before the last write (of row n - 1): rows 0..n-1 written, row n - 1 still -1
            let want_total = if n == 0 { 0.0 } else { 3.0 * ((n - 1) * (n - 2) / 2) as f64 - 3.0 };
            assert_eq!(got[1].to_f64_vec(), vec![want_total], "n = {n}");
        }
    }
}
