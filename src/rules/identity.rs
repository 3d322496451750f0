//! One server, one vote, as pure logic: telling configured nodes apart by address, and which
//! configured node speaks for which running server.
//!
//! A quorum only means something if its votes come from different servers. Two checks keep a
//! server that is listed twice (the same URL twice, `127.0.0.1:P` and `localhost:P`, `/0` and
//! `/1` of one server) from voting twice:
//!
//! - at construction, two URLs with the same host (ASCII case ignored) and port, or the same
//!   Unix socket, are a configuration error, whatever their database number, credentials or
//!   scheme ([`first_duplicate`]);
//! - on every connection, each node reads its server's `run_id` (new at every server start).
//!   The first node to claim a `run_id` keeps it as long as it reaches that server; any other
//!   node that reaches the same `run_id` is refused its acquire votes ([`ClaimTable`]). A node
//!   that reaches another server gives up its old claim.
//!
//! The claim table decides which node votes; what makes a double vote impossible even while a
//! claim changes hands mid-acquisition is the acquisition's ledger, which hands at most one
//! request per `run_id` to the nodes in one attempt (`round/ledger.rs`).

use std::sync::{Arc, Mutex, PoisonError};

/// Where a node URL points, for telling duplicates apart: `host:port` with the host in ASCII
/// lower case, or a Unix socket's path. Database number, credentials and scheme are left out.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Endpoint(String);

impl Endpoint {
    /// A TCP endpoint (plain or TLS).
    pub(crate) fn tcp(host: &str, port: u16) -> Endpoint {
        Endpoint(format!("{}:{port}", host.to_ascii_lowercase()))
    }

    /// Anything else (a Unix socket), by its display form.
    pub(crate) fn other(display: String) -> Endpoint {
        Endpoint(display)
    }

    /// The endpoint as text, for error messages.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The first pair of positions `(first, second)`, `first < second`, whose endpoints are equal.
pub(crate) fn first_duplicate(endpoints: &[Endpoint]) -> Option<(usize, usize)> {
    endpoints.iter().enumerate().find_map(|(second, endpoint)| {
        endpoints
            .get(..second)?
            .iter()
            .position(|earlier| earlier == endpoint)
            .map(|first| (first, second))
    })
}

/// Who claims a server: a configured node and, for a cluster member, its shard's number (0 for
/// a node that is one server).
pub(crate) type Claimant = (usize, usize);

/// Which configured node (shard) speaks for which server (`run_id`): at most one claimant per
/// `run_id`, and one `run_id` per claimant (the last one it reached).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ClaimTable {
    claims: Vec<(Claimant, Arc<str>)>,
}

impl ClaimTable {
    /// `claimant` reached the server `run_id`. It keeps or takes the claim (giving up any
    /// claim on another server) unless another claimant holds it: then `Err(that one's node)`,
    /// and nothing changes.
    pub(crate) fn claim(&mut self, node: Claimant, run_id: &Arc<str>) -> Result<(), usize> {
        if let Some(&((owner, _), _)) = self
            .claims
            .iter()
            .find(|(owner, claimed)| *owner != node && claimed == run_id)
        {
            return Err(owner);
        }
        match self.claims.iter_mut().find(|(owner, _)| *owner == node) {
            Some((_, claimed)) => *claimed = Arc::clone(run_id),
            None => self.claims.push((node, Arc::clone(run_id))),
        }
        Ok(())
    }

    /// The claimant holding the claim on `run_id`, if any.
    #[cfg(test)]
    fn owner(&self, run_id: &str) -> Option<Claimant> {
        self.claims
            .iter()
            .find(|(_, claimed)| &**claimed == run_id)
            .map(|(owner, _)| *owner)
    }
}

/// A [`ClaimTable`] shared by the nodes of one lock.
#[derive(Debug, Default)]
pub(crate) struct Claims(Mutex<ClaimTable>);

