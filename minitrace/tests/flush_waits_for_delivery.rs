//! `flush()` returns once the reporter has delivered what it was given,
//! even when it delivers on a thread of its own; the steady stream of
//! cycles never waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use minitrace::collector::{Config, Reporter, SpanRecord};
use minitrace::prelude::*;

/// Sends each batch's names to a slow "network" thread and, asked to,
/// waits until the thread has delivered every one.
struct Pipelined {
    to_wire: Sender<Vec<String>>,
    delivered_back: Receiver<()>,
    in_flight: usize,
    waits: Arc<AtomicUsize>,
}

impl Reporter for Pipelined {
    fn report(&mut self, spans: &[SpanRecord]) {
        if spans.is_empty() {
            return;
        }
        self.in_flight += 1;
        self.to_wire.send(spans.iter().map(|span| span.name.to_string()).collect()).unwrap();
    }

    fn wait_for_delivery(&mut self) {
        self.waits.fetch_add(1, Ordering::SeqCst);
        while self.in_flight > 0 {
            self.delivered_back.recv().unwrap();
            self.in_flight -= 1;
        }
    }
}

#[test]
fn flush_returns_once_the_reporter_has_delivered() {
    let delivered = Arc::new(Mutex::new(Vec::<String>::new()));
    let waits = Arc::new(AtomicUsize::new(0));
    let (to_wire, wire) = mpsc::channel::<Vec<String>>();
    let (back, delivered_back) = mpsc::channel();
    let sink = delivered.clone();
    thread::spawn(move || {
        for names in wire {
            thread::sleep(Duration::from_millis(50));
            sink.lock().unwrap().extend(names);
            back.send(()).unwrap();
        }
    });
    let reporter = Pipelined { to_wire, delivered_back, in_flight: 0, waits: waits.clone() };
    minitrace::set_reporter(reporter, Config::default().report_interval(Duration::from_millis(1)));
    // Cycles that no flush asked for never wait.
    thread::sleep(Duration::from_millis(50));
    let waits_before = waits.load(Ordering::SeqCst);

    for round in 0..3 {
        let name = format!("request {round}");
        drop(Span::root(name.clone(), SpanContext::random()));
        minitrace::flush();
        assert!(delivered.lock().unwrap().contains(&name), "round {round}: {:?}", delivered.lock().unwrap());
    }
    assert_eq!(waits.load(Ordering::SeqCst) - waits_before, 3, "once per flush");
}
