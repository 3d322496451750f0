//! The spans an acquisition, an extension and a release emit: one per operation, named the
//! OpenTelemetry way (`otel.name`, `otel.kind = "client"`) with its outcome, and a child per node
//! request with the node's reply and latency; a failed acquisition says why.
//!
//! Its own binary, so that the other lock tests' load and threads meet it nowhere (`cargo test`
//! runs one test binary at a time).
// Test code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The lock tests' helpers; this binary uses a few of them.
#[allow(dead_code)]
#[path = "lock/common.rs"]
mod common;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorumlock::Error;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::common::*;

/// A closed span: its name, its parent's name, and every field it was given or recorded.
#[derive(Debug, Clone)]
struct Closed {
    name: &'static str,
    parent: Option<&'static str>,
    fields: BTreeMap<String, String>,
}

impl Closed {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Keeps every span of the lock's as it closes.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Closed>>>);

impl<S> Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    /// Every level: the node spans are at debug.
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn register_callsite(
        &self,
        _metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::always()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let fields = span
            .extensions()
            .get::<Fields>()
            .map(|fields| fields.0.clone())
            .unwrap_or_default();
        self.0.lock().unwrap().push(Closed {
            name: span.name(),
            parent: span.parent().map(|parent| parent.name()),
            fields,
        });
    }
}

impl Capture {
    /// The closed spans named `name`, emptied from the capture.
    fn take(&self, name: &str) -> Vec<Closed> {
        let mut spans = self.0.lock().unwrap();
        let (taken, kept) = spans.drain(..).partition(|span| span.name == name);
        *spans = kept;
        taken
    }
}

/// Both cases in one test, under one subscriber: `cargo test` runs tests on threads of one
/// process, and tracing caches each call site's interest for every subscriber alive, so two
/// tests each setting and dropping their own could race on that cache.
#[tokio::test]
async fn spans_of_a_won_and_a_failed_acquisition() {
    let capture = Capture::default();
    let _subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    bounded(won(&capture)).await;
    bounded(failed(&capture)).await;
}

/// An acquisition, its extension and its release each emit a span with a child per node.
async fn won(capture: &Capture) {
    {
        let (_cluster, lock) = quorum_lock(3, once()).await;
        warm_up(&lock).await;
        drop(capture.take("quorumlock.acquire"));
        drop(capture.take("quorumlock.release"));
        drop(capture.take("quorumlock.node"));

        let mut guard = lock.try_acquire("traced").await.unwrap();
        // The span closes with its last child: the slowest node's request, finished in the
        // background.
        lock.settle().await;
        let acquire = capture.take("quorumlock.acquire");
        let [acquire] = acquire.as_slice() else {
            panic!("one acquire span: {acquire:#?}")
        };
        assert_eq!(acquire.field("otel.name"), Some("quorumlock acquire"));
        assert_eq!(acquire.field("otel.kind"), Some("client"));
        assert_eq!(acquire.field("resource"), Some("traced"));
        assert_eq!(acquire.field("outcome"), Some("acquired"));
        assert_eq!(acquire.field("attempts"), Some("1"));
        let left: u64 = acquire.field("validity_left_ms").unwrap().parse().unwrap();
        assert!(left > 0 && left <= 10_000, "{acquire:#?}");
        let nodes = capture.take("quorumlock.node");
        assert_eq!(nodes.len(), 3, "{nodes:#?}");
        for node in &nodes {
            assert_eq!(node.parent, Some("quorumlock.acquire"), "{node:#?}");
            assert_eq!(node.field("request"), Some("acquire"), "{node:#?}");
            assert_eq!(node.field("otel.kind"), Some("client"));
            assert!(
                node.field("addr")
                    .is_some_and(|addr| addr.starts_with("127.0.0.1:"))
            );
        }
        // The quorum's replies were read before the decision; each says ours and took time.
        let answered: Vec<_> = nodes
            .iter()
            .filter(|node| node.field("reply").is_some())
            .collect();
        assert!(answered.len() >= 2, "{nodes:#?}");
        for node in answered {
            assert_eq!(node.field("reply"), Some("ours"), "{node:#?}");
            assert!(node.field("latency_us").is_some(), "{node:#?}");
        }

        guard.extend(Duration::from_secs(5)).await.unwrap();
        lock.settle().await;
        let extend = capture.take("quorumlock.extend");
        let [extend] = extend.as_slice() else {
            panic!("one extend span: {extend:#?}")
        };
        assert_eq!(extend.field("outcome"), Some("extended"));
        assert_eq!(extend.field("ttl_ms"), Some("5000"));

        let report = guard.release().await;
        lock.settle().await;
        let release = capture.take("quorumlock.release");
        let [release] = release.as_slice() else {
            panic!("one release span: {release:#?}")
        };
        assert_eq!(
            release.field("held"),
            Some(report.held.to_string().as_str())
        );
        assert_eq!(release.field("otel.name"), Some("quorumlock release"));
    }
}

/// A failed acquisition says why, and what each node replied.
async fn failed(capture: &Capture) {
    {
        let (_cluster, lock) = quorum_lock(3, once()).await;
        warm_up(&lock).await;
        let holder = lock.try_acquire("taken").await.unwrap();
        lock.settle().await;
        drop(capture.take("quorumlock.acquire"));
        drop(capture.take("quorumlock.node"));

        let error = lock.try_acquire("taken").await.unwrap_err();
        assert!(matches!(error, Error::Held { .. }), "{error}");
        lock.settle().await;
        let acquire = capture.take("quorumlock.acquire");
        let [acquire] = acquire.as_slice() else {
            panic!("one acquire span: {acquire:#?}")
        };
        assert_eq!(acquire.field("outcome"), Some("held"));
        assert_eq!(acquire.field("validity_left_ms"), None);
        let replies: Vec<_> = capture
            .take("quorumlock.node")
            .iter()
            .filter(|node| node.field("request") == Some("acquire"))
            .filter_map(|node| node.field("reply").map(str::to_owned))
            .collect();
        assert!(replies.len() >= 2, "{replies:?}");
        assert!(
            replies.iter().all(|reply| reply == "not ours"),
            "{replies:?}"
        );
        holder.release().await;
    }
}
