//! The properties checked on every reachable state: three safety properties (`always`) and three
//! examples that show the model reaches the interesting states at all (`sometimes`).

use stateright::Property;

use crate::model::FencingModel;
use crate::state::State;

/// Always: at no instant do two clients both hold a grant whose validity has not ended.
pub const MUTUAL_EXCLUSION: &str = "at most one valid holder at any instant";

/// Always: every grant's fence is greater than the fence of every grant made before it.
pub const FENCE_ORDER: &str = "fences strictly increase in grant order";

/// Always: after the store accepted a write from a holder, it accepts none from a holder granted
/// earlier.
pub const STORE_ORDER: &str = "the store never accepts an earlier holder after a later one";

/// Sometimes: a client is granted the lock.
pub const SOME_GRANT: &str = "a lock is granted";

/// Sometimes: an acquisition that started after an earlier grant's validity ended is granted.
pub const GRANT_AFTER_EXPIRY: &str = "a second grant after the first one expired";

/// Sometimes: the store rejects a holder's write made after its validity ended.
pub const STALE_WRITE_REJECTED: &str = "a stale write is rejected";

/// Sometimes: a grant's quorum counts a node that had restarted without its data (only where
/// such restarts are allowed: it shows that the restart guard, or counter recovery, lets the
/// node back in within the horizon).
pub const DATA_LOSS_VOTES: &str = "a node that lost its data votes in a later grant";

/// The names of the safety properties, in the order [`all`] lists them.
pub const SAFETY: [&str; 3] = [MUTUAL_EXCLUSION, FENCE_ORDER, STORE_ORDER];

/// The names of the non-vacuity examples, in the order [`all`] lists them.
pub const EXAMPLES: [&str; 4] = [
    SOME_GRANT,
    GRANT_AFTER_EXPIRY,
    STALE_WRITE_REJECTED,
    DATA_LOSS_VOTES,
];

/// Every property, the safety ones first.
///
/// Each condition reports only the first state it finds for its property (see
/// [`FirstDiscoveries`](crate::discoveries::FirstDiscoveries)), so that the checker keeps a shortest path.
pub fn all() -> Vec<Property<FencingModel>> {
    vec![
        Property::always(MUTUAL_EXCLUSION, |model, state| {
            !model
                .first_discoveries()
                .report(0, valid_holders(state) > 1)
        }),
        Property::always(FENCE_ORDER, |model, state| {
            !model.first_discoveries().report(1, !fences_increase(state))
        }),
        Property::always(STORE_ORDER, |model, state| {
            !model
                .first_discoveries()
                .report(2, !store_in_grant_order(state))
        }),
        Property::sometimes(SOME_GRANT, |model, state: &State| {
            model
                .first_discoveries()
                .report(3, !state.grants.is_empty())
        }),
        Property::sometimes(GRANT_AFTER_EXPIRY, |model, state| {
            model
                .first_discoveries()
                .report(4, grant_after_expiry(state))
        }),
        Property::sometimes(STALE_WRITE_REJECTED, |model, state| {
            model
                .first_discoveries()
                .report(5, stale_write_rejected(state))
        }),
        Property::sometimes(DATA_LOSS_VOTES, |model, state| {
            model.first_discoveries().report(6, data_loss_votes(state))
        }),
    ]
}

/// How many clients hold a grant that is still valid now.
pub fn valid_holders(state: &State) -> usize {
    state
        .clients
        .iter()
        .filter_map(|client| state.held_grant(client))
        .filter(|grant| state.now < grant.valid_until)
        .count()
}

/// Whether the fences of the grants strictly increase in grant order (pairwise for neighbours,
/// hence for every earlier grant).
pub fn fences_increase(state: &State) -> bool {
    state
        .grants
        .windows(2)
        .all(|pair| matches!(pair, [earlier, later] if earlier.fence < later.fence))
}

/// Whether the writes the store accepted come from holders in grant order (one holder may write
/// several times).
pub fn store_in_grant_order(state: &State) -> bool {
    let accepted = state.store.writes.iter().filter(|write| write.accepted);
    let grants: Vec<u8> = accepted.map(|write| write.grant).collect();
    grants
        .windows(2)
        .all(|pair| matches!(pair, [earlier, later] if earlier <= later))
}

/// Whether some grant's acquisition started at or after the end of an earlier grant's validity.
pub fn grant_after_expiry(state: &State) -> bool {
    state.grants.iter().enumerate().any(|(index, later)| {
        state.grants[..index]
            .iter()
            .any(|earlier| later.t0 >= earlier.valid_until)
    })
}

/// Whether the store rejected a write made after its holder's validity ended.
pub fn stale_write_rejected(state: &State) -> bool {
    state
        .store
        .writes
        .iter()
        .any(|write| write.stale && !write.accepted)
}

/// Whether some grant's quorum counted a node that had restarted without its data.
pub fn data_loss_votes(state: &State) -> bool {
    state.grants.iter().any(|grant| grant.counted_data_loss)
}
