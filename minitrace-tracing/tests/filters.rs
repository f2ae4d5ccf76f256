//! The layer behind a per-layer filter (`Targets`: INFO and up, one noisy
//! module off), beside an unfiltered `fmt` layer: what the filter leaves
//! out is not recorded, what is inside it nests under the nearest recorded
//! span, and the `fmt` layer still sees everything.

mod common;

use std::io::{self, Write};
use std::sync::Mutex;

use common::{install, trace};
use minitrace_tracing::MinitraceLayer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Layer, SubscriberExt};

/// What the `fmt` layer wrote.
static FMT_OUTPUT: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct FmtOutput;

impl Write for FmtOutput {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        FMT_OUTPUT.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn fmt_output() -> String {
    String::from_utf8_lossy(&FMT_OUTPUT.lock().unwrap()).into_owned()
}

fn setup() {
    install(|| {
        let filter =
            Targets::new().with_target("filters::noisy", LevelFilter::OFF).with_default(LevelFilter::INFO);
        let fmt = tracing_subscriber::fmt::layer().with_writer(|| FmtOutput).with_ansi(false);
        Box::new(
            tracing_subscriber::registry()
                .with(MinitraceLayer::new().with_filter(filter))
                .with(fmt.with_filter(LevelFilter::TRACE)),
        )
    });
}

mod noisy {
    #[tracing::instrument]
    pub fn chatty() {
        tracing::info!("chatter from noisy");
    }
}

#[test]
fn a_span_filtered_out_by_level_is_skipped_and_its_children_move_up() {
    setup();
    let trace = trace(|| {
        let _kept = tracing::info_span!("kept").entered();
        let _dropped = tracing::debug_span!("dropped by level").entered();
        tracing::info_span!("grandchild").in_scope(|| {});
        // `fmt` prints the spans an event is in.
        tracing::info!("under dropped");
    });
    assert!(trace.all("dropped by level").is_empty(), "{:#?}", trace.spans);
    assert_eq!(trace.parent_of("kept"), "root");
    assert_eq!(trace.parent_of("grandchild"), "kept");
    assert!(fmt_output().contains("dropped by level"), "{}", fmt_output());
}

#[test]
fn an_explicit_parent_filtered_out_gives_way_to_its_recorded_ancestor() {
    setup();
    let trace = trace(|| {
        let kept = tracing::info_span!("explicit kept");
        let hidden = tracing::debug_span!(parent: &kept, "explicit hidden");
        let visible = tracing::info_span!(parent: &hidden, "explicit visible");
        drop((kept, hidden, visible));
    });
    assert!(trace.all("explicit hidden").is_empty());
    assert_eq!(trace.parent_of("explicit visible"), "explicit kept");
}

#[test]
fn a_target_turned_off_records_neither_spans_nor_events() {
    setup();
    let trace = trace(noisy::chatty);
    assert_eq!(trace.spans.len(), 1, "{:#?}", trace.spans);
    assert!(trace.span("root").events.is_empty());
    let output = fmt_output();
    assert!(output.contains("chatty") && output.contains("chatter from noisy"), "{output}");
}

#[test]
fn events_below_the_level_are_left_out() {
    setup();
    let trace = trace(|| {
        tracing::debug!("quiet");
        tracing::info!("loud");
    });
    let names: Vec<_> = trace.span("root").events.iter().map(|event| event.name.as_ref()).collect();
    assert_eq!(names, ["loud"]);
    assert!(fmt_output().contains("quiet"));
}
