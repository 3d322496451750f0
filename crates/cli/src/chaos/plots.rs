//! The SVG timeline of one scenario run (`--plots`): per resource, each hold as a bar over its
//! window (red when it overlaps another holder), each protected write as a short interval from
//! invocation to completion along the band's foot (red when stale or interleaved, orange when
//! the fenced store rejected it), stale writes also as red crosses, the lost signals of holds
//! kept alive as triangles on their bars; below, one row per node with its faults, so that
//! overlapping faults on several nodes stay apart.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use quorumlock_chaos::ScenarioReport;
use quorumlock_chaos::history::{FaultWindow, Hold, Write};

use super::table::expected;
use crate::svg::{draw_err, finish};

/// The chart every part of the timeline is drawn on: seconds across, resource bands up.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;
/// What a drawing step returns (the SVG backend fails with I/O errors).
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

const FAULT_COLORS: [RGBColor; 8] = [
    RGBColor(255, 165, 0),
    RGBColor(128, 128, 128),
    RGBColor(148, 103, 189),
    RGBColor(44, 160, 44),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
/// Height of one node's row of faults, in resource bands.
const NODE_ROW: f64 = 0.25;
const HOLD_COLOR: RGBColor = RGBColor(31, 119, 180);
const BAD_COLOR: RGBColor = RGBColor(214, 39, 40);
const WRITE_COLOR: RGBColor = RGBColor(60, 60, 60);
/// Writes the fenced store rejected.
const REJECTED_COLOR: RGBColor = RGBColor(255, 127, 14);

/// What the timeline shows, gathered from the report once: a row per node hit by a fault (at
/// the bottom), the resources (one band each, above them), their holds, and the extent of both
/// axes.
struct Timeline<'r> {
    report: &'r ScenarioReport,
    /// Rows of node faults: one per node up to the highest one hit (0 if none).
    node_rows: usize,
    resources: Vec<&'r str>,
    holds: BTreeMap<&'r str, Vec<&'r Hold>>,
    /// The last instant anything happened (µs): open fault windows end here.
    end_us: u64,
    x_max: f64,
    y_max: f64,
}

