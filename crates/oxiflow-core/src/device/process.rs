//! Process-wide device configuration, TF2's `tf.config` calls: soft placement, placement
//! logging, visible devices, memory growth, a memory fraction and logical (virtual) devices,
//! set before the runtime is initialized and used as the defaults of every session created afterwards
//! ([`SessionOptions::from_process_defaults`]). As in TF (`context.py`), physical-device
//! settings are refused once the runtime is initialized (here: once a session was created
//! from the process defaults or the logical devices were listed), while the soft-placement
//! and logging switches may change at any time.
//!
//! Physical devices are `/physical_device:CPU:0` and `/physical_device:GPU:k` for each GPU
//! `CUDA_VISIBLE_DEVICES` shows (emulated GPUs, `OXIFLOW_EMULATED_GPUS=N`, count as physical).

use crate::device::config::{cuda_visible_devices, GpuOptions, CUDA_VISIBLE_DEVICES};
use crate::device::{emulated_gpus_from_env, DeviceType};
use crate::error::{OxiflowError, Result};
use crate::session::SessionOptions;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// What the `tf.config` calls have set.
#[derive(Clone, Debug, Default)]
struct ProcessConfig {
    soft_device_placement: Option<bool>,
    log_device_placement: Option<bool>,
    /// by physical GPU index
    memory_growth: BTreeMap<usize, bool>,
    memory_fraction: Option<f64>,
    /// `set_logical_device_configuration(CPU:0, [...])`: this many logical CPUs
    logical_cpus: Option<usize>,
    /// by physical GPU index: one memory limit (MiB) per virtual GPU
    virtual_gpus: BTreeMap<usize, Vec<u64>>,
    /// `set_visible_devices`: the visible physical devices as (type, index), in the order
    /// TF keeps them; `None`: every physical device.
    visible: Option<Vec<(DeviceType, usize)>>,
    initialized: bool,
}

static CONFIG: Mutex<Option<ProcessConfig>> = Mutex::new(None);

fn config() -> MutexGuard<'static, Option<ProcessConfig>> {
    CONFIG.lock().unwrap_or_else(|p| p.into_inner())
}

fn with<T>(f: impl FnOnce(&mut ProcessConfig) -> T) -> T {
    let mut g = config();
    f(g.get_or_insert_with(ProcessConfig::default))
}

/// A physical device as `tf.config.list_physical_devices` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhysicalDevice {
    /// `/physical_device:GPU:0`
    pub name: String,
    /// `CPU` or `GPU`
    pub device_type: DeviceType,
    /// Index among the devices of its type (for a GPU: the CUDA-visible index).
    pub index: usize,
    /// For a GPU, the physical (emulated) GPU behind it, after `CUDA_VISIBLE_DEVICES`.
    pub physical: usize,
    /// For a GPU, its UUID (`GPU-<uuid>`, as nvidia-smi prints it and `CUDA_VISIBLE_DEVICES`
    /// accepts); `None` for the CPU.
    pub uuid: Option<String>,
}

/// `tf.config.list_physical_devices()`: CPU:0 then the GPUs `CUDA_VISIBLE_DEVICES` shows,
/// in its order (indices or UUIDs), each GPU with its UUID: emulated GPUs, or else the real
/// ones of [`crate::device::provider`] (the driver applied `CUDA_VISIBLE_DEVICES` to those).
/// Errors: a bad `OXIFLOW_EMULATED_GPUS` or `CUDA_VISIBLE_DEVICES` entry.
pub fn physical_devices() -> Result<Vec<PhysicalDevice>> {
    let present = emulated_gpus_from_env()?;
    let env = std::env::var(CUDA_VISIBLE_DEVICES).ok();
    let source = crate::device::provider::gpu_source(present);
    let visible = match source {
        crate::device::provider::GpuSource::Emulated(n) => cuda_visible_devices(env.as_deref(), n).ids,
        crate::device::provider::GpuSource::Real(p) => (0..p.gpus().len()).collect(),
    };
    let mut v = vec![PhysicalDevice { name: "/physical_device:CPU:0".into(), device_type: DeviceType::Cpu, index: 0, physical: 0, uuid: None }];
    for (k, &p) in visible.iter().enumerate() {
        let uuid = Some(match source {
            crate::device::provider::GpuSource::Emulated(_) => crate::device::config::emulated_gpu_uuid(p),
            crate::device::provider::GpuSource::Real(r) => r.gpus()[p].uuid.clone(),
        });
        v.push(PhysicalDevice { name: format!("/physical_device:GPU:{k}"), device_type: DeviceType::Gpu, index: k, physical: p, uuid });
    }
    Ok(v)
}

