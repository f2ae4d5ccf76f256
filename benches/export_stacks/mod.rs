use super::workload::{work, ATTRIBUTES, CHILD, ROOT};
use super::*;

/// How a stack records one request, and how it is flushed at the end.
trait Stack: Sync {
    fn request(&self, iterations: u64);
    fn finish(&self) -> Option<u64>;
}

struct Untraced;

impl Stack for Untraced {
    fn request(&self, iterations: u64) {
        std::hint::black_box(work(iterations));
        for _ in 1..SPANS_PER_REQUEST {
            std::hint::black_box(work(iterations));
        }
    }

    fn finish(&self) -> Option<u64> {
        None
    }
}

struct Minitrace;

impl Stack for Minitrace {
    fn request(&self, iterations: u64) {
        use minitrace::prelude::*;
        let root = Span::root(ROOT, SpanContext::random()).with_properties(|| ATTRIBUTES);
        let _guard = root.set_local_parent();
        std::hint::black_box(work(iterations));
        for _ in 1..SPANS_PER_REQUEST {
            let _span = LocalSpan::enter_with_local_parent(CHILD).with_properties(|| ATTRIBUTES);
            std::hint::black_box(work(iterations));
        }
    }

    fn finish(&self) -> Option<u64> {
        minitrace::flush();
        // The reporter's sender thread may still be delivering.
        if let Some(wait) = WAIT_FOR_DELIVERY.get() {
            assert!(wait(), "delivery did not finish");
        }
        let stats = minitrace::collector::stats();
        Some(stats.dropped_queue_full + stats.dropped_by_reporter)
    }
}

/// Waits for a minitrace reporter's sender thread to finish.
type Wait = Box<dyn Fn() -> bool + Send + Sync>;
static WAIT_FOR_DELIVERY: std::sync::OnceLock<Wait> = std::sync::OnceLock::new();

struct Otel {
    tracer: opentelemetry_sdk::trace::SdkTracer,
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
}

impl Stack for Otel {
    fn request(&self, iterations: u64) {
        use opentelemetry::trace::{Span as _, TraceContextExt, Tracer};
        use opentelemetry::{Context, KeyValue};
        let attributes = || ATTRIBUTES.iter().map(|(k, v)| KeyValue::new(*k, *v));
        let mut root = self.tracer.start(ROOT);
        root.set_attributes(attributes());
        let cx = Context::current_with_span(root);
        std::hint::black_box(work(iterations));
        for _ in 1..SPANS_PER_REQUEST {
            let mut span = self.tracer.start_with_context(CHILD, &cx);
            span.set_attributes(attributes());
            std::hint::black_box(work(iterations));
            span.end();
        }
        cx.span().end();
    }

    fn finish(&self) -> Option<u64> {
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
        None
    }
}

struct Fastrace;

impl Stack for Fastrace {
    fn request(&self, iterations: u64) {
        use fastrace::prelude::*;
        let root = Span::root(ROOT, SpanContext::random()).with_properties(|| ATTRIBUTES);
        let _guard = root.set_local_parent();
        std::hint::black_box(work(iterations));
        for _ in 1..SPANS_PER_REQUEST {
            let _span = LocalSpan::enter_with_local_parent(CHILD).with_properties(|| ATTRIBUTES);
            std::hint::black_box(work(iterations));
        }
    }

    fn finish(&self) -> Option<u64> {
        fastrace::flush();
        None
    }
}

struct Tracing {
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
}

impl Stack for Tracing {
    fn request(&self, iterations: u64) {
        let root = tracing::info_span!("request", http.route = ATTRIBUTES[0].1, step.kind = ATTRIBUTES[1].1);
        let _root = root.enter();
        std::hint::black_box(work(iterations));
        for _ in 1..SPANS_PER_REQUEST {
            let span = tracing::info_span!("step", http.route = ATTRIBUTES[0].1, step.kind = ATTRIBUTES[1].1);
            let _span = span.enter();
            std::hint::black_box(work(iterations));
        }
    }

    fn finish(&self) -> Option<u64> {
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
        None
    }
}

fn otlp_exporter(url: &str) -> opentelemetry_otlp::SpanExporter {
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()
        .expect("opentelemetry-otlp's exporter")
}

fn otel_provider(url: &str) -> opentelemetry_sdk::trace::SdkTracerProvider {
    let resource = opentelemetry_sdk::Resource::builder().with_service_name("export-bench").build();
    opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(otlp_exporter(url))
        .with_resource(resource)
        .build()
}

/// A minitrace reporter that encodes as the real one would, into a
/// reused buffer, and sends nothing.
struct EncodeOnly<F>(F);

impl<F: FnMut(&[minitrace::collector::SpanRecord]) + Send + 'static> minitrace::collector::Reporter
    for EncodeOnly<F>
{
    fn report(&mut self, spans: &[minitrace::collector::SpanRecord]) {
        (self.0)(spans);
    }
}

fn minitrace_config(lossless: bool) -> minitrace::collector::Config {
    minitrace::collector::Config::default().wait_when_queue_full(lossless)
}

