//! The Docker engine: reaching it (API version negotiated), the image the nodes run, and
//! bounded container calls (testcontainers' or the engine's own), from async code and from
//! synchronous code, with their errors.

use std::time::Duration;

use testcontainers::bollard::{self, Docker};

use crate::error::HarnessError;

/// Environment variable naming the image the docker backend runs.
pub const IMAGE_ENV: &str = "QUORUMLOCK_REDIS_IMAGE";
/// The image used when [`IMAGE_ENV`] is unset: what `scripts/redis-image.sh` builds.
pub const DEFAULT_IMAGE: &str = "quorumlock-redis:local";
/// Where images built by `scripts/redis-image.sh` keep libfaketime.
pub const LIBFAKETIME_IN_IMAGE: &str = "/usr/lib/faketime/libfaketime.so.1";
/// Bound on one Engine API call made by the harness.
pub(super) const API_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on connecting to the engine and negotiating the API version.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The image to run: `QUORUMLOCK_REDIS_IMAGE` if set and not empty, else [`DEFAULT_IMAGE`].
#[must_use]
pub fn image() -> String {
    std::env::var(IMAGE_ENV)
        .ok()
        .filter(|image| !image.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_IMAGE.to_owned())
}

/// Environment variable that makes "docker cannot be used here" an error in [`usable`] instead
/// of a skip: set to anything but empty or `0` (CI sets it, so that docker tests really run).
pub const REQUIRE_DOCKER_ENV: &str = "QUORUMLOCK_REQUIRE_DOCKER";

/// For tests that run on the docker backend when they can: whether it can be used here (the
/// engine answers and [`image`] exists). When it cannot, says why on stderr and answers
/// `Ok(false)`, unless [`REQUIRE_DOCKER_ENV`] is set: then that error.
///
/// # Errors
///
/// As [`check_available`], when docker is required or the check failed otherwise.
pub async fn usable() -> Result<bool, HarnessError> {
    match check_available(&image()).await {
        Ok(()) => Ok(true),
        Err(
            error @ (HarnessError::DockerUnavailable { .. } | HarnessError::ImageMissing { .. }),
        ) => {
            let required = std::env::var(REQUIRE_DOCKER_ENV)
                .is_ok_and(|value| !value.is_empty() && value != "0");
            if required {
                return Err(error);
            }
            eprintln!(
                "SKIPPED on docker: {error}; run scripts/redis-image.sh, or set \
                 {REQUIRE_DOCKER_ENV}=1 to make this a failure"
            );
            Ok(false)
        }
        Err(other) => Err(other),
    }
}

/// Checks that the Docker engine answers and that `image` exists locally.
///
/// # Errors
///
/// [`HarnessError::DockerUnavailable`] if the engine cannot be reached (no socket, daemon
/// down, permission denied), [`HarnessError::ImageMissing`] if it has no image called
/// `image` (build it with `scripts/redis-image.sh`).
pub async fn check_available(image: &str) -> Result<(), HarnessError> {
    let docker = connect().await?;
    ensure_image(&docker, image).await
}

/// A client for the engine named by `DOCKER_HOST` (default: the local socket), speaking the
/// newest API version both sides know. It makes the few calls testcontainers has no method for
/// (whether an image exists without pulling it, SIGKILL, the server's process id, removing a
/// container that failed to start); everything else goes through testcontainers.
pub(crate) async fn connect() -> Result<Docker, HarnessError> {
    let unavailable = |reason: String| HarnessError::DockerUnavailable { reason };
    let docker = Docker::connect_with_defaults().map_err(|err| unavailable(err.to_string()))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, docker.negotiate_version()).await {
        Ok(Ok(docker)) => Ok(docker),
        Ok(Err(err)) => Err(unavailable(err.to_string())),
        Err(_) => Err(unavailable(format!(
            "no answer from the engine within {CONNECT_TIMEOUT:?}"
        ))),
    }
}

// testcontainers pulls an image it does not find; nothing may be pulled here, so the engine
// is asked directly.
async fn ensure_image(docker: &Docker, image: &str) -> Result<(), HarnessError> {
    match tokio::time::timeout(API_TIMEOUT, docker.inspect_image(image)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        })) => Err(HarnessError::ImageMissing {
            image: image.to_owned(),
        }),
        Ok(Err(err)) => Err(HarnessError::DockerUnavailable {
            reason: err.to_string(),
        }),
        Err(_) => Err(HarnessError::DockerUnavailable {
            reason: format!("inspecting image {image} took longer than {API_TIMEOUT:?}"),
        }),
    }
}

/// Runs one container call to completion from synchronous code: on a helper thread with its
/// own runtime (so it works inside a current-thread runtime too, whose thread is the caller's),
/// waiting at most [`API_TIMEOUT`]. The thread is scoped, so `call` may borrow the container.
pub(super) fn blocking<F, Fut, E>(
    index: usize,
    action: &'static str,
    call: F,
) -> Result<(), HarnessError>
where
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("quorumlock-docker-call".into())
            .spawn_scoped(scope, move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(api(index, action, call()))
            })?;
        worker.join().unwrap_or_else(|_| {
            Err(HarnessError::Docker {
                node: index,
                action,
                source: "the helper thread panicked".into(),
            })
        })
    })
}

/// One container call for node `index` (testcontainers' or the engine's), bounded by
/// [`API_TIMEOUT`].
pub(super) async fn api<T, E>(
    index: usize,
    action: &'static str,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, HarnessError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    match tokio::time::timeout(API_TIMEOUT, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(HarnessError::Docker {
            node: index,
            action,
            source: Box::new(source),
        }),
        Err(elapsed) => Err(HarnessError::Docker {
            node: index,
            action,
            source: Box::new(elapsed),
        }),
    }
}

pub(super) fn status_of(error: &(dyn std::error::Error + Send + Sync + 'static)) -> Option<u16> {
    match error.downcast_ref::<bollard::errors::Error>() {
        Some(bollard::errors::Error::DockerResponseServerError { status_code, .. }) => {
            Some(*status_code)
        }
        _ => None,
    }
}

/// Whether a harness error is Docker refusing to start a container because its host port is
/// taken.
pub(super) fn is_port_conflict_error(error: &HarnessError) -> bool {
    matches!(error, HarnessError::Docker { source, .. } if is_port_conflict(source.as_ref()))
}

/// Whether starting a container failed because its host port is taken. The engine says so only
/// in its message, which testcontainers' errors carry in theirs.
pub(super) fn is_port_conflict(error: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    let message = error.to_string();
    message.contains("port is already allocated") || message.contains("address already in use")
}
