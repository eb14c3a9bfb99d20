//! Property tests for device names (TF's `DeviceNameUtils` grammar,
//! `device_name_utils.cc`): printing then parsing gives the same spec, the
//! components may come in any order, canonical printing is idempotent, and no input string
//! makes the parser panic. Each property runs `OXIFLOW_FUZZ_CASES` cases (100,000 by
//! default; `make fuzz` runs more).

use oxiflow_core::device::spec::{canonicalize, DeviceSpec};
use proptest::prelude::*;

fn ident() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9_]{0,8}"
}

/// Device types as users write them; `cpu`/`gpu`/`tpu` in any case print upper-cased.
fn device_type() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("CPU".to_string()),
        Just("GPU".to_string()),
        Just("TPU".to_string()),
        ident().prop_filter("not a case variant of cpu/gpu/tpu", |t| { !matches!(t.to_ascii_uppercase().as_str(), "CPU" | "GPU" | "TPU") }),
    ]
}

/// A spec as the canonical printer can express it: an id only with a type (TF prints no id
/// when the type is unset, `ParsedNameToString`).
fn spec() -> impl Strategy<Value = DeviceSpec> {
    (
        proptest::option::of(ident()),
        proptest::option::of(0u32..1000),
        proptest::option::of(0u32..1000),
        proptest::option::of((device_type(), proptest::option::of(0u32..64))),
    )
        .prop_map(|(job, replica, task, dev)| DeviceSpec {
            job,
            replica,
            task,
            device_type: dev.as_ref().map(|(t, _)| t.clone()),
            id: dev.and_then(|(_, id)| id),
        })
}

/// The spec's components as separate `/key:value` strings, in canonical order.
fn components(s: &DeviceSpec) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(j) = &s.job {
        v.push(format!("/job:{j}"));
    }
    if let Some(r) = s.replica {
        v.push(format!("/replica:{r}"));
    }
    if let Some(t) = s.task {
        v.push(format!("/task:{t}"));
    }
    if let Some(ty) = &s.device_type {
        match s.id {
            Some(id) => v.push(format!("/device:{ty}:{id}")),
            None => v.push(format!("/device:{ty}:*")),
        }
    }
    v
}

/// `OXIFLOW_FUZZ_CASES` cases; the seed is `OXIFLOW_FUZZ_SEED` (fixed when unset), as in
/// oxiflow-capi's property tests.
fn config() -> ProptestConfig {
    let cases = std::env::var("OXIFLOW_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let seed = match std::env::var("OXIFLOW_FUZZ_SEED").ok().as_deref() {
        None | Some("") => 0x0f1f_2026,
        Some(v) => v.parse().unwrap_or_else(|_| panic!("OXIFLOW_FUZZ_SEED={v}: not a number")),
    };
    ProptestConfig { cases, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(seed), ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn print_then_parse_round_trips(s in spec()) {
        let printed = s.to_string();
        let back = DeviceSpec::parse(&printed).unwrap();
        prop_assert_eq!(&back, &s, "printed as {}", printed);
        prop_assert_eq!(back.to_string(), printed);
    }

    #[test]
    fn components_in_any_order_parse_to_the_same_spec(s in spec(), seed in any::<u64>()) {
        let mut parts = components(&s);
        // a deterministic shuffle driven by the generated seed
        let mut x = seed | 1;
        for i in (1..parts.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            parts.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let joined = parts.concat();
        prop_assert_eq!(DeviceSpec::parse(&joined).unwrap(), s, "parsing {}", joined);
    }

    #[test]
    fn legacy_and_local_names_equal_device_names(gpu in any::<bool>(), upper in any::<bool>(), id in 0u32..100) {
        let ty = if gpu { "gpu" } else { "cpu" };
        let ty = if upper { ty.to_ascii_uppercase() } else { ty.to_string() };
        let want = format!("/device:{}:{id}", ty.to_ascii_uppercase());
        prop_assert_eq!(canonicalize(&format!("/{ty}:{id}")).unwrap(), want.clone());
        prop_assert_eq!(canonicalize(&format!("{ty}:{id}")).unwrap(), want.clone());
        prop_assert_eq!(canonicalize(&want).unwrap(), want);
    }

    #[test]
    fn canonical_form_is_a_fixed_point(s in "(/(job|replica|task|device|cpu|gpu|GPU|CPU|x)(:[A-Za-z0-9_*]{0,5}){0,2}){0,4}") {
        // Any outcome but a panic is fine; what parses must print to a fixed point.
        if let Ok(c) = canonicalize(&s) {
            prop_assert_eq!(canonicalize(&c).unwrap(), c.clone(), "from {}", s);
        }
    }

    #[test]
    fn arbitrary_strings_never_panic_and_errors_quote_the_input(s in "\\PC{0,40}") {
        match DeviceSpec::parse(&s) {
            Ok(d) => prop_assert_eq!(DeviceSpec::parse(&d.to_string()).unwrap(), d),
            Err(e) => prop_assert!(e.to_string().contains(&format!("'{s}'")), "{} does not quote {:?}", e, s),
        }
    }

    #[test]
    fn negative_or_non_numeric_indices_are_rejected(field in prop_oneof![Just("replica"), Just("task")], v in "-[0-9]{1,3}|[a-z]{1,3}") {
        let s = format!("/job:localhost/{field}:{v}");
        let e = DeviceSpec::parse(&s).unwrap_err().to_string();
        prop_assert!(e.contains(&format!("'{s}'")), "{}", e);
    }
}