/// Finds a physical device by its name (`/physical_device:GPU:0`; `GPU:0` and
/// `/device:GPU:0` are accepted too).
fn physical(name: &str) -> Result<PhysicalDevice> {
    let short = name.trim().trim_start_matches("/physical_device:").trim_start_matches("/device:").to_ascii_uppercase();
    physical_devices()?
        .into_iter()
        .find(|d| format!("{}:{}", d.device_type, d.index) == short)
        .ok_or_else(|| OxiflowError::InvalidArgument(format!("Unrecognized device: {name} (physical devices: {})", names())))
}

fn names() -> String {
    physical_devices().map(|v| v.iter().map(|d| d.name.clone()).collect::<Vec<_>>().join(", ")).unwrap_or_default()
}

fn check_not_initialized(c: &ProcessConfig, what: &str) -> Result<()> {
    if c.initialized {
        return Err(OxiflowError::FailedPrecondition(format!("{what} cannot be modified after being initialized")));
    }
    Ok(())
}

/// `tf.config.set_soft_device_placement`: the default `allow_soft_placement` of new sessions.
pub fn set_soft_device_placement(on: bool) {
    with(|c| c.soft_device_placement = Some(on));
}

/// `tf.config.get_soft_device_placement` (false until set: TF1 sessions' default).
pub fn soft_device_placement() -> bool {
    with(|c| c.soft_device_placement.unwrap_or(false))
}

/// `tf.debugging.set_log_device_placement`: the default `log_device_placement` of new sessions.
pub fn set_log_device_placement(on: bool) {
    with(|c| c.log_device_placement = Some(on));
}

/// Whether placement logging is on for new sessions.
pub fn log_device_placement() -> bool {
    with(|c| c.log_device_placement.unwrap_or(false))
}

/// `tf.config.experimental.set_memory_growth(device, on)`. Errors (TF's): not a GPU, virtual
/// devices configured on it, the runtime already initialized, an unknown device.
pub fn set_memory_growth(device: &str, on: bool) -> Result<()> {
    let d = physical(device)?;
    if d.device_type != DeviceType::Gpu {
        return Err(OxiflowError::InvalidArgument(format!("Cannot set memory growth on non-GPU devices ({})", d.name)));
    }
    with(|c| {
        if c.virtual_gpus.contains_key(&d.index) {
            return Err(OxiflowError::InvalidArgument(format!("Cannot set memory growth on device when virtual devices configured ({})", d.name)));
        }
        check_not_initialized(c, "Physical devices")?;
        c.memory_growth.insert(d.index, on);
        Ok(())
    })
}

/// `tf.config.experimental.get_memory_growth(device)`.
pub fn memory_growth(device: &str) -> Result<bool> {
    let d = physical(device)?;
    Ok(with(|c| c.memory_growth.get(&d.index).copied().unwrap_or(false)))
}

/// `tf.config.gpu.set_per_process_memory_fraction(f)` (TF 2.0's API; TF1's
/// `per_process_gpu_memory_fraction`): each GPU's limit is `f` of its memory. `0 < f <= 1`.
pub fn set_memory_fraction(f: f64) -> Result<()> {
    crate::device::config::memory_limit(1 << 30, Some(f))?;
    with(|c| {
        check_not_initialized(c, "Physical devices")?;
        c.memory_fraction = Some(f);
        Ok(())
    })
}

/// The fraction set with [`set_memory_fraction`], if any.
pub fn memory_fraction() -> Option<f64> {
    with(|c| c.memory_fraction)
}

/// One entry of `tf.config.set_logical_device_configuration`: a memory limit in MiB (required
/// for a GPU, not allowed for a CPU).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct LogicalDeviceConfiguration {
    pub memory_limit_mb: Option<u64>,
}

/// Most logical devices one physical device may be split into (a session's CPU-device
/// bound, `MAX_CPU_DEVICES`).
pub const MAX_LOGICAL_DEVICES: usize = crate::session::MAX_CPU_DEVICES;

/// Refuses more than [`MAX_LOGICAL_DEVICES`] logical devices for `device` (an
/// `InvalidArgument` naming both); callers that build the list from a count check it first.
pub fn check_logical_device_count(count: usize, device: &str) -> Result<()> {
    if count > MAX_LOGICAL_DEVICES {
        return Err(OxiflowError::InvalidArgument(format!(
            "set_logical_device_configuration: {count} logical devices asked of {device}, at most {MAX_LOGICAL_DEVICES}"
        )));
    }
    Ok(())
}

