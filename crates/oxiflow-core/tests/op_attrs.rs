//! Ops declare their attributes (TF's `OpDef.attr`) and, where positions matter, their
//! inputs by name (TF's `OpDef.input_arg`): a node carrying an attribute its op does not
//! declare is refused with TF's `NodeDef mentions attr '...' not in Op<...>`, and the graph
//! is unchanged; every attribute an op's code reads or its gradients and builders set is
//! declared (the rest of the suite builds every op with its attributes); the training ops'
//! input names and order are TF's (`training_ops.cc`).

use oxiflow_core::ops::{lookup, registered, AttrDefault, AttrKind, InputRole};
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

#[test]
fn training_ops_name_their_inputs_and_references_as_tf() {
    let want: &[(&str, &[&str], usize)] = &[
        ("ApplyGradientDescent", &["var", "alpha", "delta"], 1),
        ("ApplyMomentum", &["var", "accum", "lr", "grad", "momentum"], 2),
        ("ApplyAdam", &["var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"], 3),
        ("ApplyRMSProp", &["var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"], 3),
        ("ApplyAdagrad", &["var", "accum", "lr", "grad"], 2),
        ("ApplyAdadelta", &["var", "accum", "accum_update", "lr", "rho", "epsilon", "grad"], 3),
        ("ApplyAdagradDA", &["var", "gradient_accumulator", "gradient_squared_accumulator", "grad", "lr", "l1", "l2", "global_step"], 3),
    ];
    for &(op, names, refs) in want {
        let d = lookup(op).unwrap();
        let got: Vec<&str> = d.inputs.iter().map(|i| i.name).collect();
        assert_eq!(got, names, "{op}");
        // TF's Ref(T) inputs: the variable and its slots, first
        assert_eq!(d.ref_inputs, (0..refs).collect::<Vec<_>>().as_slice(), "{op}");
        assert!(d.inputs[..refs].iter().all(|i| i.role == InputRole::Ref), "{op}");
        assert_eq!(d.input_index("grad").or(d.input_index("delta")).map(|i| d.inputs[i].role), Some(InputRole::LikeFirst), "{op}");
        // the kernels index their data inputs (references left out) by name
        assert_eq!(d.data_index(names[refs]).unwrap(), 0, "{op}");
        assert!(d.data_index("var").is_err(), "{op}: var is a reference, not a data input");
    }
    // TF's default of `update_slots` is true; `use_nesterov`'s is false
    let adagrad = lookup("ApplyAdagrad").unwrap();
    assert_eq!(adagrad.attr_def("update_slots").unwrap().default, Some(AttrDefault::Bool(true)));
    assert!(adagrad.bool_attr(&Default::default(), "update_slots").unwrap());
    assert!(!lookup("ApplyAdam").unwrap().bool_attr(&Default::default(), "use_nesterov").unwrap());
}
