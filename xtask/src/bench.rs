//! `cargo xtask bench`'s real-work part: the real-tools suite's clean tasks
//! with and without pincer in one Debian guest boot (the suite's ignored
//! `bench_real_work` test does the runs), printed as a table with the
//! kernel's per-program run-time statistics, and drawn as an SVG.

use std::{fmt::Write as _, path::Path, sync::Mutex, time::Duration};

use anyhow::{Context, Result, bail};

use crate::{kernels::Kernel, rootfs::Rootfs, say, vm};

/// Where the chart goes (committed, shown in docs/benchmarks.md, "Benchmarks").
pub const CHART: &str = "docs/bench-real-work.svg";

/// One task: the medians without and with pincer (µs), their ratio, the
/// kernel's decisions in a confined run, and every round's times.
struct Task {
    name: String,
    none: u64,
    confined: u64,
    ratio: f64,
    decisions: u64,
    rounds: String,
}

/// One program: invocations and nanoseconds per invocation.
struct Hook {
    name: String,
    runs: u64,
    ns: u64,
}

/// Runs the benchmark in the Debian guest and prints its figures; writes
/// the chart. Returns the guest's exit status.
pub fn real_work(kernel: Kernel, rounds: u32, timeout: Duration) -> Result<u8> {
    say!("real work with and without pincer on Linux {kernel} (Debian guest, {rounds} rounds)");
    let guest = vm::prepare(&[kernel], true, Rootfs::Debian)?;
    let script = format!(
        "BENCH_ROUNDS={rounds} /bin/pincer-tests-real_tools --ignored --exact bench_real_work \
         --nocapture --test-threads=1\n"
    );
    let lines = Mutex::new(Vec::new());
    let code = guest.run(kernel, &script, timeout, &|line| {
        if line.contains("-ROW\t") {
            lines
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(line.to_owned());
        } else {
            println!("{line}");
        }
    })?;
    let lines = lines
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (tasks, hooks) = parse(&lines)?;
    print(kernel, rounds, &tasks, &hooks);
    let chart = crate::workspace_root().join(CHART);
    if let Some(dir) = chart.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&chart, svg(kernel, rounds, &tasks, &hooks))
        .with_context(|| format!("writing {}", chart.display()))?;
    say!("chart: {}", Path::new(CHART).display());
    Ok(u8::try_from(code).unwrap_or(1))
}

fn parse(lines: &[String]) -> Result<(Vec<Task>, Vec<Hook>)> {
    let mut tasks = Vec::new();
    let mut hooks = Vec::new();
    for line in lines {
        let Some(at) = line.find("-ROW\t") else {
            continue;
        };
        let kind = &line[..at];
        let fields: Vec<&str> = line[at + 5..].split('\t').collect();
        let number = |i: usize| -> Result<u64> {
            fields
                .get(i)
                .and_then(|f| f.parse().ok())
                .with_context(|| format!("field {i} of {line:?}"))
        };
        if kind.ends_with("REAL-BENCH") {
            let [name, .., none_rounds, confined_rounds] = fields[..] else {
                bail!("malformed row {line:?}");
            };
            tasks.push(Task {
                name: name.to_owned(),
                none: number(1)?,
                confined: number(2)?,
                ratio: fields[3]
                    .parse()
                    .with_context(|| format!("ratio of {line:?}"))?,
                decisions: number(4)?,
                rounds: format!("{none_rounds} / {confined_rounds}"),
            });
        } else if kind.ends_with("HOOK") {
            hooks.push(Hook {
                name: fields[0].to_owned(),
                runs: number(1)?,
                ns: number(2)?,
            });
        }
    }
    if tasks.is_empty() {
        bail!("the guest printed no benchmark row");
    }
    hooks.sort_by_key(|h| std::cmp::Reverse(h.runs * h.ns));
    Ok((tasks, hooks))
}

/// The whole suite's ratio: its total time confined over its total time
/// without pincer (medians of each task).
fn overall(tasks: &[Task]) -> f64 {
    let none: u64 = tasks.iter().map(|t| t.none).sum();
    let confined: u64 = tasks.iter().map(|t| t.confined).sum();
    confined as f64 / none.max(1) as f64
}

