//! `minitrace-view`: a flight dump (or several processes' dumps) as an HTML
//! page, a Perfetto trace, or a summary. Run with `--help` for its usage.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use minitrace_flight::Reader;
use minitrace_view::{export_perfetto, render_pages, summarize, PerfettoOptions};

const USAGE: &str = "\
usage: minitrace-view DUMP [-o PAGE.html] [--perfetto OUT.json [--around TRACE_ID] [--limit N]]
                           [--summary] [--title TITLE]
       minitrace-view DUMP DUMP... -o PAGE.html [--process LABEL]... [--summary] [--title TITLE]

  -o PAGE.html        write a self-contained HTML page of every request (works offline)
  --perfetto OUT.json write Chrome trace-event JSON, for ui.perfetto.dev or chrome://tracing
  --around TRACE_ID   with --perfetto: only the requests that overlap this one (hex id)
  --limit N           with --perfetto: at most N requests
  --summary           print the latency percentiles and the slowest requests
  --title TITLE       the page's title (default: the dumps' file names)
  --process LABEL     the process of the dump in the same place (default: its file stem)

With none of -o, --perfetto and --summary: writes DUMP's page beside it (DUMP.html) and
prints the summary.

Several dumps, of several processes (say a frontend and a backend), make one page of one
population: traces of different processes with the same trace id are one request, timed
by the process it entered by. --summary prints each dump's summary.";

#[derive(Debug, Default)]
struct Args {
    dumps: Vec<PathBuf>,
    processes: Vec<String>,
    page: Option<PathBuf>,
    perfetto: Option<PathBuf>,
    around: Option<u128>,
    limit: Option<usize>,
    summary: bool,
    title: Option<String>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args::default();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => return Err(String::new()),
            "-o" | "--output" => parsed.page = Some(value("-o")?.into()),
            "--perfetto" => parsed.perfetto = Some(value("--perfetto")?.into()),
            "--around" => {
                let id = value("--around")?;
                let id = u128::from_str_radix(id.trim_start_matches("0x"), 16)
                    .map_err(|_| format!("--around takes a trace id in hex, not {id:?}"))?;
                parsed.around = Some(id);
            }
            "--limit" => {
                let limit = value("--limit")?;
                parsed.limit =
                    Some(limit.parse().map_err(|_| format!("--limit takes a count, not {limit:?}"))?);
            }
            "--summary" => parsed.summary = true,
            "--title" => parsed.title = Some(value("--title")?),
            "--process" => parsed.processes.push(value("--process")?),
            flag if flag.starts_with('-') && flag != "-" => return Err(format!("unknown option {flag}")),
            path => parsed.dumps.push(PathBuf::from(path)),
        }
    }
    if parsed.dumps.is_empty() {
        return Err("no dump given".into());
    }
    if !parsed.processes.is_empty() && parsed.processes.len() != parsed.dumps.len() {
        return Err(format!(
            "{} --process labels for {} dumps: give one for each, or none",
            parsed.processes.len(),
            parsed.dumps.len()
        ));
    }
    if parsed.dumps.len() > 1 {
        if parsed.perfetto.is_some() {
            return Err("--perfetto takes one dump".into());
        }
        if parsed.page.is_none() {
            return Err("several dumps make one page: name it with -o PAGE.html".into());
        }
    }
    if (parsed.around.is_some() || parsed.limit.is_some()) && parsed.perfetto.is_none() {
        return Err("--around and --limit go with --perfetto".into());
    }
    if parsed.page.is_none() && parsed.perfetto.is_none() && !parsed.summary {
        parsed.page = Some(parsed.dumps[0].with_extension("html"));
        parsed.summary = true;
    }
    Ok(parsed)
}

fn open(path: &Path) -> Result<Reader<BufReader<File>>, String> {
    let file = File::open(path).map_err(|error| format!("cannot open {}: {error}", path.display()))?;
    Reader::new(BufReader::with_capacity(1 << 20, file))
        .map_err(|error| format!("{}: {error}", path.display()))
}

/// The temporary file an output is written to, created only at the first
/// write: the page is written once the whole dump has been read, so a bad
/// dump, or a process killed while reading, leaves no file at all.
struct LazyFile<'a> {
    path: &'a Path,
    file: Option<BufWriter<File>>,
}

