//! The followers' side of an [`Election`]: who leads now ([`Election::leader`], one read of
//! every node), and an [`Observer`] that hears each change of leader. An observer is woken by
//! the messages a leader's publication and its release send (one subscription per node), and
//! reads again when a key it saw expires, or a retry period after its last read at the latest
//! (a message lost to a dead connection costs no more than that).

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::Error;
use crate::node::inspect::read;
use crate::node::subscription::{OnMessage, Subscription};
use crate::outcome::{NodeOutcome, NodeReply};
use crate::rules::leader::{View, leader, next_expiry};

use super::Election;

/// The leader of an election as a quorum of its nodes held it when read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// Its term, larger than every earlier leader's.
    pub term: u64,
    /// The value it published.
    pub value: Vec<u8>,
    /// How long a quorum of the nodes still held its key when read: it leads at least until
    /// then unless it resigns, less the time since the read.
    pub held_for: Duration,
}

impl Election {
    /// Who leads now: the leader whose key and record a quorum of the nodes hold, or `None`
    /// (nobody leads, or one just won and has not yet published). One read of every node.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when fewer than a quorum of nodes answered (each that answered
    /// shows as `NotOurs`: it was only read).
    pub async fn leader(&self) -> Result<Option<Leader>, Error> {
        let quorum = self.lock.node_set().settings.quorum;
        self.read().await.map(|views| seen(&views, quorum))
    }

    /// An observer of this election's leader changes, subscribed on a quorum of the nodes (or
    /// as many as confirmed within the node timeouts) before it returns, so no change after
    /// this call is missed.
    ///
    /// ```no_run
    /// # async fn run(election: quorumlock::Election) -> Result<(), quorumlock::Error> {
    /// let mut observer = election.observe().await;
    /// loop {
    ///     match observer.changed().await? {
    ///         Some(leader) => println!("term {}: {}", leader.term, String::from_utf8_lossy(&leader.value)),
    ///         None => println!("no leader"),
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn observe(&self) -> Observer {
        let node_set = self.lock.node_set();
        let woken = Arc::new(Notify::new());
        let on_message: OnMessage = {
            let woken = Arc::clone(&woken);
            Arc::new(move |_channel: &[u8], _payload: &[u8]| woken.notify_one())
        };
        let subscriptions: Vec<Subscription> = node_set
            .nodes
            .iter()
            .map(|node| {
                node.subscription(node_set.settings.connect_timeout, Arc::clone(&on_message))
            })
            .collect();
        let channels = vec![self.key.to_vec(), self.record_key.to_vec()];
        let mut confirmations: FuturesUnordered<_> = subscriptions
            .iter()
            .map(|subscription| subscription.subscribe(channels.clone()))
            .collect();
        let quorum = node_set.settings.quorum;
        let confirmed = async {
            let mut confirmed = 0usize;
            while confirmed < quorum {
                match confirmations.next().await {
                    Some(Ok(())) => confirmed += 1,
                    Some(Err(_)) => {}
                    None => return,
                }
            }
        };
        let _ = tokio::time::timeout(node_set.request_bound(), confirmed).await;
        Observer {
            election: self.clone(),
            _subscriptions: subscriptions,
            woken,
            last: None,
            failed: false,
        }
    }

    /// What every node holds of the election, once a quorum answered.
    async fn read(&self) -> Result<Vec<View>, Error> {
        let node_set = self.lock.node_set();
        let replies = futures::future::join_all(
            node_set
                .nodes
                .iter()
                .map(|node| read(node, &self.key, &self.record_key, &self.fence_key)),
        )
        .await;
        let quorum = node_set.settings.quorum;
        if replies.iter().filter(|reply| reply.is_ok()).count() >= quorum {
            return Ok(replies.into_iter().filter_map(Result::ok).collect());
        }
        let outcomes = node_set
            .nodes
            .iter()
            .zip(replies)
            .map(|(node, reply)| NodeOutcome {
                node: node.index(),
                addr: Arc::clone(node.addr()),
                reply: match reply {
                    Ok(_) => NodeReply::NotOurs,
                    Err(error) => NodeReply::Failed(error),
                },
            })
            .collect();
        Err(Error::Unavailable { quorum, outcomes })
    }
}

/// The leader a quorum of `views` holds, as the API shows it.
fn seen(views: &[View], quorum: usize) -> Option<Leader> {
    leader(views, quorum).map(|seen| Leader {
        term: seen.record.term,
        value: seen.record.value,
        held_for: seen.held_for,
    })
}

/// Hears each change of an election's leader ([`Election::observe`]). Dropping it ends its
/// subscriptions.
pub struct Observer {
    election: Election,
    /// Held for their messages; dropped with the observer.
    _subscriptions: Vec<Subscription>,
    woken: Arc<Notify>,
    /// The term last told, once one was: `Some(None)` for "nobody leads".
    last: Option<Option<u64>>,
    /// Whether the last read failed: the next waits a retry period first.
    failed: bool,
}

impl Observer {
    /// The leader once it differs from the one last returned (the first call returns the
    /// current one): a new term, or `None` when nobody leads any more. Woken by the nodes'
    /// messages, and by the expiry of the keys it read.
    ///
    /// A leader whose grants took different fences may be returned twice: first with the
    /// fence a quorum of its grants took, then with its term once its write-back has landed
    /// ([`Leadership::term`](crate::Leadership::term)). Both are its own and larger than every
    /// earlier leader's term.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when a read found fewer than a quorum of nodes; the next call
    /// reads again a retry period later.
    pub async fn changed(&mut self) -> Result<Option<Leader>, Error> {
        let retry_period = self.election.options.retry_period;
        let quorum = self.election.lock.node_set().settings.quorum;
        if self.failed {
            tokio::time::sleep(retry_period).await;
        }
        loop {
            let woken = self.woken.notified();
            let read_at = Instant::now();
            let views = match self.election.read().await {
                Ok(views) => views,
                Err(error) => {
                    self.failed = true;
                    return Err(error);
                }
            };
            self.failed = false;
            let current = seen(&views, quorum);
            let term = current.as_ref().map(|leader| leader.term);
            if self.last != Some(term) {
                self.last = Some(term);
                return Ok(current);
            }
            // Past the soonest expiry by a millisecond, Redis' resolution.
            let wait = next_expiry(&views)
                .map_or(retry_period, |expiry| {
                    expiry.saturating_add(Duration::from_millis(1))
                })
                .min(retry_period);
            let until = read_at.checked_add(wait).unwrap_or(read_at);
            tokio::select! {
                () = woken => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    /// The changes as a stream, each as [`changed`](Observer::changed) returns it; endless.
    pub fn into_stream(self) -> impl Stream<Item = Result<Option<Leader>, Error>> {
        futures::stream::unfold(self, |mut observer| async move {
            let change = observer.changed().await;
            Some((change, observer))
        })
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("election", &String::from_utf8_lossy(&self.election.name))
            .field("last_term", &self.last)
            .finish()
    }
}