fn print(kernel: Kernel, rounds: u32, tasks: &[Task], hooks: &[Hook]) {
    println!();
    println!("real work on Linux {kernel}, median of {rounds} interleaved rounds (ms):");
    println!();
    println!("| task | without | with pincer | ratio | decisions | rounds without / with (µs) |");
    println!("|------|--------:|------------:|------:|----------:|-------|");
    for t in tasks {
        println!(
            "| {} | {:.1} | {:.1} | {:.3} | {} | {} |",
            t.name,
            t.none as f64 / 1000.0,
            t.confined as f64 / 1000.0,
            t.ratio,
            t.decisions,
            t.rounds
        );
    }
    let none: u64 = tasks.iter().map(|t| t.none).sum();
    let confined: u64 = tasks.iter().map(|t| t.confined).sum();
    let decisions: u64 = tasks.iter().map(|t| t.decisions).sum();
    println!(
        "| **all** | {:.1} | {:.1} | **{:.3}** | {decisions} | |",
        none as f64 / 1000.0,
        confined as f64 / 1000.0,
        overall(tasks)
    );
    println!();
    println!("the kernel's run-time statistics over one confined pass of every task:");
    println!();
    println!("| program | invocations | ns per invocation | total ms |");
    println!("|---------|------------:|------------------:|---------:|");
    for h in hooks.iter().filter(|h| h.runs > 0) {
        println!(
            "| `{}` | {} | {} | {:.1} |",
            h.name,
            h.runs,
            h.ns,
            (h.runs * h.ns) as f64 / 1e6
        );
    }
}

/// A bar chart of each task's ratio and of the busiest programs' cost per
/// invocation: a few rectangles and labels, written out directly.
fn svg(kernel: Kernel, rounds: u32, tasks: &[Task], hooks: &[Hook]) -> String {
    const WIDTH: f64 = 760.0;
    const LABEL: f64 = 250.0;
    const BAR: f64 = 18.0;
    const GAP: f64 = 6.0;
    let hooks: Vec<&Hook> = hooks.iter().filter(|h| h.runs > 0).take(12).collect();
    let rows = tasks.len() + 1 + hooks.len();
    let height = 90.0 + rows as f64 * (BAR + GAP) + 60.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="10" y="20" font-size="14" font-weight="bold">Real work with pincer / without, Linux {kernel} guest (median of {rounds} rounds)</text>"#
    );
    let scale_max = tasks
        .iter()
        .map(|t| t.ratio)
        .fold(1.2_f64, f64::max)
        .ceil()
        .max(1.5);
    let span = WIDTH - LABEL - 70.0;
    let x_of = |ratio: f64| LABEL + span * ratio / scale_max;
    let mut y = 40.0;
    let bar = |out: &mut String, y: f64, label: &str, ratio: f64, bold: bool| {
        let weight = if bold { "bold" } else { "normal" };
        let fill = if bold { "#1f5fa8" } else { "#6a9fd8" };
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end" font-weight="{weight}">{}</text><rect x="{LABEL}" y="{y}" width="{:.1}" height="{BAR}" fill="{fill}"/><text x="{:.1}" y="{}">{ratio:.3}</text>"#,
            LABEL - 8.0,
            y + 13.0,
            escape(label),
            x_of(ratio) - LABEL,
            x_of(ratio) + 4.0,
            y + 13.0
        );
    };
    for t in tasks {
        bar(&mut out, y, &t.name, t.ratio, false);
        y += BAR + GAP;
    }
    bar(&mut out, y, "all tasks (total time)", overall(tasks), true);
    let _ = writeln!(
        out,
        r##"<line x1="{0:.1}" y1="36" x2="{0:.1}" y2="{1:.1}" stroke="#c0392b" stroke-dasharray="4 3"/><text x="{0:.1}" y="{2:.1}" fill="#c0392b" text-anchor="middle">1.0</text>"##,
        x_of(1.0),
        y + BAR + 2.0,
        y + BAR + 14.0
    );
    y += BAR + GAP + 34.0;
    let _ = writeln!(
        out,
        r#"<text x="10" y="{y}" font-size="14" font-weight="bold">Cost per invocation of the busiest programs (ns, from kernel.bpf_stats)</text>"#
    );
    y += 10.0;
    let ns_max = hooks.iter().map(|h| h.ns).max().unwrap_or(1).max(1) as f64;
    for h in &hooks {
        let width = span * h.ns as f64 / ns_max;
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" text-anchor="end">{} ({} calls)</text><rect x="{LABEL}" y="{y}" width="{width:.1}" height="{BAR}" fill="#8e6ac8"/><text x="{:.1}" y="{}">{}</text>"##,
            LABEL - 8.0,
            y + 13.0,
            escape(&h.name),
            h.runs,
            LABEL + width + 4.0,
            y + 13.0,
            h.ns
        );
        y += BAR + GAP;
    }
    out.push_str("</svg>\n");
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
