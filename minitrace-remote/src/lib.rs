//! A slow request's whole trace from every service it touched.
//!
//! Each service decides alone whether a trace is worth reporting: the one
//! that sees the symptom keeps its part, and the services it called judged
//! their own parts fast and threw them away. With minitrace's flight
//! recorder every service keeps every trace's parts for a while anyway;
//! this crate fetches them after the fact, from every process the request
//! touched, in the manner of Hindsight's *retroactive sampling* (NSDI '23):
//!
//! - requests carry [`breadcrumbs`]: where they came from and went (the
//!   listeners of the processes on their path), set and read by the
//!   middlewares;
//! - each process runs a [`Listener`] (opt-in; 127.0.0.1 unless told
//!   otherwise, and then only with a token), which takes "report trace X"
//!   requests: it reports its parts through its own reporter and passes the
//!   request on along that trace's breadcrumbs, once per process, with
//!   bounded hops, fan-out and rate;
//! - a trigger in any process starts it: a root kept for its length or an
//!   error (the recorder's triggers), or the application's call to
//!   [`Listener::fetch`]. A cause found at a leaf fetches the callers'
//!   parts too.
//!
//! A request that stays fast costs nothing more than its breadcrumb in its
//! headers: no traffic, nothing reported.

#![deny(missing_docs)]

pub mod breadcrumbs;
#[cfg(feature = "listener")]
mod listener;

#[cfg(feature = "listener")]
pub use listener::{Error, Listener, ListenerBuilder, ListenerStats, PATH};
