//! Ops declare their attributes (TF's `OpDef.attr`): a node carrying an attribute its op
//! does not declare is refused with TF's `NodeDef mentions attr '...' not in Op<...>`, and
//! the graph is unchanged; every attribute an op's code reads or its gradients and builders
//! set is declared (the rest of the suite builds every op with its attributes).

use oxiflow_core::ops::{lookup, registered, AttrKind};
use oxiflow_core::{Graph, NodeSpec, Tensor};

#[test]
fn an_undeclared_attribute_is_refused_naming_the_op_and_its_attributes() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::scalar(1.0f64)).unwrap();
    let before = g.nodes().len();
    // a misspelt `keep_dims`: before, it was silently ignored
    let e = g.op_spec(NodeSpec::new("Sum", &[x]).attr("keepdims", true)).unwrap_err().to_string();
    assert!(e.contains("NodeDef mentions attr 'keepdims' not in Op<name=Sum; attr=axis:list(int), keep_dims:bool>"), "{e}");
    let e = g.op_spec(NodeSpec::new("Sin", &[x]).attr("alpha", 0.5)).unwrap_err().to_string();
    assert!(e.contains("attr 'alpha' not in Op<name=Sin; attr=none>"), "{e}");
    assert_eq!(g.nodes().len(), before, "the graph is unchanged");
    // declared ones are taken
    let y = g.op_spec(NodeSpec::new("Sum", &[x]).attr("keep_dims", true).attr("axis", Vec::<i64>::new())).unwrap();
    assert_eq!(g.node(y.node).unwrap().op.name, "Sum");
}

#[test]
fn tf_attribute_names_and_types_of_some_ops() {
    // TF's op registrations (array_ops.cc, math_ops.cc, state_ops.cc) for the attributes
    // Oxiflow takes as attributes
    let want: &[(&str, &[(&str, AttrKind)])] = &[
        ("Cast", &[("SrcT", AttrKind::Type), ("DstT", AttrKind::Type), ("Truncate", AttrKind::Bool)]),
        ("MatMul", &[("transpose_a", AttrKind::Bool), ("transpose_b", AttrKind::Bool)]),
        ("BatchMatMulV2", &[("adj_x", AttrKind::Bool), ("adj_y", AttrKind::Bool)]),
        ("Placeholder", &[("dtype", AttrKind::Type), ("shape", AttrKind::Shape)]),
        ("ApplyAdam", &[("use_locking", AttrKind::Bool), ("use_nesterov", AttrKind::Bool)]),
        ("Sin", &[]),
    ];
    for (op, attrs) in want {
        let got: Vec<(&str, AttrKind)> = lookup(op).unwrap().attrs.iter().map(|a| (a.name, a.kind)).collect();
        assert_eq!(&got, attrs, "{op}");
    }
    // names are unique within each op
    for op in registered() {
        let names: Vec<&str> = lookup(op).unwrap().attrs.iter().map(|a| a.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{op}: {names:?}");
    }
}
