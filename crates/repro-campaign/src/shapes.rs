//! A campaign's shapes file: the (M, N, K) a model uses, as kernel libraries keep them. CSV with
//! a header row of size names (`M,N,K`; `#` starts a comment line), or JSON lines, one object of
//! size names per line (`.jsonl`, `.ndjson`). Every column must be a size of the spec: a column
//! the harness would not read is more often a misspelt size than a label.

use std::path::Path;

use indexmap::IndexMap;

use super::file::MAX_RUNS;
use super::folder::one_line;
use super::CampaignError;
use crate::file_kind::{read_regular, ReadError};
use repro_text::did_you_mean;

/// Largest shapes file read: a hundred thousand shapes of a few sizes is about 3 MiB.
const MAX_BYTES: u64 = 64 << 20;

/// Largest size a shape may give: sizes are passed to kernels as `int` (docs/spec.md, `sizes`).
const MAX_SIZE: i64 = i32::MAX as i64;

/// Why [`read`] gave no shapes.
#[derive(Debug)]
pub enum ReadFailure {
    /// The file could not be read at all (missing, a folder or a fifo, too large): the campaign
    /// file's `shapes_file` names the wrong thing, so the caller reports it there.
    Unreadable { why: String, help: String },
    /// The file was read and something in it is wrong: the error names the file and the line.
    Content(CampaignError),
}

/// Reads the shapes in `path`, each a mapping of size names (from `declared`) to positive values.
/// The file is read as one someone else may have made: only a regular file (a fifo would block
/// the read), at most [`MAX_BYTES`], and rows stop being read at the campaign's limit.
pub fn read(path: &Path, declared: &[&str]) -> Result<Vec<IndexMap<String, i64>>, ReadFailure> {
    let fail = |line: Option<usize>, why: String, help: &str| -> ReadFailure {
        let place = match line {
            Some(l) => format!("{}:{l}", path.display()),
            None => path.display().to_string(),
        };
        ReadFailure::Content(CampaignError::ShapesFile {
            path: place.into(),
            why,
            help: help.to_string(),
        })
    };
    // What keeps the file from being read at all is the campaign file's to say, at its
    // `shapes_file`: the path it names is the thing to mend.
    let unreadable = |why: String, help: &str| ReadFailure::Unreadable {
        why,
        help: help.to_string(),
    };
    let bytes = read_regular(path, MAX_BYTES).map_err(|e| match e {
        ReadError::Io(e) => unreadable(
            format!("cannot read {}: {e}", path.display()),
            "shapes_file is relative to the campaign file",
        ),
        ReadError::NotAFile(what) => unreadable(
            format!("{} is {what}, not a shapes file", path.display()),
            "name a CSV or JSON-lines file",
        ),
        ReadError::TooLarge { bytes } => unreadable(
            format!(
                "{} is {}, larger than {} MiB",
                path.display(),
                crate::file_kind::mib(bytes),
                MAX_BYTES >> 20
            ),
            "split the shapes over several entries",
        ),
    })?;
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
                    format!("`{}` is not a size of the spec", one_line(&name)),
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
            if value > MAX_SIZE {
                return Err(fail(
                    Some(line),
                    format!("{name} = {value} does not fit the `int` the kernel receives (at most {MAX_SIZE})"),
                    "sizes are passed to kernels as int; give a smaller extent",
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

/// The error of a file with more shapes than a campaign may hold, said at the first row past
/// the limit: the rest is not read.
fn too_many(line: usize) -> RowError {
    (
        Some(line),
        format!("more shapes than a campaign may hold ({MAX_RUNS})"),
        "split the shapes over several campaigns",
    )
}

/// A JSON object's members in order, and the first name given twice (JSON allows it; a shape
/// with two values for one size is a mistake to show, not a value to pick).
struct Members {
    members: Vec<(String, serde_json::Value)>,
    twice: Option<String>,
    /// More members than [`MAX_SIZES`]: the rest were skipped unread.
    too_many: bool,
}

/// Most sizes one shape (a CSV header, a JSON object) may name: a spec has a handful. A bound
/// on the memory and time one row takes, whatever its line holds.
const MAX_SIZES: usize = 64;

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of size names")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members, A::Error> {
                let mut members: Vec<(String, serde_json::Value)> = Vec::new();
                let (mut twice, mut too_many) = (None, false);
                while twice.is_none() && !too_many {
                    let Some((name, value)) = map.next_entry::<String, serde_json::Value>()? else {
                        break;
                    };
                    if members.iter().any(|(n, _)| *n == name) {
                        twice = Some(name);
                    } else if members.len() == MAX_SIZES {
                        too_many = true;
                    } else {
                        members.push((name, value));
                    }
                }
                // The rest of the object is read (it must be JSON) but not kept.
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Members {
                    members,
                    twice,
                    too_many,
                })
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

fn json_lines(text: &str) -> Result<Rows, RowError> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_number = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if rows.len() == MAX_RUNS {
            return Err(too_many(line_number));
        }
        let object: Members = serde_json::from_str(line).map_err(|e| {
            (
                Some(line_number),
                format!("not a JSON object: {}", one_line(&e.to_string())),
                "one object per line, e.g. {\"M\": 4096, \"N\": 4096, \"K\": 4096}",
            )
        })?;
        if let Some(name) = object.twice {
            return Err((
                Some(line_number),
                format!("`{}` is given twice", one_line(&name)),
                "give each size once per shape",
            ));
        }
        if object.too_many {
            return Err((
                Some(line_number),
                format!("more than {MAX_SIZES} sizes in one shape"),
                "give the sizes of the spec",
            ));
        }
        let mut row = Vec::new();
        for (name, value) in object.members {
            let Some(v) = value.as_i64() else {
                return Err((
                    Some(line_number),
                    format!(
                        "`{}` is {}, not an integer",
                        one_line(&name),
                        one_line(&value.to_string())
                    ),
                    "sizes are whole numbers",
                ));
            };
            row.push((name, v));
        }
        rows.push((line_number, row));
    }
    Ok(rows)
}

/// Line numbers from byte offsets, counted forward from the last one asked (records come in
/// order): the whole file is counted once, not once per row.
struct Lines<'a> {
    text: &'a str,
    byte: usize,
    line: usize,
}

