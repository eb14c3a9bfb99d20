//! Prints which registered ops have no GPU kernel, which have one for some dtypes only
//! (the list in docs/user-guide/devices.md, "Ops without a GPU kernel"), and which a GPU
//! runs on the host (all dtypes, or some, in host memory).
use oxiflow_core::ops::{lookup, registered, GpuLaunch, GpuSupport};

fn main() {
    let mut none = Vec::new();
    let mut some: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    let mut host: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for name in registered() {
        let op = lookup(name).expect("registered op");
        if op.launch == GpuLaunch::Host {
            host.entry("every dtype".into()).or_default().push(name);
        } else if !op.host_memory.is_empty() {
            host.entry(op.host_memory.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")).or_default().push(name);
        }
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
    for (ts, mut ops) in host {
        ops.sort();
        println!("run on the host by a GPU for {ts}: {}", ops.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "));
    }
}
