//! Process-wide device configuration (TF2's `tf.config`), per-session memory statistics and
//! thread counts.

use crate::session::{device_lines, parse_options, session, OxSession};
use crate::{guard, opt_str, put, req_str, return_str, slice};
use oxiflow_core::device::process as pc;
use oxiflow_core::{OxiflowError, Session};
use std::ffi::c_char;

/// `tf.config.set_soft_device_placement(on)`: default `allow_soft_placement` of new sessions.
#[no_mangle]
pub extern "C" fn oxf_set_soft_device_placement(on: i32) -> i32 {
    guard(|| {
        pc::set_soft_device_placement(on != 0);
        Ok(())
    })
}

/// `tf.debugging.set_log_device_placement(on)`: default `log_device_placement` of new sessions.
#[no_mangle]
pub extern "C" fn oxf_set_log_device_placement(on: i32) -> i32 {
    guard(|| {
        pc::set_log_device_placement(on != 0);
        Ok(())
    })
}

/// The process-wide switches: `*soft` and `*log` get 0 or 1, `*initialized` whether the
/// runtime is initialized (physical-device settings are then refused).
#[no_mangle]
pub extern "C" fn oxf_device_policy(soft: *mut i32, log: *mut i32, initialized: *mut i32) -> i32 {
    guard(|| {
        put(soft, pc::soft_device_placement() as i32)?;
        put(log, pc::log_device_placement() as i32)?;
        put(initialized, pc::is_initialized() as i32)
    })
}

/// `tf.config.experimental.set_memory_growth(device, on)` for a physical device name
/// (`/physical_device:GPU:0`). Errors: not a GPU, virtual devices configured, initialized.
#[no_mangle]
pub extern "C" fn oxf_set_memory_growth(device: *const c_char, on: i32) -> i32 {
    guard(|| pc::set_memory_growth(req_str(device, "device")?, on != 0))
}

/// `tf.config.experimental.get_memory_growth(device)`: `*on` gets 0 or 1.
#[no_mangle]
pub extern "C" fn oxf_get_memory_growth(device: *const c_char, on: *mut i32) -> i32 {
    guard(|| put(on, pc::memory_growth(req_str(device, "device")?)? as i32))
}

/// `tf.config.gpu.set_per_process_memory_fraction(f)`, `0 < f <= 1`; refused once initialized.
#[no_mangle]
pub extern "C" fn oxf_set_memory_fraction(f: f64) -> i32 {
    guard(|| pc::set_memory_fraction(f))
}

/// `tf.config.set_logical_device_configuration(device, configs)`: `n` logical devices,
/// `memory_limit_mb[i]` their limits in MiB (negative: not set; null when `n` entries are
/// all unset, as for CPUs).
#[no_mangle]
pub extern "C" fn oxf_set_logical_device_configuration(device: *const c_char, memory_limit_mb: *const i64, n: i64) -> i32 {
    guard(|| {
        let name = req_str(device, "device")?;
        // before the list of `n` entries is built
        pc::check_logical_device_count(usize::try_from(n).unwrap_or(0), name)?;
        let limits: Vec<Option<u64>> = if memory_limit_mb.is_null() {
            vec![None; n.max(0) as usize]
        } else {
            slice(memory_limit_mb, n, "memory_limit_mb")?.iter().map(|&m| u64::try_from(m).ok()).collect()
        };
        let configs: Vec<pc::LogicalDeviceConfiguration> = limits.into_iter().map(|m| pc::LogicalDeviceConfiguration { memory_limit_mb: m }).collect();
        pc::set_logical_device_configuration(name, &configs)
    })
}

/// `tf.config.get_logical_device_configuration(device)`: one entry per logical device,
/// comma-separated, each a memory limit in MiB or `-` when none; empty when not split.
#[no_mangle]
pub extern "C" fn oxf_get_logical_device_configuration(device: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| {
        let v = pc::logical_device_configuration(req_str(device, "device")?)?;
        let text = v.iter().map(|c| c.memory_limit_mb.map(|m| m.to_string()).unwrap_or_else(|| "-".into())).collect::<Vec<_>>().join(",");
        return_str(text, out)
    })
}

/// `tf.config.list_physical_devices()`: one line per device, `name\ttype\tphysical
/// index\tuuid` (CPU:0, then the GPUs `CUDA_VISIBLE_DEVICES` shows, in its order; the uuid
/// `GPU-...` is empty for the CPU). Errors: an invalid `CUDA_VISIBLE_DEVICES` or
/// `OXIFLOW_EMULATED_GPUS`.
#[no_mangle]
pub extern "C" fn oxf_list_physical_devices(out: *mut *const c_char) -> i32 {
    guard(|| return_str(physical_lines(&pc::physical_devices()?), out))
}