pub fn run(name: &str) {
    let port = env_u64("EXPORT_PORT", 0);
    let requests = env_u64("EXPORT_REQUESTS", 100_000);
    let producers = env_u64("EXPORT_PRODUCERS", 1);
    let iterations = env_u64("EXPORT_ITERATIONS", 100);
    let otlp_url = format!("http://127.0.0.1:{port}/v1/traces");
    let stack: Box<dyn Stack> = match name {
        "untraced" => Box::new(Untraced),
        "minitrace-otlp" | "minitrace-otlp-lossless" => {
            // Knobs for choosing the defaults: request size and compression.
            let mut builder = minitrace_otlp::OtlpReporter::builder()
                .env(|_| None)
                .endpoint(format!("http://127.0.0.1:{port}"))
                .service_name("export-bench");
            if let Some(spans) = std::env::var("EXPORT_OTLP_MAX_SPANS").ok().and_then(|v| v.parse().ok()) {
                builder = builder.max_spans_per_request(spans);
            }
            if std::env::var("EXPORT_OTLP_GZIP").is_ok_and(|v| v == "1") {
                builder = builder.compression(minitrace_otlp::Compression::Gzip);
            }
            let reporter = builder.build().unwrap();
            let stats = reporter.stats();
            let _ = WAIT_FOR_DELIVERY.set(Box::new(move || stats.wait_for_delivery(Duration::from_secs(60))));
            minitrace::set_reporter(reporter, minitrace_config(name.ends_with("lossless")));
            Box::new(Minitrace)
        }
        "minitrace-discard" => {
            minitrace::set_reporter(
                EncodeOnly(|_: &[minitrace::collector::SpanRecord]| {}),
                minitrace_config(false),
            );
            Box::new(Minitrace)
        }
        "floor-otlp" => {
            let mut reporter = minitrace_otlp::OtlpReporter::builder()
                .env(|_| None)
                .endpoint(format!("http://127.0.0.1:{port}"))
                .service_name("export-bench")
                .build()
                .unwrap();
            let mut sink = 0usize;
            let encode = move |spans: &[minitrace::collector::SpanRecord]| {
                reporter.encode_each(spans, |body, _| sink += body.len());
                std::hint::black_box(sink);
            };
            minitrace::set_reporter(EncodeOnly(encode), minitrace_config(false));
            Box::new(Minitrace)
        }
        "minitrace-jaeger" => {
            let addr = format!("127.0.0.1:{port}").parse().unwrap();
            let reporter = minitrace_jaeger::JaegerReporter::http(addr, "export-bench");
            let stats = reporter.stats();
            let _ = WAIT_FOR_DELIVERY.set(Box::new(move || stats.wait_for_delivery(Duration::from_secs(60))));
            minitrace::set_reporter(reporter, minitrace_config(false));
            Box::new(Minitrace)
        }
        "floor-jaeger" => {
            let addr = format!("127.0.0.1:{port}").parse().unwrap();
            let mut reporter = minitrace_jaeger::JaegerReporter::http(addr, "export-bench");
            let mut sink = 0usize;
            let encode = move |spans: &[minitrace::collector::SpanRecord]| {
                reporter.encode_each(spans, |body, _| sink += body.len());
                std::hint::black_box(sink);
            };
            minitrace::set_reporter(EncodeOnly(encode), minitrace_config(false));
            Box::new(Minitrace)
        }
        "otel-sdk" => {
            use opentelemetry::trace::TracerProvider as _;
            let provider = otel_provider(&otlp_url);
            Box::new(Otel { tracer: provider.tracer("export-bench"), provider })
        }
        "fastrace-otel" => {
            let resource = opentelemetry_sdk::Resource::builder().with_service_name("export-bench").build();
            let scope = opentelemetry::InstrumentationScope::builder("export-bench").build();
            let reporter = fastrace_opentelemetry::OpenTelemetryReporter::new(
                otlp_exporter(&otlp_url),
                Cow::Owned(resource),
                scope,
            );
            fastrace::set_reporter(reporter, fastrace::collector::Config::default());
            Box::new(Fastrace)
        }
        "tracing-otel" => {
            use opentelemetry::trace::TracerProvider as _;
            use tracing_subscriber::layer::SubscriberExt;
            let provider = otel_provider(&otlp_url);
            let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("export-bench"));
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
            Box::new(Tracing { provider })
        }
        other => panic!("unknown stack {other}"),
    };
    let cpu_start = cpu::process_ns();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..producers {
            let stack = &*stack;
            scope.spawn(move || {
                for _ in 0..requests {
                    stack.request(iterations);
                }
            });
        }
    });
    let lost = stack.finish();
    let wall = start.elapsed().as_nanos() as u64;
    let cpu = cpu::process_ns() - cpu_start;
    let made = requests * producers * SPANS_PER_REQUEST;
    println!(
        "RUN\t{made}\t{cpu}\t{wall}\t{}\t{}",
        cpu::max_rss_kb(),
        lost.map_or("-".to_string(), |n| n.to_string())
    );
    std::io::stdout().flush().unwrap();
    // At once: an exporter's threads may not end by themselves.
    std::process::exit(0);
}
