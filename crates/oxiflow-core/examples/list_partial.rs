fn main() {
    let mut v = oxiflow_core::ops::registered();
    v.sort();
    for n in v {
        let op = oxiflow_core::ops::lookup(n).unwrap();
        println!("{} {}", n, oxiflow_core::ops::dynamic_shape::accepts_unknown_dims(op));
    }
}
