//! The fencing protocol where its timing assumptions hold (restart guard on, every node clock
//! within the drift allowance), checked over every reachable state of 3 nodes and 2 clients.

use quorumlock_model::action::Action;
use quorumlock_model::check::check;
use quorumlock_model::node::Restart;
use quorumlock_model::properties::{
    DATA_LOSS_VOTES, FENCE_ORDER, GRANT_AFTER_EXPIRY, MUTUAL_EXCLUSION, SOME_GRANT,
    STALE_WRITE_REJECTED, STORE_ORDER, valid_holders,
};
use quorumlock_model::scenario::Scenario;

// promise: fencing-durable-nodes
#[test]
fn with_nodes_that_keep_their_data_every_safety_property_holds() {
    let report = check(Scenario::PersistentNodes.config()).unwrap();

    assert!(report.exhaustive);
    assert_eq!(report.violated(), Vec::<&str>::new());
    for example in [SOME_GRANT, GRANT_AFTER_EXPIRY, STALE_WRITE_REJECTED] {
        assert!(
            report.discovery(example).is_some(),
            "not reached: {example}"
        );
    }
}

// promise: model-exclusion
#[test]
fn with_restarts_that_lose_data_the_guard_keeps_mutual_exclusion_but_not_the_fence_order() {
    let report = check(Scenario::AssumptionsHold.config()).unwrap();

    assert!(report.exhaustive);
    assert!(
        report.discovery(MUTUAL_EXCLUSION).is_none(),
        "two valid holders:\n{}",
        report.discovery(MUTUAL_EXCLUSION).unwrap()
    );
    // The restarted node does come back and vote, so the guard is not vacuously safe.
    assert!(report.discovery(DATA_LOSS_VOTES).is_some());

    // Its lost counter lets a later holder get the same fence as an earlier one: the later
    // quorum can consist of the restarted node and a node the earlier fence never reached.
    let trace = report
        .discovery(FENCE_ORDER)
        .expect("the fence order holds");
    let [earlier, later] = &trace.end.grants[..] else {
        panic!("expected two grants:\n{trace}");
    };
    assert!(later.fence <= earlier.fence, "{trace}");
    assert!(later.counted_data_loss, "{trace}");
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
    // And then the store takes the earlier holder's late write after the later one's.
    assert!(report.discovery(STORE_ORDER).is_some());
    assert_eq!(report.violated(), [FENCE_ORDER, STORE_ORDER]);
}

#[test]
fn counter_recovery_before_a_restarted_node_votes_restores_the_fence_order() {
    let report = check(Scenario::CounterRecovery.config()).unwrap();

    assert!(report.exhaustive);
    assert_eq!(report.violated(), Vec::<&str>::new());
    for example in [
        SOME_GRANT,
        GRANT_AFTER_EXPIRY,
        STALE_WRITE_REJECTED,
        DATA_LOSS_VOTES,
    ] {
        assert!(
            report.discovery(example).is_some(),
            "not reached: {example}"
        );
    }
}

#[test]
fn clients_that_give_up_waiting_change_none_of_it() {
    let mut config = Scenario::PersistentNodes.config();
    config.give_up = true;
    config.horizon = 6;
    let report = check(config).unwrap();

    assert!(report.exhaustive);
    assert_eq!(report.violated(), Vec::<&str>::new());
}

#[test]
fn a_client_that_acquires_again_gets_a_larger_fence_every_time() {
    let mut config = Scenario::PersistentNodes.config();
    config.clients = 1;
    config.acquisitions_per_client = 3;
    let report = check(config).unwrap();

    assert!(report.exhaustive);
    assert_eq!(report.violated(), Vec::<&str>::new());
    let example = report.discovery(GRANT_AFTER_EXPIRY).unwrap();
    assert!(example.end.grants.len() >= 2, "{example}");
    assert!(valid_holders(&example.end) <= 1);
}