/// `tf.config.set_logical_device_configuration(device, configs)`: splits CPU:0 into
/// `configs.len()` logical CPUs, or a GPU into one virtual GPU per entry, each with its
/// memory limit. Errors (TF's): a GPU entry without `memory_limit`, a CPU entry with one,
/// memory growth already set on the GPU, an empty list, more than [`MAX_LOGICAL_DEVICES`]
/// entries, the runtime already initialized.
pub fn set_logical_device_configuration(device: &str, configs: &[LogicalDeviceConfiguration]) -> Result<()> {
    let d = physical(device)?;
    if configs.is_empty() {
        return Err(OxiflowError::InvalidArgument(format!("set_logical_device_configuration: no logical devices given for {}", d.name)));
    }
    check_logical_device_count(configs.len(), &d.name)?;
    with(|c| {
        check_not_initialized(c, "Virtual devices")?;
        if d.device_type == DeviceType::Cpu {
            if configs.iter().any(|x| x.memory_limit_mb.is_some()) {
                return Err(OxiflowError::InvalidArgument("Setting memory limit on CPU virtual devices is currently not supported".into()));
            }
            c.logical_cpus = Some(configs.len());
        } else {
            let mut limits = Vec::new();
            for x in configs {
                match x.memory_limit_mb {
                    Some(mb) if mb > 0 => limits.push(mb),
                    _ => return Err(OxiflowError::InvalidArgument("Setting memory limit is required for GPU virtual devices".into())),
                }
            }
            if c.memory_growth.get(&d.index).copied().unwrap_or(false) {
                return Err(OxiflowError::InvalidArgument(format!("Cannot set memory growth on device when virtual devices configured ({})", d.name)));
            }
            c.virtual_gpus.insert(d.index, limits);
        }
        Ok(())
    })
}

/// `tf.config.get_logical_device_configuration(device)`: the configured split, empty when none.
pub fn logical_device_configuration(device: &str) -> Result<Vec<LogicalDeviceConfiguration>> {
    let d = physical(device)?;
    Ok(with(|c| {
        if d.device_type == DeviceType::Cpu {
            vec![LogicalDeviceConfiguration::default(); c.logical_cpus.unwrap_or(0)]
        } else {
            c.virtual_gpus.get(&d.index).map(|v| v.iter().map(|&mb| LogicalDeviceConfiguration { memory_limit_mb: Some(mb) }).collect()).unwrap_or_default()
        }
    }))
}

fn key(d: &PhysicalDevice) -> (DeviceType, usize) {
    (d.device_type, d.index)
}

/// The visible physical devices among `phys` under `c`'s setting, in TF's list order.
fn visible_of(c: &ProcessConfig, phys: &[PhysicalDevice]) -> Vec<PhysicalDevice> {
    match &c.visible {
        None => phys.to_vec(),
        Some(keys) => keys.iter().filter_map(|k| phys.iter().find(|d| &key(d) == k).cloned()).collect(),
    }
}

/// `tf.config.set_visible_devices(devices, device_type)`: the physical devices (names such as
/// `/physical_device:GPU:1`; `GPU:1` works too) the runtime will use. With a `device_type`
/// (`"GPU"`, `"CPU"`, any case) only that type's visibility changes, to exactly `devices`
/// (an empty list hides every GPU); without one, `devices` is the whole visible list. Sessions
/// created afterwards from the process defaults get the visible GPUs as `GPU:0, GPU:1, ...`
/// in physical order (TF's `visible_device_list`), and no GPU when none is visible
/// (`device_count {"GPU": 0}`).
///
/// Errors: an unknown device or one not of `device_type` (`Unrecognized device: ...`); hiding
/// the CPU (TF's runtime then fails with `No CPU devices are available in this process`; here
/// the call is refused); any change once the runtime is initialized (a session was created
/// or the logical devices listed): `Visible devices cannot be modified after being
/// initialized` (FailedPrecondition; setting the current list again is not a change).
pub fn set_visible_devices(devices: &[&str], device_type: Option<&str>) -> Result<()> {
    let phys = physical_devices()?;
    let device_type = device_type.map(|t| t.trim().to_ascii_uppercase());
    let mut chosen: Vec<PhysicalDevice> = Vec::new();
    for &name in devices {
        let d = physical(name)?;
        if let Some(t) = &device_type {
            if d.device_type.as_str() != t {
                return Err(OxiflowError::InvalidArgument(format!("Unrecognized device: {name} (it is a {} device, not {t})", d.device_type)));
            }
        }
        if !chosen.contains(&d) {
            chosen.push(d);
        }
    }
    with(|c| {
        let current = visible_of(c, &phys);
        let mut new: Vec<PhysicalDevice> = match &device_type {
            Some(t) => current.iter().filter(|d| d.device_type.as_str() != t).cloned().collect(),
            None => Vec::new(),
        };
        new.extend(chosen);
        if new == current {
            return Ok(());
        }
        check_not_initialized(c, "Visible devices")?;
        if !new.iter().any(|d| d.device_type == DeviceType::Cpu) {
            return Err(OxiflowError::InvalidArgument(
                "No CPU devices are available in this process: set_visible_devices must keep /physical_device:CPU:0 visible".into(),
            ));
        }
        c.visible = Some(new.iter().map(key).collect());
        Ok(())
    })
}

