//! The harness runtime's C++ sources, as every artifact carries them in `runtime/`: the headers
//! harness.cu includes (`include/repro/`) and the library's own headers and its one translation
//! unit (`src/`), embedded in the binary (identical in every artifact of one repro version).
//!
//! In this crate the library's sources sit in folders by concern (`runtime/src/<concern>/`;
//! runtime/README.md says what each holds); in the artifact they are flat (`runtime/src/<file>`),
//! as they always were: build.sh hashes `runtime/src/*` into its cache key and compiles
//! `runtime/src/runtime.cu`, and the runtime's headers include one another by bare name. So every
//! file name under `src/` is unique across folders (tested below), and the artifact path drops the
//! folder.

/// One file of the runtime: where the artifact has it, where this crate has it, and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeFile {
    /// Relative to the artifact's folder: `runtime/src/dtype.cuh`,
    /// `runtime/include/repro/harness.h`.
    pub artifact_path: &'static str,
    /// Relative to this crate's folder: `runtime/src/inputs/dtype.cuh`.
    pub source_path: &'static str,
    pub text: &'static str,
}

/// A source of the library, in `runtime/src/<folder>/`; flat in the artifact.
macro_rules! src_file {
    ($folder:literal, $name:literal) => {
        RuntimeFile {
            artifact_path: concat!("runtime/src/", $name),
            source_path: concat!("runtime/src/", $folder, "/", $name),
            text: include_str!(concat!("../runtime/src/", $folder, "/", $name)),
        }
    };
}

/// A header harness.cu includes, in `runtime/include/` here and in the artifact.
macro_rules! include_file {
    ($path:literal) => {
        RuntimeFile {
            artifact_path: concat!("runtime/include/", $path),
            source_path: concat!("runtime/include/", $path),
            text: include_str!(concat!("../runtime/include/", $path)),
        }
    };
}