impl<'r> Timeline<'r> {
    fn new(report: &'r ScenarioReport) -> Timeline<'r> {
        let history = &report.history;
        let mut holds: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
        for hold in &history.holds {
            holds.entry(&hold.resource).or_default().push(hold);
        }
        // Writes made without a hold (no-lock) get bands too.
        let resources: Vec<&str> = holds
            .keys()
            .copied()
            .chain(history.writes.iter().map(|w| w.resource.as_str()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let end_us = history
            .holds
            .iter()
            .map(Hold::end_us)
            .chain(history.writes.iter().map(|w| w.completed_us))
            .chain(history.faults.iter().filter_map(|f| f.end_us))
            .chain([history.duration_us])
            .max()
            .unwrap_or(1);
        let node_rows = history
            .faults
            .iter()
            .flat_map(|fault| fault.nodes.iter().map(|node| node + 1))
            .max()
            .unwrap_or(0);
        Timeline {
            report,
            // Headroom above the bands for the legend.
            y_max: node_area(node_rows) + resources.len().max(1) as f64 + 0.9,
            node_rows,
            x_max: end_us as f64 / 1e6,
            end_us,
            resources,
            holds,
        }
    }

    /// The bottom of the band of `resource`, if it has one.
    fn band(&self, resource: &str) -> Option<f64> {
        let band = self.resources.iter().position(|r| *r == resource)?;
        Some(self.band_bottom(band))
    }

    /// The bottom of band number `band` (from 0, bottom up), above the node rows.
    fn band_bottom(&self, band: usize) -> f64 {
        node_area(self.node_rows) + band as f64
    }
}

/// The height of `rows` node rows and the gap above them (none without rows).
fn node_area(rows: usize) -> f64 {
    if rows == 0 {
        0.0
    } else {
        rows as f64 * NODE_ROW + 0.15
    }
}

/// Writes the timeline of `report` to `path`.
pub(super) fn plot(report: &ScenarioReport, path: &Path) -> Result<(), String> {
    let err = draw_err(path);
    let timeline = Timeline::new(report);
    let height = 260 + 90 * timeline.resources.len().max(1) as u32 + 23 * timeline.node_rows as u32;
    let root = SVGBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let fenced = if report.fencing {
        format!(
            ", {} rejected, {} fence regression(s), {} repeat(s)",
            report.check.rejected_writes,
            report.check.fence_regressions.len(),
            report.check.fence_repeats.len()
        )
    } else {
        String::new()
    };
    let keep_alive = report.check.keep_alive;
    let kept = if keep_alive.holds > 0 {
        format!(
            "; {} kept ({} extended, {} lost, {} late, {} writes after loss)",
            keep_alive.holds,
            keep_alive.extended,
            keep_alive.lost,
            report.check.late_losses.len(),
            report.check.writes_after_loss.len()
        )
    } else {
        String::new()
    };
    let title = format!(
        "{} (expected {}): {} violation(s), {} stale, {} lost, {} interleaved write(s){fenced}{kept}",
        report.scenario,
        expected(report),
        report.check.violations.len(),
        report.check.stale_writes.len(),
        report.check.lost_writes.len(),
        report.check.interleaved.len()
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(10)
        .build_cartesian_2d(0f64..timeline.x_max, 0f64..timeline.y_max)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_labels(12)
        .x_desc("time (s)")
        .draw()
        .map_err(&err)?;
    draw_faults(&mut chart, &timeline).map_err(&err)?;
    draw_holds(&mut chart, &timeline).map_err(&err)?;
    draw_writes(&mut chart, &timeline).map_err(&err)?;
    draw_resource_names(&mut chart, &timeline).map_err(&err)?;
    draw_node_names(&mut chart, &timeline).map_err(&err)?;
    draw_stale_writes(&mut chart, &timeline).map_err(&err)?;
    finish(&mut chart, &root, SeriesLabelPosition::UpperRight, path)
}

/// Fault windows, one colour per kind of fault: node faults in the rows of the nodes they hit,
/// client faults within their resource's band.
fn draw_faults(chart: &mut Chart<'_, '_>, timeline: &Timeline<'_>) -> DrawResult {
    let faults = &timeline.report.history.faults;
    let mut kinds: Vec<&str> = Vec::new();
    for fault in faults {
        if !kinds.contains(&fault.label.as_str()) {
            kinds.push(&fault.label);
        }
    }
    for (k, kind) in kinds.iter().enumerate() {
        let color = FAULT_COLORS[k % FAULT_COLORS.len()];
        let windows: Vec<&FaultWindow> = faults.iter().filter(|f| f.label == *kind).collect();
        chart
            .draw_series(windows.iter().flat_map(|f| {
                let x0 = f.start_us as f64 / 1e6;
                let x1 = f.end_us.unwrap_or(timeline.end_us) as f64 / 1e6;
                let rows: Vec<(f64, f64)> = match f.resource.as_deref() {
                    Some(resource) => timeline
                        .band(resource)
                        .map(|y| (y + 0.05, y + 0.95))
                        .into_iter()
                        .collect(),
                    None => f
                        .nodes
                        .iter()
                        .map(|&node| {
                            let y = node as f64 * NODE_ROW;
                            (y + 0.02, y + NODE_ROW - 0.02)
                        })
                        .collect(),
                };
                rows.into_iter().map(move |(y0, y1)| {
                    Rectangle::new([(x0, y0), (x1, y1)], color.mix(0.6).filled())
                })
            }))?
            .label(fault_label(kind, &windows))
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.mix(0.5).filled())
            });
    }
    Ok(())
}

/// The legend entry of one kind of fault: its label, and the nodes it hit if any.
fn fault_label(kind: &str, windows: &[&FaultWindow]) -> String {
    let mut nodes: Vec<usize> = windows.iter().flat_map(|f| f.nodes.clone()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.is_empty() {
        kind.to_owned()
    } else {
        let nodes: Vec<String> = nodes.iter().map(usize::to_string).collect();
        format!("{kind} (nodes {})", nodes.join(","))
    }
}

/// Holds: bars within each resource's band, in lanes; those of a violation in red. A kept
/// hold's lost signal is a triangle on its bar, red when it came after the validity ended.
fn draw_holds(chart: &mut Chart<'_, '_>, timeline: &Timeline<'_>) -> DrawResult {
    let check = &timeline.report.check;
    let violating: HashSet<&str> = check
        .violations
        .iter()
        .flat_map(|v| [v.first.token.as_str(), v.second.token.as_str()])
        .collect();
    let late: HashSet<&str> = check
        .late_losses
        .iter()
        .map(|late| late.hold.token.as_str())
        .collect();
    let mut bars = Vec::new();
    let mut bad_bars = Vec::new();
    let mut signals = Vec::new();
    for (r, resource) in timeline.resources.iter().enumerate() {
        let Some(holds) = timeline.holds.get(resource) else {
            continue;
        };
        let (lane_of, lanes) = lanes(holds);
        let lane_height = 0.8 / lanes as f64;
        for (hold, lane) in holds.iter().zip(lane_of) {
            let (start, end) = hold.window();
            let y0 = timeline.band_bottom(r) + 0.1 + lane as f64 * lane_height;
            let rect = [
                (start as f64 / 1e6, y0 + lane_height * 0.1),
                (end.max(start) as f64 / 1e6, y0 + lane_height * 0.9),
            ];
            if violating.contains(hold.token.as_str()) {
                bad_bars.push(rect);
            } else {
                bars.push(rect);
            }
            if let Some(lost) = hold.keep_alive.as_ref().and_then(|lease| lease.lost) {
                let color = if late.contains(hold.token.as_str()) {
                    BAD_COLOR
                } else {
                    BLACK
                };
                signals.push(((lost.at_us as f64 / 1e6, y0 + lane_height / 2.0), color));
            }
        }
    }
    chart
        .draw_series(
            bars.into_iter()
                .map(|rect| Rectangle::new(rect, HOLD_COLOR.mix(0.75).filled())),
        )?
        .label("hold (acquired → min(valid until, release))")
        .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], HOLD_COLOR.filled()));
    if !bad_bars.is_empty() {
        chart
            .draw_series(
                bad_bars
                    .into_iter()
                    .map(|rect| Rectangle::new(rect, BAD_COLOR.mix(0.85).filled())),
            )?
            .label("hold overlapping another holder's (violation)")
            .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], BAD_COLOR.filled()));
    }
    if !signals.is_empty() {
        chart
            .draw_series(
                signals
                    .into_iter()
                    .map(|(at, color)| TriangleMarker::new(at, 6, color.filled())),
            )?
            .label("lost signal of a hold kept alive (red: after its validity)")
            .legend(|(x, y)| TriangleMarker::new((x + 7, y), 6, BLACK.filled()));
    }
    Ok(())
}

