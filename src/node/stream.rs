//! The socket under a node's connection when it is plain TCP: a stream that, asked to write,
//! first lets the runtime run the tasks already waiting, so that the requests they send go out
//! in the same write instead of one write (and, with `TCP_NODELAY`, one segment) each.
//!
//! Why: redis-rs's connection task writes as soon as it is woken, and tokio runs a task woken by
//! the running one next (its LIFO slot), so under load every request got a `writev` and a trip
//! through the loopback of its own: `TCP_NODELAY` cost the client about a third more CPU per
//! cycle than Nagle's coalescing (`docs/benchmarks.md`, "The single-node lock at saturation").
//! Deferring the write by one turn of the scheduler gathers what is ready in user space, where it
//! costs nothing to wait; an idle runtime runs the connection task again at once, so a lone
//! request still leaves without waiting for anything (unlike under Nagle, which holds it until
//! the previous segment is acknowledged).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A stream whose writes wait one turn of the scheduler before they are made.
pub(super) struct Gathering<S> {
    inner: S,
    /// The connection task has already let the others run once since it began this flush: the
    /// writes go out until the flush is done.
    deferred: bool,
}

impl<S> Gathering<S> {
    pub(super) fn new(inner: S) -> Gathering<S> {
        Gathering {
            inner,
            deferred: false,
        }
    }

    /// Ready when the write may be made now; otherwise reschedules the task behind the ones
    /// already waiting (a task woken while it runs goes to the back of the queue) and defers.
    fn defer(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.deferred {
            return Poll::Ready(());
        }
        self.deferred = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Gathering<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Gathering<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.defer(cx));
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.defer(cx));
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// The codec flushes the socket once its buffer is written: the next write is a new batch.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        if flushed.is_ready() {
            self.deferred = false;
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Wake, Waker};

    use super::*;

    /// A waker that notes it was woken.
    #[derive(Default)]
    struct Woken(AtomicBool);

    impl Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_flush_waits_one_turn_then_writes_everything_and_the_next_flush_waits_again() {
        let woken = Arc::new(Woken::default());
        let waker = Waker::from(Arc::clone(&woken));
        let mut cx = Context::from_waker(&waker);
        let mut stream = Gathering::new(Vec::new());
        let mut pinned = Pin::new(&mut stream);

        // The first write yields, and reschedules the task so that it comes back.
        assert!(pinned.as_mut().poll_write(&mut cx, b"ab").is_pending());
        assert!(woken.0.swap(false, Ordering::SeqCst));
        // Back after the others ran: this write, and the rest of the flush, go out at once.
        assert!(matches!(
            pinned.as_mut().poll_write(&mut cx, b"ab"),
            Poll::Ready(Ok(2))
        ));
        let slices = [IoSlice::new(b"c"), IoSlice::new(b"d")];
        assert!(matches!(
            pinned.as_mut().poll_write_vectored(&mut cx, &slices),
            Poll::Ready(Ok(_))
        ));
        assert!(matches!(
            pinned.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert!(!woken.0.load(Ordering::SeqCst));

        // The next batch yields once again, vectored writes alike.
        assert!(
            pinned
                .as_mut()
                .poll_write_vectored(&mut cx, &slices)
                .is_pending()
        );
        assert!(woken.0.swap(false, Ordering::SeqCst));
        assert!(matches!(
            pinned.as_mut().poll_write(&mut cx, b"e"),
            Poll::Ready(Ok(1))
        ));
        assert_eq!(stream.inner, b"abcde");
    }
}