impl Lines<'_> {
    /// The line of the record the reader started at `byte`: after the blank lines it skipped.
    fn at(&mut self, byte: u64) -> usize {
        let mut at = (byte as usize).min(self.text.len());
        at += self.text[at..].len() - self.text[at..].trim_start_matches(['\n', '\r']).len();
        if at < self.byte {
            (self.byte, self.line) = (0, 1);
        }
        self.line += self.text.as_bytes()[self.byte..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.byte = at;
        self.line
    }
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
    let mut lines = Lines {
        text,
        byte: 0,
        line: 1,
    };
    // The header's line: the first that is neither blank nor a comment.
    let header_line = text
        .lines()
        .position(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map_or(1, |i| i + 1);
    if header.len() > MAX_SIZES {
        return Err((
            Some(header_line),
            format!("{} columns, more than {MAX_SIZES}", header.len()),
            "give a column per size of the spec",
        ));
    }
    for (i, name) in header.iter().enumerate() {
        if header[..i].contains(name) {
            return Err((
                Some(header_line),
                format!(
                    "column `{}` is given twice (columns {} and {})",
                    one_line(name),
                    header[..i].iter().position(|n| n == name).unwrap_or(0) + 1,
                    i + 1
                ),
                "give each size one column",
            ));
        }
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map(|p| lines.at(p.byte()));
            let why = match e.kind() {
                csv::ErrorKind::UnequalLengths {
                    expected_len, len, ..
                } => format!("{len} values in a row of a {expected_len}-column file"),
                _ => e.to_string(),
            };
            (line, why, "every row has one value per header column")
        })?;
        let line = record.position().map_or(0, |p| lines.at(p.byte()));
        if rows.len() == MAX_RUNS {
            return Err(too_many(line));
        }
        let mut row = Vec::new();
        for (name, field) in header.iter().zip(record.iter()) {
            let value: i64 = field.parse().map_err(|_| {
                (
                    Some(line),
                    format!("`{name}` is `{}`, not an integer", one_line(field)),
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
    fn a_size_given_twice_or_too_many_sizes_are_refused_at_their_line() {
        let e = json_lines("{\"M\": 1}\n{\"M\": 1, \"M\": 2}\n").unwrap_err();
        assert_eq!(e.0, Some(2));
        assert!(e.1.contains("`M` is given twice"), "{}", e.1);
        let wide: Vec<String> = (0..100_000).map(|i| format!("\"s{i}\": 1")).collect();
        let e = json_lines(&format!("{{{}}}\n", wide.join(","))).unwrap_err();
        assert!(e.1.contains("more than 64 sizes"), "{}", e.1);
        let e = csv_rows("# c\nM,N,M\n1,2,3\n").unwrap_err();
        assert_eq!(e.0, Some(2));
        assert!(e.1.contains("column `M` is given twice"), "{}", e.1);
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
