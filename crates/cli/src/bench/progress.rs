//! The progress bar on stderr while `quorumlock bench` runs.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress on stderr: one step per measured phase.
pub(super) struct Progress {
    bar: ProgressBar,
}

impl Progress {
    pub(super) fn new(steps: u64) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Progress { bar }
    }

    /// Shows what runs now.
    pub(super) fn step(&self, message: String) {
        self.bar.set_message(message);
    }

    /// Shows `{what}: {name} (round r/n)` for round `round` (from 0) of `rounds`.
    pub(super) fn round(&self, what: &str, name: &str, round: u64, rounds: u64) {
        self.step(format!("{what}: {name} (round {}/{rounds})", round + 1));
    }

    /// Counts `steps` steps as finished.
    pub(super) fn done(&self, steps: u64) {
        self.bar.inc(steps);
    }

    /// Removes the bar.
    pub(super) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
