//! The flight recorder beside a reporter that keeps every trace: the
//! request is recorded and reported whole, its span names copied to the
//! recorder rather than taken from the report.

mod common;

use common::{new_root, trace};
use minitrace::local::LocalSpan;
use minitrace::recorder::{snapshot, FlightRecorder};

#[test]
fn a_kept_request_is_recorded_and_reported_whole() {
    let (root, trace_id) = new_root("request");
    FlightRecorder::new().enable();
    {
        let _guard = root.set_local_parent();
        let _step = LocalSpan::enter_with_local_parent(String::from("owned step"));
        let _inner = LocalSpan::enter_with_local_parent("inner");
    }
    drop(root);

    let recorded = snapshot().requests.into_iter().find(|request| request.trace_id == trace_id).unwrap();
    let names: Vec<&str> = recorded.spans.iter().map(|span| span.name.as_ref()).collect();
    assert_eq!(names, ["owned step", "inner"]);

    let mut reported: Vec<String> =
        trace(trace_id).into_iter().map(|record| record.name.into_owned()).collect();
    reported.sort();
    assert_eq!(reported, ["inner", "owned step", "request"]);
}
