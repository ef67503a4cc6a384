//! One HTTP/2 connection: TCP connect, TLS with ALPN `h2` (or h2c prior
//! knowledge), and the task that drives the connection's session
//! (`h2run/wire.rs`); a byte-counting socket wrapper; `fatal` when the server
//! does not speak h2.

use super::errors::{io_message, tls_error, Fail};
use super::{begin_stop, new_session, Conn, ConnCtx, ConnectFail, WorkerState};
use redline_stats::ErrorKind;
use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

// ------------------------------------------------------------ one connection

/// Connects (TCP, TLS with ALPN h2, HTTP/2 preface) and starts the connection's driver task.
pub(super) async fn connect(w: &Rc<WorkerState>, ctx: &Rc<ConnCtx>) -> Result<Conn, ConnectFail> {
    match connect_to(w, ctx, None).await? {
        Connected::H2(sr) => Ok(sr),
        // (The run's own target never falls back to HTTP/1.1.)
        Connected::H1(..) => Err(ConnectFail::Failed(
            ErrorKind::Other,
            "the server did not offer HTTP/2".into(),
        )),
    }
}

/// A connection made: HTTP/2, or (only to another origin than the run's, whose
/// server did not pick h2 by ALPN, or a cleartext one in a TLS run) the socket
/// for HTTP/1.1, counted open while it lives.
pub(super) enum Connected {
    H2(Conn),
    H1(Box<dyn Io>, OpenGuard),
}

/// As [`connect`], to the run's target or (`away`) to another origin: a
/// redirect's, or another host of a scenario.
pub(super) async fn connect_to(
    w: &Rc<WorkerState>,
    ctx: &Rc<ConnCtx>,
    away: Option<&crate::redirect::Origin>,
) -> Result<Connected, ConnectFail> {
    if w.stopping() {
        return Err(ConnectFail::Stopped);
    }
    let deadline = Instant::now() + w.plan().connect_timeout;
    tokio::select! {
        r = tokio::time::timeout_at(deadline.into(), connect_inner(w, ctx, away)) => match r {
            Ok(r) => r.map_err(|(k, m)| ConnectFail::Failed(k, m)),
            Err(_) => Err(ConnectFail::Failed(ErrorKind::ConnectTimeout, "connect timed out".into())),
        },
        _ = w.stop_n.notified() => Err(ConnectFail::Stopped),
    }
}

pub(super) async fn connect_inner(
    w: &Rc<WorkerState>,
    ctx: &Rc<ConnCtx>,
    away: Option<&crate::redirect::Origin>,
) -> Result<Connected, Fail> {
    let plan = w.plan();
    let t0 = Instant::now();
    let addr = away.map_or(plan.target.addr, |o| o.addr);
    // Another https origin: its own TLS setup, offering h2 and http/1.1 (as
    // browsers do: the protocol is the server's pick, per connection).
    let away_tls = away.and_then(|o| o.tls.as_ref()).map(|t| {
        let mut cfg = (*t.config).clone();
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        (
            tokio_rustls::TlsConnector::from(Arc::new(cfg)),
            t.server_name.clone(),
        )
    });
    let tls_to = match away {
        Some(_) => away_tls.as_ref(),
        None => w.s.tls.as_ref(),
    };
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(|e| (ErrorKind::from_io(&e, true), io_message(&e)))?;
    let tcp = sock
        .connect(addr)
        .await
        .map_err(|e| (ErrorKind::from_io(&e, true), io_message(&e)))?;
    let _ = tcp.set_nodelay(true);
    let now = Instant::now();
    w.rec
        .borrow_mut()
        .connected(now.saturating_duration_since(t0));
    if w.sc.is_some() {
        ctx.connect_took
            .set(Some(now.saturating_duration_since(t0)));
    }
    let guard = OpenGuard::new(w.clone());
    // Only the run's own target ends the run when it cannot speak HTTP/2.
    let own = away.is_none();
    let counted = Counted {
        inner: tcp,
        read: w.unattributed.clone(),
        written: w.written.clone(),
    };
    match tls_to {
        // Another cleartext origin: prior knowledge in an h2c run, else HTTP/1.1.
        None if away.is_some() && plan.wire != crate::plan::Wire::H2c => {
            Ok(Connected::H1(Box::new(counted), guard))
        }
        None => Ok(Connected::H2(start(w, ctx, guard, own, counted))),
        Some((connector, name)) => {
            let t1 = Instant::now();
            let tls = connector
                .connect(name.clone(), counted)
                .await
                .map_err(|e| tls_error(&e))?;
            w.rec
                .borrow_mut()
                .tls
                .record(Instant::now().saturating_duration_since(t1));
            if away.is_some() && tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Ok(Connected::H1(Box::new(tls), guard));
            }
            if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                let msg = format!(
                    "the server at {} did not offer HTTP/2 (ALPN h2) over TLS; \
                     run without --http2 to test it with HTTP/1.1",
                    plan.target.display
                );
                fatal(w, msg);
                return Err((ErrorKind::Other, "the server did not offer HTTP/2".into()));
            }
            Ok(Connected::H2(start(w, ctx, guard, own, tls)))
        }
    }
}

/// Starts the connection's driver task over `io` (monomorphized per socket
/// type); when it ends, the connection is dead for its streams, and a server
/// that cannot speak HTTP/2 at all ends the run.
fn start<T: Io + 'static>(
    w: &Rc<WorkerState>,
    ctx: &Rc<ConnCtx>,
    guard: OpenGuard,
    own: bool,
    io: T,
) -> Conn {
    let (conn, task) = Conn::start(new_session(), io);
    let ctx = ctx.clone();
    let w2 = w.clone();
    tokio::task::spawn_local(async move {
        let _guard = guard;
        let said = task.await;
        // The session's words start after "the server at URL ".
        if let Some(m) = said.filter(|_| own) {
            fatal(
                &w2,
                format!("the server at {} {m}", w2.plan().target.display),
            );
        }
        ctx.dead.set(true);
        ctx.closed.notify_waiters();
    });
    conn
}

/// Ends the whole run with an error (exit code 1): HTTP/2 cannot be used.
pub(super) fn fatal(w: &WorkerState, msg: String) {
    if let Ok(mut f) = w.s.fatal.lock() {
        f.get_or_insert(msg);
    }
    // The other workers see the flag within their 100 ms control tick.
    w.control.borrow().stop_all();
    if !w.stopping() {
        begin_stop(w, Instant::now());
    }
}

/// Counts a connection as open while it lives.
pub(super) struct OpenGuard(Rc<WorkerState>);

impl OpenGuard {
    fn new(w: Rc<WorkerState>) -> OpenGuard {
        w.open.set(w.open.get() + 1);
        w.peak_open.set(w.peak_open.get().max(w.open.get()));
        OpenGuard(w)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.set(self.0.open.get() - 1);
    }
}

// ------------------------------------------------------------------- plumbing

pub(super) trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// A TCP stream that counts the bytes crossing it (under TLS: the wire bytes).
pub(super) struct Counted {
    inner: TcpStream,
    read: Rc<Cell<u64>>,
    written: Rc<Cell<u64>>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let n = (buf.filled().len() - before) as u64;
            self.read.set(self.read.get() + n);
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.written.set(self.written.get() + n as u64);
        }
        r
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.written.set(self.written.get() + n as u64);
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