impl LazyFile<'_> {
    fn file(&mut self) -> io::Result<&mut BufWriter<File>> {
        if self.file.is_none() {
            self.file = Some(BufWriter::new(File::create(self.path)?));
        }
        self.file.as_mut().ok_or_else(|| io::Error::other("the temporary file is gone"))
    }
}

impl Write for LazyFile<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

/// Writes `path` through `write` into a temporary file beside it, renamed
/// into place on success: a failure never leaves half a page behind, and
/// removes the temporary file. (A process killed while writing leaves it,
/// named `.NAME.PID.tmp`; `path` itself is never half-written.)
fn write_atomically<T>(
    path: &Path,
    write: impl FnOnce(&mut LazyFile) -> Result<T, String>,
) -> Result<T, String> {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().ok_or_else(|| format!("{} names no file", path.display()))?);
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(name);
    let mut out = LazyFile { path: &temporary, file: None };
    let result = write(&mut out).and_then(|value| {
        let failed = |error: io::Error| format!("cannot write {}: {error}", path.display());
        out.file().map_err(failed)?;
        out.flush().map_err(failed)?;
        fs::rename(&temporary, path).map_err(failed)?;
        Ok(value)
    });
    if result.is_err() && out.file.take().is_some() {
        let _ = fs::remove_file(&temporary);
    }
    result
}

fn run(args: Args) -> Result<(), String> {
    let name = |path: &Path| path.display().to_string();
    if args.summary {
        for dump in &args.dumps {
            let summary = summarize(open(dump)?).map_err(|error| format!("{}: {error}", name(dump)))?;
            if args.dumps.len() > 1 {
                println!("{}:", name(dump));
            }
            print!("{summary}");
        }
    }
    if let Some(page) = &args.page {
        let file_name =
            |path: &Path| path.file_name().map_or(name(path), |file| file.to_string_lossy().into_owned());
        let title = args
            .title
            .clone()
            .unwrap_or_else(|| args.dumps.iter().map(|dump| file_name(dump)).collect::<Vec<_>>().join(" + "));
        let mut dumps = Vec::with_capacity(args.dumps.len());
        for (k, dump) in args.dumps.iter().enumerate() {
            let stem = dump.file_stem().map_or(name(dump), |stem| stem.to_string_lossy().into_owned());
            dumps.push((args.processes.get(k).cloned().unwrap_or(stem), open(dump)?));
        }
        let dump_names = args.dumps.iter().map(|dump| name(dump)).collect::<Vec<_>>().join(", ");
        let stats = write_atomically(page, |out| {
            render_pages(dumps, &title, out).map_err(|error| format!("{dump_names}: {error}"))
        })?;
        if stats.requests == 0 {
            eprintln!("minitrace-view: {dump_names} holds no requests; the page says so");
        }
        println!(
            "page: {} ({} requests, {:.1} MB)",
            page.display(),
            stats.requests,
            stats.bytes as f64 / 1e6
        );
    }
    if let Some(json) = &args.perfetto {
        let dump = &args.dumps[0];
        let dump_name = name(dump);
        // A first pass for the earliest begin (time 0) and the window.
        let (mut origin, mut window) = (None::<u64>, None);
        for trace in open(dump)? {
            let trace = trace.map_err(|error| format!("{dump_name}: {error}"))?;
            let (begin, duration) = minitrace_view::request_extent(&trace);
            origin = Some(origin.map_or(begin, |origin| origin.min(begin)));
            if Some(trace.trace_id.0) == args.around {
                window = Some((begin, begin.saturating_add(duration)));
            }
        }
        if let (Some(id), None) = (args.around, window) {
            return Err(format!("{dump_name} holds no request with trace id {id:032x}"));
        }
        let options = PerfettoOptions { window, limit: args.limit, origin_unix_ns: origin };
        let reader = open(dump)?;
        let exported = write_atomically(json, |out| {
            export_perfetto(reader, &options, out).map_err(|error| format!("{dump_name}: {error}"))
        })?;
        println!(
            "perfetto: {} ({} requests, {} events on {} tracks)",
            json.display(),
            exported.requests,
            exported.events + exported.instants,
            exported.tracks
        );
        if exported.requests > 200_000 {
            eprintln!("minitrace-view: Perfetto's UI is slow past a few hundred thousand requests; try --around or --limit");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("minitrace-view: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("minitrace-view: {message}");
            let _ = io::stderr().flush();
            ExitCode::FAILURE
        }
    }
}