impl Claims {
    /// See [`ClaimTable::claim`].
    pub(crate) fn claim(&self, node: Claimant, run_id: &Arc<str>) -> Result<(), usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .claim(node, run_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_same_host_and_port_is_a_duplicate_whatever_the_case() {
        let endpoints = [
            Endpoint::tcp("10.0.0.1", 6379),
            Endpoint::tcp("Redis-A", 6379),
            Endpoint::tcp("redis-a", 6380),
            Endpoint::tcp("REDIS-A", 6379),
        ];
        assert_eq!(first_duplicate(&endpoints), Some((1, 3)));
        assert_eq!(first_duplicate(&endpoints[..3]), None);
        assert_eq!(first_duplicate(&[]), None);
        assert_eq!(
            first_duplicate(&[
                Endpoint::other("/tmp/redis.sock".into()),
                Endpoint::other("/tmp/redis.sock".into())
            ]),
            Some((0, 1))
        );
    }

    #[test]
    fn an_endpoint_reads_as_its_lower_case_host_and_port_or_its_socket_path() {
        assert_eq!(Endpoint::tcp("Redis-A", 6379).as_str(), "redis-a:6379");
        assert_eq!(
            Endpoint::other("/tmp/redis.sock".into()).as_str(),
            "/tmp/redis.sock"
        );
    }

    #[test]
    fn the_shared_claims_keep_the_first_claim_on_a_server_as_the_table_does() {
        let (a, b): (Arc<str>, Arc<str>) = ("run-a".into(), "run-b".into());
        let claims = Claims::default();
        assert_eq!(claims.claim((0, 0), &a), Ok(()));
        assert_eq!(claims.claim((1, 0), &a), Err(0), "node 0 holds run-a");
        assert_eq!(claims.claim((1, 0), &b), Ok(()));
        assert_eq!(claims.claim((0, 0), &b), Err(1), "node 1 holds run-b");
    }

    #[test]
    fn a_cluster_members_shards_each_claim_their_server_and_no_other_node_takes_one() {
        let (a, b, c): (Arc<str>, Arc<str>, Arc<str>) = ("a".into(), "b".into(), "c".into());
        let mut table = ClaimTable::default();
        assert_eq!(table.claim((0, 0), &a), Ok(()));
        assert_eq!(table.claim((0, 1), &b), Ok(()), "another shard of node 0");
        assert_eq!(
            table.owner("a"),
            Some((0, 0)),
            "shard 1 took nothing of shard 0"
        );
        assert_eq!(
            table.claim((1, 0), &b),
            Err(0),
            "a shard of node 0 is no server of node 1"
        );
        assert_eq!(
            table.claim((0, 2), &a),
            Err(0),
            "two shards reaching one server"
        );
        assert_eq!(table.claim((1, 0), &c), Ok(()));
    }

    #[test]
    fn the_first_claim_on_a_server_keeps_it() {
        let (a, b): (Arc<str>, Arc<str>) = ("run-a".into(), "run-b".into());
        let mut table = ClaimTable::default();
        assert_eq!(table.claim((3, 0), &a), Ok(()));
        assert_eq!(table.claim((3, 0), &a), Ok(()), "again, on a reconnect");
        assert_eq!(table.claim((1, 0), &a), Err(3));
        assert_eq!(table.owner("run-a"), Some((3, 0)));
        // Node 3 now reaches another server (the first restarted, or its address moved):
        // the old claim is given up, and node 1 may take it.
        assert_eq!(table.claim((3, 0), &b), Ok(()));
        assert_eq!(table.claim((1, 0), &a), Ok(()));
        assert_eq!(table.claim((3, 0), &a), Err(1));
        assert_eq!(
            table.owner("run-b"),
            Some((3, 0)),
            "a refused claim changes nothing"
        );
    }

    proptest! {
        /// Whatever order nodes (and their shards) reach servers in, no two claimants ever
        /// hold a claim on the same server, each holds at most one claim, and a claim is
        /// refused only to name the node of the claimant that holds it.
        #[test]
        fn a_server_is_claimed_by_one_node_at_most(
            steps in proptest::collection::vec(((0usize..4, 0usize..2), 0u8..4), 0..64)
        ) {
            let ids: Vec<Arc<str>> = (0..4).map(|i| Arc::from(format!("run-{i}"))).collect();
            let mut table = ClaimTable::default();
            for (node, id) in steps {
                let run_id = &ids[usize::from(id)];
                let before = table.clone();
                match table.claim(node, run_id) {
                    Ok(()) => prop_assert_eq!(table.owner(run_id), Some(node)),
                    Err(owner) => {
                        let holder = before.owner(run_id);
                        prop_assert_ne!(holder, Some(node));
                        prop_assert_eq!(holder.map(|(owner, _)| owner), Some(owner));
                        prop_assert_eq!(&table, &before);
                    }
                }
                for (i, (node, claimed)) in table.claims.iter().enumerate() {
                    for (other, other_claimed) in &table.claims[i + 1..] {
                        prop_assert_ne!(node, other);
                        prop_assert_ne!(claimed, other_claimed);
                    }
                }
            }
        }
    }
}
