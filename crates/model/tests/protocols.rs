//! The lock's other protocols (`quorumlock_model::protocols`): for each, a scenario where its
//! assumption holds, in which every safety property holds and every example is reached, and one
//! where the assumption is dropped, in which the checker finds the counterexample named here. A
//! change to the checker's answer fails the scenario's test.

use quorumlock_model::protocols::election::{LEADER_READ, TERMS_GROW};
use quorumlock_model::protocols::lease::{MUTUAL_EXCLUSION, QUORUM_BACKED};
use quorumlock_model::protocols::rwlock::EXCLUSIVE_WRITER;
use quorumlock_model::protocols::semaphore::PERMITS_BOUND;
use quorumlock_model::protocols::sets::EXCLUSION;
use quorumlock_model::protocols::{Protocol, ProtocolReport};

/// Checks `protocol` and fails unless it violates exactly `violations` and reaches every example.
fn expect(protocol: Protocol, violations: &[&str]) -> ProtocolReport {
    let report = protocol.check();
    let mut violated = report.violated();
    violated.sort_unstable();
    let mut expected = violations.to_vec();
    expected.sort_unstable();
    assert_eq!(violated, expected, "{report}");
    assert_eq!(report.unreached(), Vec::<&str>::new(), "{report}");
    assert!(protocol.as_expected(&report));
    report
}

// promise: model-protocols
#[test]
fn a_keep_alive_that_writes_keys_back_only_where_the_node_may_vote_keeps_exclusion() {
    let report = expect(Protocol::KeepAlive, &[]);
    assert!(report.exhaustive);
}

// promise: model-protocols
#[test]
fn a_keep_alive_that_writes_a_key_back_on_a_node_sitting_out_makes_two_holders() {
    expect(Protocol::KeepAliveFillUnguarded, &[MUTUAL_EXCLUSION]);
}

// promise: model-protocols
#[test]
fn a_woken_waiter_that_asks_the_quorum_never_holds_without_it() {
    let report = expect(Protocol::Waiting, &[]);
    assert!(report.exhaustive);
}

// promise: model-protocols
#[test]
fn a_waiter_that_takes_the_wake_up_for_the_lock_holds_without_a_quorum() {
    expect(
        Protocol::WaitingWakeIsGrant,
        &[MUTUAL_EXCLUSION, QUORUM_BACKED],
    );
}

// promise: model-protocols
#[test]
fn a_replaced_server_that_sits_out_keeps_exclusion() {
    let report = expect(Protocol::Failover, &[]);
    assert!(report.exhaustive);
}

// promise: model-protocols
#[test]
fn a_replaced_server_that_votes_at_once_makes_two_holders() {
    expect(Protocol::FailoverUndetected, &[MUTUAL_EXCLUSION]);
}

// promise: model-protocols
#[test]
fn sets_taken_all_or_nothing_per_node_never_overlap() {
    let report = expect(Protocol::Sets, &[]);
    assert!(report.exhaustive);
}

// promise: model-protocols
#[test]
fn sets_checked_and_written_in_two_steps_overlap() {
    expect(Protocol::SetsSplitStep, &[EXCLUSION]);
}

// promise: model-protocols
#[test]
fn permits_as_slots_never_have_more_holders_than_permits() {
    let report = expect(Protocol::Semaphore, &[]);
    assert!(report.exhaustive);
}

// promise: model-protocols
#[test]
fn permits_as_a_counter_won_on_a_majority_let_three_hold_two() {
    expect(Protocol::SemaphoreCounter, &[PERMITS_BOUND]);
}

// promise: model-protocols
#[test]
fn a_read_write_lock_never_lets_a_writer_hold_beside_anyone() {
    let report = expect(Protocol::RwLock, &[]);
    assert!(report.exhaustive);
}

// promise: model-protocols
#[test]
fn a_downgrade_that_stays_exclusive_until_a_majority_converted_lets_a_reader_in() {
    expect(Protocol::RwLockLateDowngrade, &[EXCLUSIVE_WRITER]);
}

// promise: model-protocols
#[test]
fn a_reader_that_looks_before_it_adds_itself_lets_a_writer_pass_between() {
    expect(Protocol::RwLockReadChecksFirst, &[EXCLUSIVE_WRITER]);
}

// promise: model-protocols
// promise: election-term
#[test]
fn an_elections_terms_from_the_quorum_grow_with_one_leader_at_a_time() {
    let report = expect(Protocol::Election, &[]);
    assert!(report.exhaustive);
}

// promise: model-protocols
#[test]
fn a_term_taken_from_one_node_is_led_twice() {
    expect(
        Protocol::ElectionTermFromOneNode,
        &[TERMS_GROW, LEADER_READ],
    );
}
