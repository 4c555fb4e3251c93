//! What a terminal shows while nvcc runs (tens of seconds for a runtime or a CUTLASS kernel): a
//! spinner with what is being compiled and the elapsed time. Logs and CI get one line when a
//! step starts and one when it ends, with no control characters.

use std::io::IsTerminal;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Runs `command` to completion, its output captured (a spinner and nvcc's own lines would
/// garble each other), and returns the output and the seconds it took. `what` says what is
/// compiled ("runtime library for sm_90a", "harness.cu").
pub fn run(what: &str, command: &mut Command) -> std::io::Result<(Output, f64)> {
    let started = Instant::now();
    let spinner = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} build: {msg} ({elapsed})")
                .expect("the template parses"),
        );
        bar.set_message(format!("compiling {what}"));
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    });
    if spinner.is_none() {
        eprintln!("build: compiling {what}");
    }
    let output = command.output();
    let seconds = started.elapsed().as_secs_f64();
    if let Some(bar) = spinner {
        bar.finish_and_clear();
    }
    let output = output?;
    eprintln!(
        "build: {what} {} in {seconds:.1} s",
        if output.status.success() {
            "compiled"
        } else {
            "failed"
        }
    );
    Ok((output, seconds))
}
