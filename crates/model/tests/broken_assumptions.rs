//! The fencing protocol where one of its assumptions is broken: the checker must find a
//! counterexample, and the counterexample must show the fault at work.

use quorumlock_model::action::Action;
use quorumlock_model::check::check;
use quorumlock_model::node::Restart;
use quorumlock_model::properties::{FENCE_ORDER, MUTUAL_EXCLUSION, STORE_ORDER, valid_holders};
use quorumlock_model::scenario::Scenario;

// promise: model-exclusion
#[test]
fn without_the_restart_guard_a_node_that_lost_its_data_grants_the_lock_twice() {
    let report = check(Scenario::RestartWithoutGuard.config()).unwrap();
    assert!(Scenario::RestartWithoutGuard.as_expected(&report));

    assert_eq!(
        report.violated(),
        [MUTUAL_EXCLUSION, FENCE_ORDER, STORE_ORDER]
    );
    let trace = report.discovery(MUTUAL_EXCLUSION).unwrap();
    assert_eq!(valid_holders(&trace.end), 2, "{trace}");
    assert!(
        trace.steps.iter().any(|step| matches!(
            step.action,
            Action::Restart {
                restart: Restart::WithoutData,
                ..
            }
        )),
        "{trace}"
    );
    // The lost counter hands the second holder the first one's fence again.
    let fence_trace = report.discovery(FENCE_ORDER).unwrap();
    let [earlier, later] = &fence_trace.end.grants[..] else {
        panic!("expected two grants:\n{fence_trace}");
    };
    assert!(later.fence <= earlier.fence, "{fence_trace}");
}

// promise: model-exclusion
#[test]
fn a_node_clock_faster_than_the_drift_allows_grants_the_lock_twice() {
    let report = check(Scenario::FastClock.config()).unwrap();
    assert!(Scenario::FastClock.as_expected(&report));

    assert!(report.violated().contains(&MUTUAL_EXCLUSION));
    let trace = report.discovery(MUTUAL_EXCLUSION).unwrap();
    assert_eq!(valid_holders(&trace.end), 2, "{trace}");
    // No crash is needed: the fast node's key expires while its holder is still valid.
    assert!(
        !trace
            .steps
            .iter()
            .any(|step| matches!(step.action, Action::Restart { .. })),
        "{trace}"
    );
    assert!(
        trace.to_string().contains("n0: A#1's key expires"),
        "{trace}"
    );
}
