//! Which GPUs a campaign runs on, and a lock per GPU so that two campaigns on one machine do not
//! share one by accident (their timings would mean nothing, and their watchdogs would fire on
//! each other's load).
//!
//! GPUs are listed by `nvidia-smi` (no CUDA context is made for it) and named to each worker's
//! harness through `CUDA_VISIBLE_DEVICES`. A campaign started with `CUDA_VISIBLE_DEVICES` already
//! set keeps to those GPUs. The locks are `flock`s on files named by the GPU's UUID in a folder
//! every user can write: the kernel drops them when a campaign dies, however it dies.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::CampaignError;

/// One GPU a worker runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// What `CUDA_VISIBLE_DEVICES` names it by (the UUID when known: indices change with the
    /// variable's own order).
    pub visible_as: String,
    /// nvidia-smi's index, for people.
    pub index: String,
    pub uuid: Option<String>,
    pub name: String,
}

impl Device {
    /// `0 (NVIDIA H200)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.index, self.name)
    }
}

/// The GPUs nvidia-smi lists, kept to those `CUDA_VISIBLE_DEVICES` names when it is set. Empty
/// when nvidia-smi is missing or fails (no driver: the harness then says "no device").
pub fn visible() -> Vec<Device> {
    let output = Command::new("nvidia-smi")
        .args(["--query-gpu=index,uuid,name", "--format=csv,noheader"])
        .output();
    let Some(output) = output.ok().filter(|o| o.status.success()) else {
        return Vec::new();
    };
    let all = parse_smi(&String::from_utf8_lossy(&output.stdout));
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(list) => restrict(&all, &list),
        Err(_) => all,
    }
}

fn parse_smi(text: &str) -> Vec<Device> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ',').map(str::trim);
            let (index, uuid, name) = (fields.next()?, fields.next()?, fields.next()?);
            index.parse::<u32>().ok()?;
            Some(Device {
                visible_as: uuid.to_string(),
                index: index.to_string(),
                uuid: Some(uuid.to_string()),
                name: name.to_string(),
            })
        })
        .collect()
}

/// The GPUs of `all` that a `CUDA_VISIBLE_DEVICES`-style list names, in its order (by index,
/// UUID or a UUID's prefix, as CUDA reads it; CUDA stops at the first entry it cannot read).
fn restrict(all: &[Device], list: &str) -> Vec<Device> {
    let mut chosen = Vec::new();
    for entry in list.split(',').map(str::trim) {
        let found = all.iter().find(|d| {
            d.index == entry
                || d.uuid
                    .as_deref()
                    .is_some_and(|u| !entry.is_empty() && (u == entry || u.starts_with(entry)))
        });
        match found {
            Some(d) if !chosen.contains(d) => chosen.push(d.clone()),
            Some(_) => {}
            None => break,
        }
    }
    chosen
}

/// The GPUs `--devices` asks for (`all`, or a list of indices or UUIDs) among `visible`. With no
/// GPU visible, `all` is one worker that lets the harness find out (and say no device), and a
/// list is taken as given.
pub fn select(given: &str, visible: &[Device]) -> Result<Vec<Option<Device>>, CampaignError> {
    let bad = |why: String| -> CampaignError {
        CampaignError::Devices {
            given: given.to_string(),
            why,
        }
    };
    if given == "all" {
        if visible.is_empty() {
            return Ok(vec![None]);
        }
        return Ok(visible.iter().cloned().map(Some).collect());
    }
    let mut chosen = Vec::new();
    for entry in given.split(',').map(str::trim) {
        if entry.is_empty() {
            return Err(bad("an empty entry".into()));
        }
        if visible.is_empty() {
            if !entry.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(bad(format!("`{entry}` is not a GPU index or UUID")));
            }
            chosen.push(Some(Device {
                visible_as: entry.to_string(),
                index: entry.to_string(),
                uuid: None,
                name: "not listed: nvidia-smi found no GPU".into(),
            }));
            continue;
        }
        let found = restrict(visible, entry);
        let Some(device) = found.into_iter().next() else {
            let listed: Vec<String> = visible.iter().map(Device::label).collect();
            return Err(bad(format!(
                "no visible GPU is `{entry}` (visible: {})",
                listed.join(", ")
            )));
        };
        if chosen.contains(&Some(device.clone())) {
            return Err(bad(format!("GPU {} is named twice", device.index)));
        }
        chosen.push(Some(device));
    }
    Ok(chosen)
}

