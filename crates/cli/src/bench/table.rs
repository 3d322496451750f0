//! The printed result: the table of every row with its ratios, and the targets evaluated on
//! this run (see [`targets`](super::targets)).

use std::fmt::Write as _;

use super::report::Report;
use super::targets::Target;
use crate::text_table::aligned;

fn fmt_ratio(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.2}×"),
        _ => "-".to_owned(),
    }
}

/// The targets' lines, under their heading.
pub(super) fn render_targets(targets: &[Target]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ntargets (stated for 5 masters; ratios within this run):"
    );
    for t in targets {
        let verdict = match t.met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        let measured = t
            .measured
            .map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
        let _ = writeln!(
            out,
            "  {:<48} {:>6}  (target {})  {verdict}",
            t.name, measured, t.limit
        );
    }
    out
}

pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    let m = &report.machine;
    let _ = writeln!(
        out,
        "\nquorumlock bench ({}{}) — {} CPUs ({}), redis {}; ttl {} ms, node timeout {} ms\n",
        report.mode,
        if report.quick { ", quick" } else { "" },
        m.nproc,
        m.cpu_model,
        m.redis_version,
        report.ttl_ms,
        report.node_timeout_ms
    );
    let header = [
        "scenario", "lock", "n", "err", "p50", "p90", "p99", "max", "ops/s", "allocs", "p50×1",
        "p99×1", "ops×1", "p50×H", "p99×H",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for r in &report.rows {
        let mut line = vec![r.scenario.clone(), r.lock.clone()];
        line.extend(r.cells());
        line.extend([
            format!("{:.0}", r.ops_per_s),
            r.allocs_per_cycle
                .map_or_else(|| "-".to_owned(), |a| format!("{a:.0}")),
            fmt_ratio(r.vs_single.map(|x| x.p50)),
            fmt_ratio(r.vs_single.map(|x| x.p99)),
            fmt_ratio(r.vs_single.map(|x| x.ops_per_s)),
            fmt_ratio(r.vs_healthy.map(|x| x.p50)),
            fmt_ratio(r.vs_healthy.map(|x| x.p99)),
        ]);
        table.push(line);
    }
    out.push_str(&aligned(&table, 2));
    let _ = writeln!(
        out,
        "\n×1 = ratio to the single-node lock in the same scenario (ops: higher is better);\n\
         ×H = ratio to the same 5 proxied nodes, all healthy. \"allocs\" = allocations per\n\
         acquire+release cycle (whole process). Throughput rows: latency of one cycle under load;\n\
         acquire/release-only rows: ops/s counts time inside the timed call only.\n\
         raw-N = the lock's commands sent over redis-rs alone, no lock logic (the floor on this\n\
         machine, TCP_NODELAY on as for the lock); its ×1 is relative to raw-1.\n\
         raw-1-nagle = raw-1 with redis-rs's default socket (Nagle on).\n\
         rslock-N = rslock 0.10 over the same nodes, one try, its defaults (Nagle on);\n\
         rslock-N-nodelay = the same with TCP_NODELAY; quorum-N-nagle = quorum-N without it.\n\
         quorum-N-fenced = quorum-N with fencing on.\n"
    );
    if let Some(contended) = &report.contended {
        out.push_str(&super::contended::render(contended));
    }
    out.push_str(&render_targets(&report.targets));
    let floor = report
        .rows
        .iter()
        .find(|r| r.id.starts_with("cycle/raw-") && !r.id.starts_with("cycle/raw-1"))
        .and_then(|r| r.vs_single.map(|v| (r.lock.clone(), v)));
    let net = report.rows.iter().find(|r| r.id == "net/quorum-5");
    if let Some(v) = net.and_then(|r| r.vs_single) {
        let _ = writeln!(
            out,
            "  (every node behind a proxy adding {} ms each way: quorum-5 / single p50 {:.2}, \
             p99 {:.2})",
            report.plan.net_one_way_ms, v.p50, v.p99
        );
    }
    if let Some((name, v)) = floor {
        let _ = writeln!(
            out,
            "  (floor: {name} / raw-1 over redis-rs alone: p50 {:.2}, p99 {:.2})",
            v.p50, v.p99
        );
    }
    for row in &report.rows {
        let plain = report
            .rows
            .iter()
            .find(|r| row.plain_id.as_ref() == Some(&r.id));
        if let (Some(v), Some(plain)) = (row.vs_plain, plain) {
            let _ = writeln!(
                out,
                "  (fencing: {} / {}, {}: p50 {:.2}, p99 {:.2}, ops/s {:.2})",
                row.lock, plain.lock, row.scenario, v.p50, v.p99, v.ops_per_s
            );
        }
    }
    if let Some(kept) = &report.kept {
        let figure = |value: Option<f64>, unit: &str| {
            value.map_or_else(|| "n/a".to_owned(), |value| format!("{value:.1} {unit}"))
        };
        let _ = writeln!(
            out,
            "  (keep-alive: {} guards on quorum-5, ttl {} ms, held {} ms, {} extensions, {} lost: \
             client CPU {}, {} per extension; servers' CPU {}; client memory {} per guard)",
            kept.guards,
            kept.ttl_ms,
            kept.hold_ms,
            kept.extensions,
            kept.lost,
            figure(kept.client_cpu_ms_per_s, "ms/s"),
            figure(kept.client_cpu_us_per_extension, "µs"),
            figure(kept.server_cpu_ms_per_s, "ms/s"),
            figure(kept.rss_bytes_per_guard.map(|bytes| bytes / 1024.0), "KiB"),
        );
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}
