//! Prints which registered ops have no GPU kernel, and which have one for some dtypes only
//! (the list in docs/user-guide/devices.md, "Ops without a GPU kernel").
use oxiflow_core::ops::{lookup, registered, GpuSupport};

fn main() {
    let mut none = Vec::new();
    let mut some: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for name in registered() {
        let op = lookup(name).expect("registered op");
        match op.gpu {
            GpuSupport::None => none.push(name),
            GpuSupport::Types(ts) => some.entry(ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")).or_default().push(name),
            GpuSupport::Any => {}
        }
    }
    none.sort();
    println!("no GPU kernel: {}", none.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "));
    for (ts, mut ops) in some {
        ops.sort();
        println!("GPU kernel for {ts} only: {}", ops.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "));
    }
}
