//! Fences handed out twice, pure: two holds of one resource whose writes carried the same
//! fence ([`FenceRepeat`]). The store accepts a fence equal to the last one it accepted (the
//! same holder's next write), so a fence given to two holders lets the earlier one's late write
//! in after the later one's: the lock's fences must grow strictly from one holder to the next.
//! Every write counts, accepted or rejected: the fence is the hold's, whatever the store did.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::history::Write;

/// Two holds of one resource with the same fence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FenceRepeat {
    /// The resource.
    pub resource: String,
    /// The fence both holds carried.
    pub fence: u64,
    /// The token of the hold whose write came first.
    pub first: String,
    /// The token of the other hold.
    pub second: String,
}

/// Every pair of holds of a resource that wrote with one fence (each such pair once).
pub(super) fn fence_repeats(writes: &[Write]) -> Vec<FenceRepeat> {
    let mut first: BTreeMap<(&str, u64), &str> = BTreeMap::new();
    let mut found: Vec<FenceRepeat> = Vec::new();
    for write in writes {
        let Some(fence) = write.fence else {
            continue;
        };
        let holder = *first
            .entry((write.resource.as_str(), fence))
            .or_insert(write.token.as_str());
        let repeat = holder != write.token
            && !found.iter().any(|repeat| {
                repeat.resource == write.resource
                    && repeat.fence == fence
                    && repeat.second == write.token
            });
        if repeat {
            found.push(FenceRepeat {
                resource: write.resource.clone(),
                fence,
                first: holder.to_owned(),
                second: write.token.clone(),
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_fence_per_hold_repeats_nothing() {
        let writes = vec![
            Write::new("r", 1, "a", 0, 10).fenced(1),
            Write::new("r", 1, "a", 20, 30).fenced(1),
            Write::new("r", 2, "b", 40, 50).fenced(2),
            Write::new("s", 2, "c", 40, 50).fenced(1),
        ];
        assert_eq!(fence_repeats(&writes), Vec::new());
    }

    #[test]
    fn two_holds_with_one_fence_are_a_repeat_reported_once() {
        let writes = vec![
            Write::new("r", 1, "a", 0, 10).fenced(2),
            Write::new("r", 2, "b", 20, 30).fenced(2),
            Write::new("r", 2, "b", 40, 50).fenced(2),
        ];
        assert_eq!(
            fence_repeats(&writes),
            vec![FenceRepeat {
                resource: "r".to_owned(),
                fence: 2,
                first: "a".to_owned(),
                second: "b".to_owned(),
            }]
        );
    }
}
