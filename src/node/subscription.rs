//! One node's subscription connection, shared by every waiter of every resource of a lock: it
//! subscribes to the channels of the keys someone waits for (the release script publishes on
//! the key's name), unsubscribes when nobody does, and hands each message's channel to the
//! lock's wait list with its payload (the release's mark). It is only a hint: a waiter still wins by the quorum rule, and a message
//! lost (the connection died, the ACL forbids the channel) costs it at most the key's expiry
//! bound. A dead connection is made again with the same channels, and every channel is then
//! woken once, since a release may have been missed meanwhile.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Where a message's channel and payload go: the lock's wait list, which wakes that key's
/// waiters (the payload is the release's mark, empty when a message stands for releases that
/// may have been missed).
pub(crate) type OnMessage = Arc<dyn Fn(&[u8], &[u8]) + Send + Sync>;

/// How long a connection with no channel left stays open for the next waiter before it is
/// closed: waits that follow each other closely (a process whose queue empties between two
/// hand-offs) keep one connection, and an idle lock holds none a second later.
const LINGER: Duration = Duration::from_secs(1);

/// The longest pause between two attempts to make the connection again.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// A change to the channels, acknowledged once the server confirmed it (or it failed).
enum Change {
    Subscribe(Vec<Vec<u8>>, oneshot::Sender<()>),
    Unsubscribe(Vec<u8>),
}

/// The handle on one node's subscription task; the task ends when it is dropped.
pub(crate) struct Subscription {
    client: redis::Client,
    connect_timeout: Duration,
    on_message: OnMessage,
    /// The task's inbox, once it runs.
    changes: Mutex<Option<mpsc::UnboundedSender<Change>>>,
}

impl Subscription {
    /// A subscription to the server `client` reaches; nothing connects until the first
    /// [`subscribe`](Subscription::subscribe).
    pub(crate) fn new(
        client: redis::Client,
        connect_timeout: Duration,
        on_message: OnMessage,
    ) -> Subscription {
        Subscription {
            client,
            connect_timeout,
            on_message,
            changes: Mutex::new(None),
        }
    }

    /// Subscribes to `channels`; the returned receiver completes once the server confirmed
    /// them all, or fails when an attempt failed (then the waiter relies on the expiry bound).
    /// Outside a tokio runtime it fails at once.
    pub(crate) fn subscribe(&self, channels: Vec<Vec<u8>>) -> oneshot::Receiver<()> {
        let (done, confirmed) = oneshot::channel();
        self.send(Change::Subscribe(channels, done));
        confirmed
    }

    /// Unsubscribes from `channel`.
    pub(crate) fn unsubscribe(&self, channel: &[u8]) {
        self.send(Change::Unsubscribe(channel.to_vec()));
    }

