//! What a finished command buffer means to dotcompute: plain Rust, unit-tested on every
//! platform. The Apple layer waits on a command buffer,
//! then reads its status and error *synchronously* and hands them here (a completion
//! handler runs on a Metal thread and is not documented to have run when
//! `waitUntilCompleted` returns: reading its result straight after the wait could return
//! `Ok` for a failed buffer, the seed reports' very failure).

/// `MTLCommandBufferStatus` values (Metal's `NSUInteger` enum).
pub mod status {
    pub const COMPLETED: usize = 4;
    pub const ERROR: usize = 5;
}

/// `MTLCommandBufferError` codes after which the device cannot be trusted again in this
/// process: the GPU's watchdog (`Timeout`, 2), a GPU page fault (`PageFault`, 3), a process
/// Metal now ignores for causing earlier errors (`AccessRevoked`, 4: "ignored (for causing
/// prior/excessive GPU errors)"), and a removed device (`DeviceRemoved`, 11).
const LOST_CODES: [usize; 4] = [2, 3, 4, 11];

/// The outcome of one waited-for command buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    /// This command buffer failed; the device is still usable.
    Failed(String),
    /// The device is lost to this process: every later call is an error.
    Lost(String),
}

/// The outcome of command buffer `label` after `waitUntilCompleted`, from its status and,
/// when it failed, its error's code and description.
pub fn outcome(
    label: &str,
    status: usize,
    error_code: Option<usize>,
    description: Option<&str>,
) -> Outcome {
    match status {
        status::COMPLETED => Outcome::Completed,
        status::ERROR => {
            let what = description.unwrap_or("no description");
            let code = error_code.map_or("no code".to_string(), |c| format!("code {c}"));
            let message = format!("command buffer `{label}` failed: {what} ({code})");
            if error_code.is_some_and(|c| LOST_CODES.contains(&c)) {
                Outcome::Lost(message)
            } else {
                Outcome::Failed(message)
            }
        }
        other => Outcome::Failed(format!(
            "command buffer `{label}` was waited for but is not complete (status {other})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_failed_and_lost_command_buffers() {
        assert_eq!(
            outcome("k", status::COMPLETED, None, None),
            Outcome::Completed
        );
        let failed = outcome("k", status::ERROR, Some(1), Some("internal error"));
        assert!(
            matches!(&failed, Outcome::Failed(m) if m.contains("`k`") && m.contains("internal error") && m.contains("code 1")),
            "{failed:?}"
        );
        for code in [2, 3, 4, 11] {
            let lost = outcome("k", status::ERROR, Some(code), Some("GPU fault"));
            assert!(matches!(lost, Outcome::Lost(_)), "code {code}: {lost:?}");
        }
        assert!(matches!(
            outcome("k", status::ERROR, Some(8), None),
            Outcome::Failed(_)
        ));
        assert!(matches!(
            outcome("k", status::ERROR, None, None),
            Outcome::Failed(_)
        ));
        // Waited for, yet neither completed nor failed: never a silent success.
        for status in 0..4 {
            assert!(matches!(
                outcome("k", status, None, None),
                Outcome::Failed(_)
            ));
        }
    }
}
