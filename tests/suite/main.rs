//! The integration tests, as one test binary: every module below was once a binary of its own.
//! One binary links once instead of thirteen times, and its tests share the harness's threads:
//! the suite's time is nvcc's, and a single binary keeps both cores compiling until the end
//! instead of waiting for each binary's slowest test in turn. Run one part with
//! `scripts/test.sh cli::` (a test-name filter).

mod capture;
mod capture_segments;
mod capture_window;
mod common;

mod async_race;
mod async_race_kernels;
mod async_race_maps;
mod async_race_runtime;
mod attention_spec;
mod bisect;
mod bisect_hostile;
mod bundle;
mod bundle_hostile;
mod campaign;
mod campaign_devices;
mod campaign_hostile;
mod cli;
mod cli_help;
mod compiled_sizes;
mod custom_ops;
mod custom_upstream;
mod examples;
mod flags;
mod flags_limits;
mod flags_spellings;
mod gpu_specs;
mod hostile_battery;
mod hostile_build;
mod hostile_timeouts;
mod import_capture;
mod import_capture_hostile;
mod import_cuda;
mod import_cuda_forms;
mod import_rust;
mod import_rust_rules;
mod layers;
mod nvcc_shell;
mod queue;
mod replay_launches;
mod runtime;
mod runtime_library;
mod spec_errors;
mod spec_errors_ops;
mod spec_fuzz;
mod spec_reading;
