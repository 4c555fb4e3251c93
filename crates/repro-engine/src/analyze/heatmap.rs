//! The per-tile error heatmap as a PNG image, written next to the JSON report: one block of
//! pixels per output tile, light grey where every output is right, yellow through dark red as the
//! share of bad outputs in the tile grows. The harness prints the same map in characters; the
//! picture is for grids too large to read that way, and for bug reports.

use std::path::{Path, PathBuf};

use repro_contract::report::{TileCounts, TileReport};

use crate::engine_error::EngineError as Error;

/// The bad share of every tile, from the report's `output` member.
#[derive(Debug, Clone, PartialEq)]
pub struct TileShares {
    pub tiles_m: usize,
    pub tiles_n: usize,
    /// Row-major [tiles_m][tiles_n], each in 0..=1.
    pub shares: Vec<f64>,
}

impl TileShares {
    /// Reads `output.shape`, `output.tile` and `output.bad_per_tile`; None when the report has
    /// no comparison (a fault before any output) or no bad output.
    pub fn from_report(report: &TileReport) -> Option<TileShares> {
        let TileCounts {
            shape: [l, m, n],
            tile: [tile_m, tile_n],
            bad_per_tile: bad,
        } = report.output.as_ref()?;
        let (l, m, n, tile_m, tile_n) = (*l, *m, *n, *tile_m, *tile_n);
        if tile_m <= 0 || tile_n <= 0 || bad.iter().all(|&b| b == 0) {
            return None;
        }
        let tiles_m = (m + tile_m - 1) / tile_m;
        let tiles_n = (n + tile_n - 1) / tile_n;
        if bad.len() as i64 != tiles_m * tiles_n {
            return None;
        }
        let shares = (0..tiles_m)
            .flat_map(|tm| (0..tiles_n).map(move |tn| (tm, tn)))
            .zip(bad)
            .map(|((tm, tn), &count)| {
                let h = tile_m.min(m - tm * tile_m);
                let w = tile_n.min(n - tn * tile_n);
                count as f64 / (h * w * l).max(1) as f64
            })
            .collect();
        Some(TileShares {
            tiles_m: tiles_m as usize,
            tiles_n: tiles_n as usize,
            shares,
        })
    }
}

/// Light grey for 0; from pale yellow to dark red as the share goes to 1; white for NaN (a cell
/// with nothing in it: a campaign's shape map marks shapes not run so).
pub fn color(share: f64) -> [u8; 3] {
    if share.is_nan() {
        return [255, 255, 255];
    }
    if share <= 0.0 {
        return [235, 235, 235];
    }
    let t = share.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    [mix(255.0, 150.0), mix(225.0, 0.0), mix(120.0, 0.0)]
}

/// Pixels per tile: the image is about 512 pixels on its longer side, 2 to 32 per tile.
fn tile_pixels(shares: &TileShares) -> usize {
    (512 / shares.tiles_m.max(shares.tiles_n)).clamp(2, 32)
}

/// Encodes the heatmap as an RGB PNG.
pub fn encode_png(shares: &TileShares) -> Result<Vec<u8>, png::EncodingError> {
    let px = tile_pixels(shares);
    let (width, height) = (shares.tiles_n * px, shares.tiles_m * px);
    let mut pixels = Vec::with_capacity(width * height * 3);
    for y in 0..height {
        for x in 0..width {
            let (tm, tn) = (y / px, x / px);
            // A one-pixel darker line between tiles, when tiles are large enough to spare it.
            let border = px >= 6 && (y % px == 0 || x % px == 0);
            let mut rgb = color(shares.shares[tm * shares.tiles_n + tn]);
            if border {
                rgb = rgb.map(|c| c.saturating_sub(40));
            }
            pixels.extend_from_slice(&rgb);
        }
    }
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, width as u32, height as u32);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(&pixels)?;
    }
    Ok(out)
}

/// Largest report read for its heatmap: a report's per-tile counts of a very large output.
const MAX_REPORT_BYTES: u64 = 256 << 20;

/// `report.json` -> `report.heatmap.png`, beside it.
pub fn png_path(report: &Path) -> PathBuf {
    let stem = report
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    report.with_file_name(format!("{stem}.heatmap.png"))
}

/// Writes the heatmap of the JSON report at `report` next to it; the path when there was one
/// to draw. Written to a temporary name and renamed, so a reader never sees half an image.
pub fn write_for_report(report: &Path) -> Result<Option<PathBuf>, Error> {
    // Missing when the harness died before writing one: nothing to draw. Read bounded and only
    // as a regular file: a report in a folder from others may be a fifo or `/dev/zero`.
    let Ok(bytes) = crate::file_kind::read_regular(report, MAX_REPORT_BYTES) else {
        return Ok(None);
    };
    let Some(tiles) = TileReport::from_json(&bytes) else {
        return Ok(None);
    };
    let Some(shares) = TileShares::from_report(&tiles) else {
        return Ok(None);
    };
    if shares.tiles_m * shares.tiles_n <= 1 {
        return Ok(None);
    }
    let path = png_path(report);
    let bytes = encode_png(&shares).map_err(|e| Error::Io {
        action: "encode the heatmap",
        path: path.clone(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let partial = path.with_extension("png.partial");
    repro_text::replace_file(&path, &partial, &bytes).map_err(|e| Error::Io {
        action: "write the heatmap",
        path: path.clone(),
        source: e.into_source(),
    })?;
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(bad: &[i64]) -> TileReport {
        TileReport {
            output: Some(TileCounts {
                shape: [1, 300, 260],
                tile: [128, 128],
                bad_per_tile: bad.to_vec(),
            }),
        }
    }

    #[test]
    fn shares_account_for_smaller_edge_tiles() {
        // Tile (0,2) is 128 x 4 = 512 outputs, tile (2,0) 44 x 128 = 5632.
        let shares =
            TileShares::from_report(&report(&[8192, 0, 256, 0, 0, 0, 5632, 0, 0])).unwrap();
        assert_eq!((shares.tiles_m, shares.tiles_n), (3, 3));
        assert_eq!(shares.shares[0], 0.5);
        assert_eq!(shares.shares[2], 0.5);
        assert_eq!(shares.shares[6], 1.0);
        assert!(TileShares::from_report(&report(&[0; 9])).is_none());
        assert!(
            TileShares::from_report(&report(&[1; 4])).is_none(),
            "wrong tile count"
        );
        assert!(TileShares::from_report(&TileReport { output: None }).is_none());
    }

    #[test]
    fn png_decodes_to_the_expected_colors() {
        let shares = TileShares {
            tiles_m: 2,
            tiles_n: 3,
            shares: vec![0.0, 1.0, 0.5, 0.0, 0.0, 0.0],
        };
        let bytes = encode_png(&shares).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buffer = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buffer).unwrap();
        // 512 / 3 tiles = 170 pixels a tile, clamped to 32.
        assert_eq!((info.width, info.height), (3 * 32, 2 * 32));
        let at = |x: u32, y: u32| {
            let i = ((y * info.width + x) * 3) as usize;
            [buffer[i], buffer[i + 1], buffer[i + 2]]
        };
        // Tile centres: (0,0) right, (0,1) all bad, (0,2) half.
        assert_eq!(at(16, 16), color(0.0));
        assert_eq!(at(48, 16), color(1.0));
        assert_eq!(at(80, 16), color(0.5));
        assert_eq!(
            png_path(Path::new("/tmp/r/report.json")),
            Path::new("/tmp/r/report.heatmap.png")
        );
    }
}