/// Lanes within each resource's band: overlapping holds go to different lanes, so a double
/// grant shows as two bars stacked.
fn lanes(holds: &[&Hold]) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..holds.len()).collect();
    order.sort_by_key(|&i| holds[i].window());
    let mut lane_end: Vec<u64> = Vec::new();
    let mut lane_of = vec![0; holds.len()];
    for i in order {
        let (start, end) = holds[i].window();
        let lane = match lane_end.iter().position(|&e| e <= start) {
            Some(lane) => lane,
            None => {
                lane_end.push(0);
                lane_end.len() - 1
            }
        };
        lane_end[lane] = end.max(start);
        lane_of[i] = lane;
    }
    (lane_of, lane_end.len().max(1))
}

/// Protected writes: a short interval from invocation to completion at the foot of their
/// resource's band (at least 1/2000 of the axis wide, so that sub-millisecond writes show),
/// red when stale or part of an interleaving, orange when the fenced store rejected them.
fn draw_writes(chart: &mut Chart<'_, '_>, timeline: &Timeline<'_>) -> DrawResult {
    let check = &timeline.report.check;
    let bad_tokens: HashSet<(&str, &str)> = check
        .interleaved
        .iter()
        .flat_map(|i| {
            [i.first.token.as_str(), i.second.token.as_str()].map(|t| (i.resource.as_str(), t))
        })
        .chain(
            check
                .stale_writes
                .iter()
                .map(|s| (s.write.resource.as_str(), s.write.token.as_str())),
        )
        .collect();
    let min_width = timeline.x_max / 2000.0;
    let interval = |write: &Write| {
        let band = timeline.band(&write.resource).unwrap_or(0.0);
        let start = write.invoked_us as f64 / 1e6;
        let end = (write.completed_us as f64 / 1e6).max(start + min_width);
        [(start, band + 0.02), (end, band + 0.08)]
    };
    let (rejected, landed): (Vec<&Write>, Vec<&Write>) = timeline
        .report
        .history
        .writes
        .iter()
        .partition(|w| w.rejected.is_some());
    let (bad, good): (Vec<&Write>, Vec<&Write>) = landed
        .into_iter()
        .partition(|w| bad_tokens.contains(&(w.resource.as_str(), w.token.as_str())));
    chart
        .draw_series(
            good.iter()
                .map(|w| Rectangle::new(interval(w), WRITE_COLOR.mix(0.8).filled())),
        )?
        .label("write (invoked → acknowledged)")
        .legend(|(x, y)| Rectangle::new([(x, y - 2), (x + 14, y + 2)], WRITE_COLOR.filled()));
    if !bad.is_empty() {
        chart
            .draw_series(
                bad.iter()
                    .map(|w| Rectangle::new(interval(w), BAD_COLOR.filled())),
            )?
            .label("write of a stale or interleaved holder")
            .legend(|(x, y)| Rectangle::new([(x, y - 2), (x + 14, y + 2)], BAD_COLOR.filled()));
    }
    if !rejected.is_empty() {
        chart
            .draw_series(
                rejected
                    .iter()
                    .map(|w| Rectangle::new(interval(w), REJECTED_COLOR.filled())),
            )?
            .label("write rejected by the fenced store")
            .legend(|(x, y)| {
                Rectangle::new([(x, y - 2), (x + 14, y + 2)], REJECTED_COLOR.filled())
            });
    }
    Ok(())
}