/// `tf.config.get_visible_devices(device_type)`: the visible physical devices (all of them
/// until [`set_visible_devices`] is called), optionally only those of one type (any case).
/// Errors: a bad `OXIFLOW_EMULATED_GPUS` or `CUDA_VISIBLE_DEVICES`.
pub fn visible_devices(device_type: Option<&str>) -> Result<Vec<PhysicalDevice>> {
    let phys = physical_devices()?;
    let all = with(|c| visible_of(c, &phys));
    Ok(match device_type.map(|t| t.trim().to_ascii_uppercase()) {
        Some(t) => all.into_iter().filter(|d| d.device_type.as_str() == t).collect(),
        None => all,
    })
}

/// Marks the runtime initialized (a session was created from the process defaults, or the
/// logical devices were listed): physical-device settings are refused from now on.
pub fn mark_initialized() {
    with(|c| c.initialized = true);
}

/// Whether the runtime is initialized.
pub fn is_initialized() -> bool {
    with(|c| c.initialized)
}

/// Forgets every setting and the initialized state (tests, notebooks). Sessions already
/// created keep their devices.
pub fn reset() {
    *config() = None;
}

impl SessionOptions {
    /// Options from the process-wide settings above: soft placement, logging, and the GPU
    /// options (visible GPUs as `visible_device_list`, or no GPU; memory growth, fraction,
    /// virtual devices) and logical CPUs. Errors (TF's): memory growth set differently on two
    /// visible GPUs (`Memory growth cannot differ between GPU
    /// devices`), a memory fraction together with virtual devices.
    pub fn from_process_defaults() -> Result<SessionOptions> {
        let c = with(|c| c.clone());
        let phys = physical_devices().unwrap_or_default();
        // the visible GPUs' indices, in physical order (TF's `_compute_gpu_options`)
        let visible_gpus: Option<Vec<usize>> = c.visible.as_ref().map(|_| {
            let vis = visible_of(&c, &phys);
            phys.iter().filter(|d| d.device_type == DeviceType::Gpu && vis.contains(d)).map(|d| d.index).collect()
        });
        // TF: every visible GPU's setting, unset ones being false, must agree
        let growth: Vec<bool> = match &visible_gpus {
            _ if c.memory_growth.is_empty() => Vec::new(),
            Some(v) => v.iter().map(|k| c.memory_growth.get(k).copied().unwrap_or(false)).collect(),
            None => {
                let gpus = phys.iter().filter(|d| d.device_type == DeviceType::Gpu).count();
                (0..gpus.max(c.memory_growth.keys().last().map_or(0, |k| k + 1))).map(|k| c.memory_growth.get(&k).copied().unwrap_or(false)).collect()
            }
        };
        if growth.windows(2).any(|w| w[0] != w[1]) {
            return Err(OxiflowError::InvalidArgument("Memory growth cannot differ between GPU devices".into()));
        }
        if c.memory_fraction.is_some() && !c.virtual_gpus.is_empty() {
            return Err(OxiflowError::InvalidArgument(
                "A per-process memory fraction cannot be combined with virtual devices (set memory limits on the logical devices instead)".into(),
            ));
        }
        // one entry per session GPU, in order
        let mut virtual_devices_mb = Vec::new();
        if let Some(&last) = c.virtual_gpus.keys().last() {
            virtual_devices_mb = match &visible_gpus {
                Some(v) => v.iter().map(|k| c.virtual_gpus.get(k).cloned().unwrap_or_default()).collect(),
                None => (0..=last).map(|k| c.virtual_gpus.get(&k).cloned().unwrap_or_default()).collect(),
            };
        }
        let visible_device_list = visible_gpus.as_ref().filter(|v| !v.is_empty()).map(|v| v.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(","));
        Ok(SessionOptions {
            allow_soft_placement: c.soft_device_placement.unwrap_or(false),
            log_device_placement: c.log_device_placement.unwrap_or(false),
            cpu_count: c.logical_cpus,
            // no visible GPU: TF's device_count {"GPU": 0}
            gpu_count: visible_gpus.as_ref().filter(|v| v.is_empty()).map(|_| 0),
            gpu_options: GpuOptions {
                allow_growth: growth.first().copied().unwrap_or(false),
                per_process_gpu_memory_fraction: c.memory_fraction,
                visible_device_list,
                virtual_devices_mb,
            },
            ..SessionOptions::default()
        })
    }
}
