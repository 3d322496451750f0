//! What the CLI's tests share: three real Redis masters, the bound on a test, a scratch
//! directory that kills what its commands started should a test fail, and waiting for a file or
//! for the tool to exit.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use quorumlock_harness::{Backend, ClusterOptions, Persistence, TestCluster};
use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use tokio::process::Child;

/// The backends the tests that run on both use.
#[allow(dead_code)]
pub const BACKENDS: [Backend; 2] = [Backend::Process, Backend::Docker];

/// Three masters that persist every write (so the restart guard lets them vote at once, and
/// fencing may use them), on `backend`; `None` when that backend is docker and docker cannot be
/// used here (and is not required).
pub async fn cluster_on(backend: Backend) -> Option<TestCluster> {
    let options = ClusterOptions::default()
        .nodes(3)
        .persistence(Persistence::AofAlways)
        .backend(backend);
    TestCluster::start_if_usable(options).await.unwrap()
}

/// Fails the test if `test` takes longer than a minute.
pub async fn bounded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the test did not finish within 60 s")
}

/// A temporary directory for the files the commands write. Dropped during a panic, it kills
/// the process group named in every `*.pgid` file in it (a command writes `$$` there: it leads
/// its own group), so that no command outlives a failed test.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Only after a failure: on success every command has exited, and its id may be reused.
        if !std::thread::panicking() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.path().extension().is_some_and(|ext| ext == "pgid") {
                let group = std::fs::read_to_string(entry.path())
                    .ok()
                    .and_then(|text| text.trim().parse::<i32>().ok())
                    .filter(|&pid| pid > 1)
                    .and_then(Pid::from_raw);
                if let Some(group) = group {
                    let _ = kill_process_group(group, Signal::KILL);
                    // And the process itself, should it not lead its group after all.
                    let _ = kill_process(group, Signal::KILL);
                }
            }
        }
    }
}

/// Waits for the command (`run`, `elect`) to exit; its status code and stderr.
pub async fn finish(run: Child) -> (Option<i32>, String) {
    let Output { status, stderr, .. } = run.wait_with_output().await.unwrap();
    (status.code(), String::from_utf8_lossy(&stderr).into_owned())
}

/// Waits until `path` exists (a command wrote it), for at most 20 s.
pub async fn wait_for_file(path: &Path) {
    let written =
        quorumlock_harness::eventually(Duration::from_secs(20), async || path.exists()).await;
    assert!(written, "{} was not written within 20 s", path.display());
}
