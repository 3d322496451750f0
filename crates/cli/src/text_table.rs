//! Plain-text tables for the terminal, as `bench` and `chaos` print them: every column as wide
//! as its widest cell, a dashed line under the header.

/// `rows` (the first one the header) as aligned lines: the first `left` columns left-aligned,
/// the others right-aligned, two spaces between columns, no trailing blanks.
pub(crate) fn aligned(rows: &[Vec<String>], left: usize) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| {
                if c < left {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            let total = widths.iter().sum::<usize>() + 2 * columns.saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_under_the_header() {
        let rows = [["name", "µs"], ["a", "12"], ["long", "3"]]
            .map(|row| row.map(String::from).to_vec())
            .to_vec();
        assert_eq!(
            aligned(&rows, 1),
            "name  µs\n--------\na     12\nlong   3\n"
        );
    }
}
