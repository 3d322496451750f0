//! How the command prints a duration: one formatter for every table, note and plot label, so
//! that they all read alike (µs below a millisecond, ms below a second, then seconds).

/// `us` microseconds, in the unit that keeps it short: `740µs`, `1.25ms`, `12.3ms`, `1.58s`.
pub(crate) fn fmt_us(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{:.2}s", us / 1_000_000.0)
    } else if us >= 10_000.0 {
        format!("{:.1}ms", us / 1_000.0)
    } else if us >= 1_000.0 {
        format!("{:.2}ms", us / 1_000.0)
    } else {
        format!("{us:.0}µs")
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_us;

    #[test]
    fn each_range_has_its_unit() {
        assert_eq!(fmt_us(740.4), "740µs");
        assert_eq!(fmt_us(1_250.0), "1.25ms");
        assert_eq!(fmt_us(12_345.0), "12.3ms");
        assert_eq!(fmt_us(1_582_300.0), "1.58s");
        assert_eq!(fmt_us(0.0), "0µs");
    }
}