    fn send(&self, change: Change) {
        let mut changes = self.changes.lock().unwrap_or_else(PoisonError::into_inner);
        // A task that ended (its runtime shut down) gives the change back: start a new one.
        let change = match changes.as_ref() {
            Some(sender) => match sender.send(change) {
                Ok(()) => return,
                Err(mpsc::error::SendError(change)) => change,
            },
            None => change,
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (sender, inbox) = mpsc::unbounded_channel();
        if sender.send(change).is_ok() {
            runtime.spawn(run(
                self.client.clone(),
                self.connect_timeout,
                Arc::clone(&self.on_message),
                inbox,
            ));
            *changes = Some(sender);
        }
    }
}

/// The shortest pause before making a failed connection again; it doubles up to
/// [`MAX_RECONNECT_PAUSE`].
const MIN_RECONNECT_PAUSE: Duration = Duration::from_millis(10);

/// The subscription task: applies the changes, forwards the messages, and makes the connection
/// again when it dies, until the handle is dropped. While nobody waits it holds no connection:
/// the connection is closed [`LINGER`] after the last channel was unsubscribed (the last waiter
/// left) unless someone waits again by then, and made again by the next subscription.
async fn run(
    client: redis::Client,
    connect_timeout: Duration,
    on_message: OnMessage,
    mut inbox: mpsc::UnboundedReceiver<Change>,
) {
    let mut channels = BTreeSet::<Vec<u8>>::new();
    let mut confirmations = Vec::new();
    let mut pause = MIN_RECONNECT_PAUSE;
    let mut lost = false;
    loop {
        while channels.is_empty() {
            match inbox.recv().await {
                None => return,
                Some(change) => apply(change, &mut channels, &mut confirmations),
            }
        }
        let connected = tokio::time::timeout(connect_timeout, client.get_async_pubsub()).await;
        let Ok(Ok(pubsub)) = connected else {
            tracing::debug!("subscription connection failed; waiters fall back on key expiry");
            // The waiters stop waiting for a confirmation and rely on the expiry bound.
            confirmations.clear();
            if !retry_after(pause, &mut inbox, &mut channels).await {
                return;
            }
            pause = (pause * 2).min(MAX_RECONNECT_PAUSE);
            lost = true;
            continue;
        };
        pause = MIN_RECONNECT_PAUSE;
        let (mut sink, mut stream) = pubsub.split();
        let mut restored = true;
        for channel in &channels {
            restored &= sink.subscribe(channel.as_slice()).await.is_ok();
        }
        if !restored {
            lost = true;
            continue;
        }
        for confirmation in confirmations.drain(..) {
            let _ = confirmation.send(());
        }
        if lost {
            // A release may have been published while there was no connection.
            for channel in &channels {
                on_message(channel, b"");
            }
        }
        match serve(
            &mut sink,
            &mut stream,
            &mut inbox,
            &mut channels,
            &on_message,
        )
        .await
        {
            Served::HandleDropped => return,
            // Dropping the sink and stream closes the connection.
            Served::NobodyWaits => lost = false,
            Served::ConnectionLost => {
                tracing::debug!("subscription connection lost; making it again");
                lost = true;
            }
        }
    }
}

/// Records a change while there is no connection to apply it on.
fn apply(
    change: Change,
    channels: &mut BTreeSet<Vec<u8>>,
    confirmations: &mut Vec<oneshot::Sender<()>>,
) {
    match change {
        Change::Subscribe(new, done) => {
            channels.extend(new);
            confirmations.push(done);
        }
        Change::Unsubscribe(channel) => {
            channels.remove(&channel);
        }
    }
}

/// Why [`serve`] stopped serving a connection.
enum Served {
    /// The handle is gone: the task ends.
    HandleDropped,
    /// The last channel was unsubscribed [`LINGER`] ago: the connection is closed until someone
    /// waits again.
    NobodyWaits,
    /// The connection died: it is made again for the channels left.
    ConnectionLost,
}

/// Serves one connection until it dies, nobody waits any more, or the handle is dropped.
async fn serve(
    sink: &mut PubSubSink,
    stream: &mut PubSubStream,
    inbox: &mut mpsc::UnboundedReceiver<Change>,
    channels: &mut BTreeSet<Vec<u8>>,
    on_message: &OnMessage,
) -> Served {
    // Since when nobody waits (no channel left), if nobody does now.
    let mut idle_since: Option<Instant> = None;
    loop {
        tokio::select! {
            change = inbox.recv() => match change {
                None => return Served::HandleDropped,
                Some(Change::Subscribe(new, done)) => {
                    idle_since = None;
                    let mut subscribed = true;
                    for channel in new {
                        subscribed &= sink.subscribe(channel.as_slice()).await.is_ok();
                        channels.insert(channel);
                    }
                    if !subscribed {
                        return Served::ConnectionLost;
                    }
                    let _ = done.send(());
                }
                Some(Change::Unsubscribe(channel)) => {
                    channels.remove(&channel);
                    if sink.unsubscribe(channel.as_slice()).await.is_err() {
                        return Served::ConnectionLost;
                    }
                    if channels.is_empty() {
                        idle_since = Some(Instant::now());
                    }
                }
            },
            () = linger_until(idle_since) => return Served::NobodyWaits,
            message = stream.next() => match message {
                Some(message) => {
                    if let Ok(channel) = message.get_channel::<Vec<u8>>() {
                        on_message(&channel, message.get_payload_bytes());
                    }
                }
                None => return Served::ConnectionLost,
            },
        }
    }
}

/// Completes [`LINGER`] after `idle_since`; never while someone waits (`None`).
async fn linger_until(idle_since: Option<Instant>) {
    match idle_since {
        Some(since) => tokio::time::sleep_until(since.checked_add(LINGER).unwrap_or(since)).await,
        None => std::future::pending().await,
    }
}

/// Waits `pause` before the connection is made again, keeping the channel set up to date
/// meanwhile (a subscription now is not confirmed: its waiter relies on the expiry bound).
/// `false` when the handle is gone.
async fn retry_after(
    pause: Duration,
    inbox: &mut mpsc::UnboundedReceiver<Change>,
    channels: &mut BTreeSet<Vec<u8>>,
) -> bool {
    let sleep = tokio::time::sleep(pause);
    tokio::pin!(sleep);
    let mut unconfirmed = Vec::new();
    loop {
        tokio::select! {
            () = &mut sleep => return true,
            change = inbox.recv() => match change {
                None => return false,
                Some(change) => {
                    apply(change, channels, &mut unconfirmed);
                    unconfirmed.clear();
                }
            },
        }
    }
}