/// The GPUs `--devices` asks for, each locked for this campaign (`whoami` says who holds them)
/// unless `share`. A GPU named and held by another campaign is an error; `all` leaves the held
/// ones out, saying so, and is an error only when none is free.
pub fn take(
    given: &str,
    share: bool,
    whoami: &str,
) -> Result<(Vec<Option<Device>>, Vec<DeviceLock>), CampaignError> {
    let chosen = select(given, &visible())?;
    if share {
        return Ok((chosen, Vec::new()));
    }
    let (mut free, mut locks) = (Vec::new(), Vec::new());
    for device in chosen {
        let Some(d) = &device else {
            free.push(device);
            continue;
        };
        match lock(d, whoami) {
            Ok(held) => {
                locks.push(held);
                free.push(device);
            }
            // `all` means the GPUs free for it; a GPU named is one wanted.
            Err(e) if given == "all" => eprintln!(
                "campaign skips {}",
                e.to_string().lines().next().unwrap_or_default()
            ),
            Err(e) => return Err(e),
        }
    }
    if free.is_empty() {
        return Err(CampaignError::Devices {
            given: given.to_string(),
            why: "every visible GPU is held by another repro campaign".into(),
        });
    }
    Ok((free, locks))
}

/// A GPU held by this campaign until dropped.
pub type DeviceLock = crate::build::lock::NotedLock;

/// Where the GPU locks live: one folder for every user of the machine.
fn lock_dir() -> PathBuf {
    std::env::var_os("REPRO_GPU_LOCK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("repro-gpu-locks"))
}

/// Makes the lock folder (sticky and writable by all, like /tmp: every user's campaigns take
/// turns there) or checks the one found: it is a folder, not a link (to a folder its planter
/// controls), and when others may write it, it is sticky (so that no other user can rename or
/// remove this campaign's lock files). Its files are opened without following links
/// ([`super::folder::open_lock`]), so nothing another user plants there is written through.
fn checked_lock_dir(dir: &Path) -> Result<(), CampaignError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let refuse = |why: String| -> CampaignError {
        super::folder::refused_with(
            dir,
            None,
            why,
            "remove it (it holds only lock files, and nothing holds them when no repro campaign runs),              or give the campaign a lock folder of its own with REPRO_GPU_LOCK_DIR",
        )
    };
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(CampaignError::io("create", parent))?;
            }
            match std::fs::create_dir(dir) {
                Ok(()) => {
                    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(CampaignError::io("create", dir)(e)),
            }
        }
        Err(e) => return Err(CampaignError::io("read", dir)(e)),
        Ok(_) => {}
    }
    let meta = std::fs::symlink_metadata(dir).map_err(CampaignError::io("read", dir))?;
    if meta.file_type().is_symlink() {
        return Err(refuse(
            "the GPU lock folder is a symbolic link; refused".into(),
        ));
    }
    if !meta.is_dir() {
        return Err(refuse(format!(
            "the GPU lock folder is {}; refused",
            crate::file_kind::describe(&meta)
        )));
    }
    let mode = meta.mode();
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(refuse(format!(
            "the GPU lock folder may be written by other users (mode {:o}) but is not sticky:              any of them could replace a campaign's lock file; refused",
            mode & 0o7777
        )));
    }
    Ok(())
}

/// Takes `device` for this campaign; an error naming the holder when another campaign has it.
/// `whoami` is written into the lock file for that message.
pub fn lock(device: &Device, whoami: &str) -> Result<DeviceLock, CampaignError> {
    let dir = lock_dir();
    checked_lock_dir(&dir)?;
    let id = device.uuid.as_deref().unwrap_or(&device.visible_as);
    let name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{name}.lock"));
    let file = super::folder::open_lock(&path)?;
    crate::build::lock::try_hold(file, whoami).map_err(|holder| CampaignError::DeviceBusy {
        device: device.label(),
        holder: super::folder::one_line(&holder),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus() -> Vec<Device> {
        parse_smi("0, GPU-aaaa-1111, NVIDIA H200\n1, GPU-bbbb-2222, NVIDIA H200\n")
    }

    #[test]
    fn nvidia_smi_lines_are_read() {
        let all = gpus();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].index, "1");
        assert_eq!(all[1].visible_as, "GPU-bbbb-2222");
        assert_eq!(all[1].name, "NVIDIA H200");
    }

    #[test]
    fn cuda_visible_devices_keeps_its_order_and_stops_at_an_unknown_entry() {
        let all = gpus();
        let kept = restrict(&all, "1,GPU-aaaa");
        assert_eq!(
            kept.iter().map(|d| d.index.as_str()).collect::<Vec<_>>(),
            ["1", "0"]
        );
        assert_eq!(restrict(&all, "7,0").len(), 0);
    }

    #[test]
    fn devices_are_chosen_by_index_or_uuid() {
        let all = gpus();
        assert_eq!(select("all", &all).unwrap().len(), 2);
        let one = select("GPU-bbbb-2222", &all).unwrap();
        assert_eq!(one[0].as_ref().unwrap().index, "1");
        assert!(select("3", &all)
            .unwrap_err()
            .to_string()
            .contains("visible: 0 (NVIDIA H200)"));
        assert!(select("0,0", &all).is_err());
        assert_eq!(select("all", &[]).unwrap(), vec![None]);
        assert!(select("0;rm", &[]).is_err());
    }
}
