//! `check:`: the tolerances (>= 0), repeats, the watchdog's timeout, and a stressor that can
//! run (`stress_sms` only with a stressor kernel, at least one unstressed launch to compare).
//! What is not written takes its default here.

use super::model::StressMode;
use super::resolved::CheckSettings;
use super::validate::{is_positive, is_timeout, Validator, MAX_TIMEOUT_SECONDS};

impl Validator<'_> {
    pub(super) fn check(&mut self) -> CheckSettings {
        let c = &self.spec.check;
        for (field, value) in [("rel_l2", c.rel_l2), ("rtol", c.rtol), ("atol", c.atol)] {
            if let Some(v) = value.filter(|v| !(is_positive(*v) || *v == 0.0)) {
                self.error(
                    &format!("check.{field}"),
                    format!("{field} = {v}; tolerances are >= 0"),
                );
            }
        }
        if c.repeat == Some(0) {
            self.error(
                "check.repeat",
                "repeat = 0 would not run the kernel; use 1 or more (2+ compares runs bitwise)",
            );
        }
        if let Some(t) = c.timeout.filter(|t| !is_positive(*t)) {
            self.error(
                "check.timeout",
                format!("timeout = {t}; it is in seconds and must be positive"),
            );
        } else if let Some(t) = c.timeout.filter(|t| !is_timeout(*t)) {
            self.error(
                "check.timeout",
                format!(
                    "timeout = {t} seconds is above the longest watchdog limit, \
                     {MAX_TIMEOUT_SECONDS} (a day); a launch that runs longer is hung"
                ),
            );
        }
        if c.stress_sms == Some(0) {
            self.error(
                "check.stress_sms",
                "stress_sms = 0 gives the stressor no SM; use 1 or more",
            );
        }
        let stressed = c.stress.is_some_and(|m| m != StressMode::None);
        if c.stress_sms.is_some() && c.stress == Some(StressMode::Jitter) {
            self.key_error(
                "check.stress_sms",
                "`stress_sms` gives SMs to a stressor kernel, and `stress: jitter` runs none",
            )
            .help = Some(
                "remove `stress_sms`: jitter sleeps the kernel's own warps at its repro::delay points"
                    .into(),
            );
        }
        if c.stress_sms.is_some() && !stressed {
            self.key_error(
                "check.stress_sms",
                "`stress_sms` is for a stressor, and `check.stress` names none",
            )
            .help = Some("add `stress: bandwidth` (or `l2`), or remove `stress_sms`".into());
        }
        if stressed && c.repeat == Some(1) {
            self.error(
                "check.repeat",
                "repeat = 1 with `stress`: every second launch is stressed, so one launch never is",
            )
            .help =
                Some("use repeat: 2 or more (an unstressed launch, then a stressed one)".into());
        }
        CheckSettings {
            rel_l2: c.rel_l2,
            rtol: c.rtol,
            atol: c.atol,
            repeat: c.repeat.unwrap_or(2),
            timeout: c.timeout.unwrap_or(10.0),
        }
    }
}
