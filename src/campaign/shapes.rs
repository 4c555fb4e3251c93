//! A campaign's shapes file: the (M, N, K) a model uses, as kernel libraries keep them. CSV with
//! a header row of size names (`M,N,K`; `#` starts a comment line), or JSON lines, one object of
//! size names per line (`.jsonl`, `.ndjson`). Every column must be a size of the spec: a column
//! the harness would not read is more often a misspelt size than a label.

use std::io::Read;
use std::path::Path;

use indexmap::IndexMap;

use super::file::MAX_RUNS;
use super::CampaignError;
use crate::error::Error;
use crate::spec::diagnostic::did_you_mean;

/// Largest shapes file read: a hundred thousand shapes of a few sizes is about 3 MiB.
const MAX_BYTES: u64 = 64 << 20;

/// Reads the shapes in `path`, each a mapping of size names (from `declared`) to positive values.
pub fn read(path: &Path, declared: &[&str]) -> Result<Vec<IndexMap<String, i64>>, Error> {
    let fail = |line: Option<usize>, why: String, help: &str| -> Error {
        let place = match line {
            Some(l) => format!("{}:{l}", path.display()),
            None => path.display().to_string(),
        };
        CampaignError::ShapesFile {
            path: place.into(),
            why,
            help: help.to_string(),
        }
        .into()
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| {
            fail(
                None,
                format!("cannot read it: {e}"),
                "shapes_file is relative to the campaign file",
            )
        })?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(fail(
            None,
            format!("larger than {} MiB", MAX_BYTES >> 20),
            "split the shapes over several entries",
        ));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| fail(None, "not UTF-8 text".into(), "save it as UTF-8"))?;
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let rows = match extension {
        "jsonl" | "ndjson" => json_lines(&text),
        "csv" => csv_rows(&text),
        _ => Err((
            None,
            format!("`.{extension}` is not a shapes file kind"),
            "name it .csv (a header row of size names) or .jsonl (an object per line)",
        )),
    };
    let rows = rows.map_err(|(line, why, help)| fail(line, why, help))?;
    if rows.len() > MAX_RUNS {
        return Err(fail(
            None,
            format!(
                "{} shapes, more than a campaign may hold ({MAX_RUNS})",
                rows.len()
            ),
            "split the shapes over several campaigns",
        ));
    }
    let mut shapes = Vec::with_capacity(rows.len());
    for (line, row) in rows {
        let mut shape = IndexMap::new();
        for (name, value) in row {
            if !declared.contains(&name.as_str()) {
                let help = match did_you_mean(&name, declared.iter().copied()) {
                    Some(best) => format!("did you mean `{best}`?"),
                    None => format!("the spec's sizes are {}", declared.join(", ")),
                };
                return Err(fail(
                    Some(line),
                    format!("`{name}` is not a size of the spec"),
                    &help,
                ));
            }
            if value < 1 {
                return Err(fail(
                    Some(line),
                    format!("{name} = {value}: a size is at least 1"),
                    "give a positive extent",
                ));
            }
            shape.insert(name, value);
        }
        shapes.push(shape);
    }
    Ok(shapes)
}

type Rows = Vec<(usize, Vec<(String, i64)>)>;
type RowError = (Option<usize>, String, &'static str);

fn json_lines(text: &str) -> Result<Rows, RowError> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_number = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let object: IndexMap<String, serde_json::Value> =
            serde_json::from_str(line).map_err(|e| {
                (
                    Some(line_number),
                    format!("not a JSON object: {e}"),
                    "one object per line, e.g. {\"M\": 4096, \"N\": 4096, \"K\": 4096}",
                )
            })?;
        let mut row = Vec::new();
        for (name, value) in object {
            let Some(v) = value.as_i64() else {
                return Err((
                    Some(line_number),
                    format!("`{name}` is {value}, not an integer"),
                    "sizes are whole numbers",
                ));
            };
            row.push((name, v));
        }
        rows.push((line_number, row));
    }
    Ok(rows)
}

fn csv_rows(text: &str) -> Result<Rows, RowError> {
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| {
            (
                Some(1),
                format!("no header row: {e}"),
                "the first row names the sizes: M,N,K",
            )
        })?
        .iter()
        .map(str::to_string)
        .collect();
    if header.iter().all(String::is_empty) {
        return Err((
            Some(1),
            "no header row".into(),
            "the first row names the sizes: M,N,K",
        ));
    }
    // Lines from byte offsets: the reader's own count skips comment lines, and a record's
    // position is where the reader started it, before the blank lines it skipped.
    let line_at = |byte: u64| {
        let mut at = (byte as usize).min(text.len());
        at += text[at..].len() - text[at..].trim_start_matches(['\n', '\r']).len();
        text[..at].matches('\n').count() + 1
    };
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map(|p| line_at(p.byte()));
            let why = match e.kind() {
                csv::ErrorKind::UnequalLengths {
                    expected_len, len, ..
                } => format!("{len} values in a row of a {expected_len}-column file"),
                _ => e.to_string(),
            };
            (line, why, "every row has one value per header column")
        })?;
        let line = record.position().map_or(0, |p| line_at(p.byte()));
        let mut row = Vec::new();
        for (name, field) in header.iter().zip(record.iter()) {
            let value: i64 = field.parse().map_err(|_| {
                (
                    Some(line),
                    format!("`{name}` is `{field}`, not an integer"),
                    "sizes are whole numbers",
                )
            })?;
            row.push((name.clone(), value));
        }
        rows.push((line, row));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_json_lines_give_the_same_shapes() {
        let csv = csv_rows("# llama\nM, N, K\n1,4096,4096\n\n16,14336,4096\n").unwrap();
        let json =
            json_lines("{\"M\":1,\"N\":4096,\"K\":4096}\n# c\n{\"M\":16,\"N\":14336,\"K\":4096}\n")
                .unwrap();
        let values = |rows: &Rows| -> Vec<Vec<(String, i64)>> {
            rows.iter().map(|(_, r)| r.clone()).collect()
        };
        assert_eq!(values(&csv), values(&json));
        assert_eq!(csv[1].0, 5, "the row's line in the file");
    }

    #[test]
    fn bad_rows_name_their_line() {
        let e = csv_rows("M,N\n1,2\n3,x\n").unwrap_err();
        assert_eq!(e.0, Some(3));
        assert!(e.1.contains("`N` is `x`"), "{}", e.1);
        let e = csv_rows("M,N\n1,2,3\n").unwrap_err();
        assert_eq!(e.0, Some(2), "{}", e.1);
        let e = json_lines("{\"M\": 1}\n{\"M\": 1.5}\n").unwrap_err();
        assert_eq!(e.0, Some(2));
    }
}