/// Each resource's name at the top left of its band.
fn draw_resource_names(chart: &mut Chart<'_, '_>, timeline: &Timeline<'_>) -> DrawResult {
    chart.draw_series(timeline.resources.iter().enumerate().map(|(r, name)| {
        Text::new(
            (*name).to_owned(),
            (timeline.x_max * 0.003, timeline.band_bottom(r) + 0.97),
            ("sans-serif", 14).into_font().color(&BLACK),
        )
    }))?;
    Ok(())
}

/// `node N` at the left of each node's row of faults.
fn draw_node_names(chart: &mut Chart<'_, '_>, timeline: &Timeline<'_>) -> DrawResult {
    chart.draw_series((0..timeline.node_rows).map(|node| {
        Text::new(
            format!("node {node}"),
            (timeline.x_max * 0.003, (node + 1) as f64 * NODE_ROW - 0.02),
            ("sans-serif", 11).into_font().color(&BLACK),
        )
    }))?;
    Ok(())
}

/// Stale writes: red crosses in the middle of their resource's band.
fn draw_stale_writes(chart: &mut Chart<'_, '_>, timeline: &Timeline<'_>) -> DrawResult {
    let stale_writes = &timeline.report.check.stale_writes;
    if stale_writes.is_empty() {
        return Ok(());
    }
    chart
        .draw_series(stale_writes.iter().map(|stale| {
            let y = timeline
                .band(&stale.write.resource)
                .map_or(0.5, |y| y + 0.5);
            Cross::new(
                (stale.write.invoked_us as f64 / 1e6, y),
                7,
                BAD_COLOR.stroke_width(3),
            )
        }))?
        .label("stale write")
        .legend(|(x, y)| Cross::new((x + 7, y), 5, BAD_COLOR.stroke_width(3)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_holds_get_separate_lanes() {
        let a = Hold::new("r", 0, "a", 0, 100);
        let b = Hold::new("r", 1, "b", 50, 150);
        let c = Hold::new("r", 2, "c", 150, 200);
        let (lane_of, lanes) = lanes(&[&a, &b, &c]);
        assert_eq!(lanes, 2);
        assert_eq!(lane_of, vec![0, 1, 0]);
    }
}
