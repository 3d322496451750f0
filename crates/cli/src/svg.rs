//! What the SVG plots of `bench` and `chaos` share: their error messages and the last step of
//! every chart (the legend, then the file).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

/// Turns a drawing error into `drawing <path>: <error>`.
pub(crate) fn draw_err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> String + '_ {
    move |e| format!("drawing {}: {e}", path.display())
}

/// Draws the legend at `position` and writes the file.
pub(crate) fn finish<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    root: &DrawingArea<DB, Shift>,
    position: SeriesLabelPosition,
    path: &Path,
) -> Result<(), String> {
    let err = draw_err(path);
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(&err)?;
    root.present().map_err(&err)
}