/// Every file of the runtime, in the order the artifact is written (and its manifest lists them).
pub const FILES: &[RuntimeFile] = &[
    src_file!("run", "base.cuh"),
    src_file!("launch", "bench.cuh"),
    src_file!("compare", "compare.cuh"),
    src_file!("run", "device.cuh"),
    src_file!("launch", "driver.cuh"),
    src_file!("compare", "device_compare.cuh"),
    src_file!("inputs", "device_inputs.cuh"),
    src_file!("reference", "cublas_gemm.cuh"),
    src_file!("reference", "device_reference.cuh"),
    src_file!("emulated", "emulated_analysis.cuh"),
    src_file!("emulated", "emulated_moduli.cuh"),
    src_file!("emulated", "emulated_slices.cuh"),
    src_file!("emulated", "emulated_gemm.cuh"),
    src_file!("emulated", "emulated_gemm_tma.cuh"),
    src_file!("emulated", "emulated_gemm_launch.cuh"),
    src_file!("emulated", "emulated_residuals.cuh"),
    src_file!("emulated", "emulated_reference.cuh"),
    src_file!("inputs", "dtype.cuh"),
    src_file!("inputs", "generators.cuh"),
    src_file!("reference", "grouped.cuh"),
    src_file!("run", "harness_main.cuh"),
    src_file!("run", "queue.cuh"),
    src_file!("run", "deferred_check.cuh"),
    src_file!("run", "operator_calls.cuh"),
    src_file!("run", "device_buffers.cuh"),
    src_file!("launch", "launch.cuh"),
    src_file!("inputs", "npy.cuh"),
    src_file!("probe", "probe.cuh"),
    src_file!("probe", "probe_ops.cuh"),
    src_file!("probe", "probe_group_scales.cuh"),
    src_file!("probe", "probe_values.cuh"),
    src_file!("reference", "reference.cuh"),
    src_file!("reference", "reference_cross_check.cuh"),
    src_file!("reference", "reference_cache.cuh"),
    src_file!("report", "report.cuh"),
    src_file!("run", "custom.cuh"),
    src_file!("probe", "probe_custom.cuh"),
    src_file!("compare", "output_order.cuh"),
    src_file!("attention", "attention.cuh"),
    src_file!("attention", "attention_reference.cuh"),
    src_file!("attention", "attention_device.cuh"),
    src_file!("run", "run_options.cuh"),
    src_file!("reference", "scales.cuh"),
    src_file!("spec", "spec_file.cuh"),
    src_file!("spec", "spec_info.cuh"),
    src_file!("launch", "stress.cuh"),
    src_file!("inputs", "tensor.cuh"),
    src_file!("launch", "tma.cuh"),
    src_file!("launch", "trace.cuh"),
    src_file!("capture", "production.cuh"),
    src_file!("capture", "replay.cuh"),
    src_file!("run", "runtime.cu"),
    include_file!("repro/harness.h"),
    include_file!("repro/reference.h"),
    include_file!("repro/delay_points.h"),
    include_file!("repro/tma.h"),
    include_file!("repro/replay.h"),
    include_file!("repro/cutlass3.h"),
    include_file!("repro/async_race.cuh"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    fn crate_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// Every file under `dir`, relative to the crate's folder, with `/` separators.
    fn files_under(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files_under(&path, out);
            } else {
                let relative = path.strip_prefix(crate_dir()).unwrap();
                out.insert(relative.to_str().unwrap().replace('\\', "/"));
            }
        }
    }

    #[test]
    fn source_file_names_are_unique_across_folders_so_the_flat_artifact_keeps_them_all() {
        let mut folders_of: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for file in FILES {
            let name = file.source_path.rsplit('/').next().unwrap();
            folders_of.entry(name).or_default().push(file.source_path);
        }
        let clashes: Vec<_> = folders_of
            .values()
            .filter(|paths| paths.len() > 1)
            .collect();
        assert!(
            clashes.is_empty(),
            "the artifact holds runtime/src flat, so a name may be in one folder only: {clashes:?}"
        );
        let artifact_paths: BTreeSet<_> = FILES.iter().map(|f| f.artifact_path).collect();
        assert_eq!(
            artifact_paths.len(),
            FILES.len(),
            "an artifact path written twice"
        );
    }

    #[test]
    fn every_file_of_the_runtime_folder_is_in_the_table_and_flat_in_the_artifact() {
        let mut on_disk = BTreeSet::new();
        for dir in ["runtime/include", "runtime/src"] {
            files_under(&crate_dir().join(dir), &mut on_disk);
        }
        let listed: BTreeSet<String> = FILES.iter().map(|f| f.source_path.to_string()).collect();
        assert_eq!(on_disk, listed, "runtime/ on disk and FILES differ");
        for file in FILES {
            let name = file.source_path.rsplit('/').next().unwrap();
            if file.source_path.starts_with("runtime/src/") {
                // Exactly one folder by concern, dropped in the artifact.
                assert_eq!(
                    file.source_path.matches('/').count(),
                    3,
                    "{}",
                    file.source_path
                );
                assert_eq!(file.artifact_path, format!("runtime/src/{name}"));
            } else {
                assert_eq!(file.artifact_path, file.source_path);
            }
        }
    }

    #[test]
    fn every_source_folder_is_described_in_the_runtime_readme() {
        let readme = std::fs::read_to_string(crate_dir().join("runtime/README.md")).unwrap();
        let folders: BTreeSet<&str> = FILES
            .iter()
            .filter_map(|f| f.source_path.strip_prefix("runtime/src/"))
            .map(|rest| rest.split('/').next().unwrap())
            .collect();
        for folder in folders {
            assert!(
                readme.contains(&format!("`src/{folder}/`")),
                "runtime/README.md does not say what src/{folder}/ holds"
            );
        }
    }

    /// The runtime's files include one another by bare name (`#include "dtype.cuh"`), which
    /// resolves in the artifact's flat `runtime/src/` (and, for include/repro's headers, beside
    /// them): a path with a folder would not.
    #[test]
    fn every_quoted_include_names_a_file_the_flat_artifact_has_beside_it() {
        let beside = |file: &RuntimeFile| -> BTreeSet<&str> {
            let folder = file.artifact_path.rsplit_once('/').unwrap().0;
            FILES
                .iter()
                .filter(|other| other.artifact_path.rsplit_once('/').unwrap().0 == folder)
                .map(|other| other.artifact_path.rsplit('/').next().unwrap())
                .collect()
        };
        for file in FILES {
            for line in file.text.lines() {
                let Some(rest) = line.trim_start().strip_prefix("#include \"") else {
                    continue;
                };
                let included = rest.split('"').next().unwrap();
                assert!(
                    beside(file).contains(included),
                    "{} includes \"{included}\", which is not beside it in the artifact",
                    file.source_path
                );
            }
        }
    }
}