fn physical_lines(devices: &[pc::PhysicalDevice]) -> String {
    let lines: Vec<String> = devices.iter().map(|d| format!("{}\t{}\t{}\t{}", d.name, d.device_type, d.physical, d.uuid.as_deref().unwrap_or(""))).collect();
    lines.join("\n")
}

/// `tf.config.set_visible_devices(devices, device_type)`: `devices` is newline-separated
/// physical device names (empty: none), `device_type` `"GPU"`/`"CPU"` or null (then `devices`
/// is the whole visible list). Errors: an unknown device or one of another type, hiding the
/// CPU, a change once the runtime is initialized.
#[no_mangle]
pub extern "C" fn oxf_set_visible_devices(devices: *const c_char, device_type: *const c_char) -> i32 {
    guard(|| {
        let list = req_str(devices, "devices")?;
        let names: Vec<&str> = list.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        pc::set_visible_devices(&names, opt_str(device_type, "device_type")?)
    })
}

/// `tf.config.get_visible_devices(device_type)` (`device_type` may be null): the visible
/// physical devices in the format of [`oxf_list_physical_devices`], in TF's list order.
#[no_mangle]
pub extern "C" fn oxf_get_visible_devices(device_type: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| return_str(physical_lines(&pc::visible_devices(opt_str(device_type, "device_type")?)?), out))
}

/// `tf.config.list_logical_devices()`: the devices a session created now from the process
/// defaults gets, in the format of `oxf_session_devices`. Initializes the runtime, as in TF.
#[no_mangle]
pub extern "C" fn oxf_list_logical_devices(out: *mut *const c_char) -> i32 {
    guard(|| {
        let mut opts = parse_options(None)?;
        opts.inter_op_threads = Some(1);
        let g = std::sync::Arc::new(std::sync::RwLock::new(oxiflow_core::Graph::new()));
        let s = Session::new(g, opts)?;
        pc::mark_initialized();
        return_str(device_lines(&s), out)
    })
}

/// Forgets every process-wide setting and the initialized state (tests, notebooks).
#[no_mangle]
pub extern "C" fn oxf_reset_device_configuration() -> i32 {
    guard(|| {
        pc::reset();
        Ok(())
    })
}

/// Memory figures of one of the session's devices (`/device:GPU:0`, `GPU:0` or the full
/// name), bytes: `out[0]` in use, `out[1]` peak, `out[2]` limit, `out[3]` reserved.
/// Errors: an unknown device, a device without accounted memory (CPUs).
#[no_mangle]
pub extern "C" fn oxf_session_memory_stats(s: *const OxSession, device: *const c_char, out: *mut u64) -> i32 {
    guard(|| {
        let st = session(s)?.memory_stats(req_str(device, "device")?)?;
        if out.is_null() {
            return Err(OxiflowError::InvalidArgument("null output pointer".into()));
        }
        let v = [st.bytes_in_use, st.peak_bytes_in_use, st.bytes_limit, st.bytes_reserved];
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), out, 4) };
        Ok(())
    })
}

/// The session's `inter_op` (worker threads) and `intra_op` (threads one kernel may use)
/// counts, unset ones resolved (every core).
#[no_mangle]
pub extern "C" fn oxf_session_threads(s: *const OxSession, inter: *mut i32, intra: *mut i32) -> i32 {
    guard(|| {
        let (a, b) = session(s)?.threads();
        put(inter, a as i32)?;
        put(intra, b as i32)
    })
}

/// Why `node` is on its device in this session (placing it first if needed): the rule that
/// decided (own request from a device scope / device function / colocate_with, colocation
/// group and with whom, kernel availability, soft placement, generator, default), as text.
#[no_mangle]
pub extern "C" fn oxf_session_explain_placement(s: *const OxSession, node: i64, out: *mut *const c_char) -> i32 {
    guard(|| {
        let id = usize::try_from(node).map_err(|_| OxiflowError::InvalidArgument(format!("invalid node id {node}")))?;
        return_str(session(s)?.explain_placement(id)?, out)
    })
}

/// The explanation of every node placed so far in this session, in id order.
#[no_mangle]
pub extern "C" fn oxf_session_placement_report(s: *const OxSession, out: *mut *const c_char) -> i32 {
    guard(|| return_str(session(s)?.placement_report()?, out))
}
