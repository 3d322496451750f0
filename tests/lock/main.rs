//! The lock's behaviour against real `redis-server` processes, one module per behaviour.
//!
//! Each test starts its own cluster (stopped on drop, also when the test fails) and runs inside a
//! generous hang guard, so a bug shows up as a failure, never as a stalled CI run.
// Test and demo code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod acl;
mod acquire_default;
mod cancellation;
mod cluster;
mod configuration;
#[cfg(feature = "chaos-defects")]
mod defects;
mod detached;
mod election;
mod exclusion;
mod extend_release;
mod failover;
mod fence_recovery;
mod fenced_write;
mod fencing;
mod hand_off;
mod keep_alive;
mod node_faults;
mod node_identity;
mod nodes_from_clients;
mod per_call;
mod reentrancy;
mod restart_guard;
mod rwlock;
mod semaphore;
mod server_errors;
mod sets;
mod timing;
mod tls;
mod waiting;
