//! The environment variables the harness reads, by name. (The docker backend's image variable
//! is `docker::IMAGE_ENV`, with the rest of that backend.)

/// Environment variable naming the `redis-server` binary to run.
pub const REDIS_SERVER_ENV: &str = "QUORUMLOCK_REDIS_SERVER";
/// Environment variable choosing the backend for
/// [`Backend::from_env`](crate::Backend::from_env): `process` or `docker`.
pub const BACKEND_ENV: &str = "QUORUMLOCK_BACKEND";
/// Environment variable naming `libfaketime.so.1`, for
/// [`ClusterOptions::clock_rate`](crate::ClusterOptions::clock_rate) on the process backend
/// (default: searched in the usual install locations).
pub const LIBFAKETIME_ENV: &str = "QUORUMLOCK_LIBFAKETIME";
