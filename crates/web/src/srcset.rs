//! Picking one image candidate the way Chromium does: `srcset` with `w` or
//! `x` descriptors, `sizes` (the first entry whose media condition matches,
//! default `100vw`), `<img src>` as the 1x candidate in density mode, and
//! the choice among candidates sorted by density: the HTML standard leaves
//! it to the browser; Chromium takes the smallest density that reaches the
//! device pixel ratio, else the largest (checked against Chromium 156 by
//! tests/browser.rs: at DPR 2 among 1.71x and 3.41x it fetches 3.41x).

use crate::viewport::{length_px, Viewport};

/// One `srcset` candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The URL as written.
    pub url: String,
    /// `w` descriptor.
    pub width: Option<f64>,
    /// `x` descriptor (1 when none and no `w`).
    pub density: Option<f64>,
}

/// Parses a `srcset` attribute (the HTML standard's splitting: URLs end at
/// whitespace, a trailing comma ends a URL; descriptors up to the next
/// comma outside parentheses). Candidates with bad descriptors are dropped.
pub fn parse_srcset(s: &str) -> Vec<Candidate> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() && out.len() < 64 {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let us = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut url = &s[us..i];
        let mut descs = String::new();
        if url.ends_with(',') {
            url = url.trim_end_matches(',');
        } else {
            let ds = i;
            let mut depth = 0i32;
            while i < b.len() {
                match b[i] {
                    b'(' => depth += 1,
                    b')' => depth -= 1,
                    b',' if depth <= 0 => break,
                    _ => {}
                }
                i += 1;
            }
            descs = s[ds..i].to_string();
            i += 1;
        }
        let mut c = Candidate {
            url: url.to_string(),
            width: None,
            density: None,
        };
        let mut ok = !url.is_empty();
        for d in descs.split_whitespace() {
            let last = d.char_indices().last().map_or(0, |(i, _)| i);
            let (num, unit) = d.split_at(last);
            match unit {
                "w" if c.width.is_none() && c.density.is_none() => {
                    match num.parse::<u32>().ok().filter(|&w| w > 0) {
                        Some(w) => c.width = Some(f64::from(w)),
                        None => ok = false,
                    }
                }
                "x" if c.width.is_none() && c.density.is_none() => {
                    match num
                        .parse::<f64>()
                        .ok()
                        .filter(|x| *x >= 0.0 && x.is_finite())
                    {
                        Some(x) => c.density = Some(x),
                        None => ok = false,
                    }
                }
                // h descriptors are allowed (and ignored) next to w.
                "h" => {}
                _ => ok = false,
            }
        }
        if ok {
            out.push(c);
        }
    }
    out
}

/// The source size from a `sizes` attribute (CSS pixels): the length of the
/// first entry whose media condition matches; `auto` and unresolvable
/// lengths are skipped; none: `100vw`.
pub fn source_size(sizes: Option<&str>, vp: &Viewport) -> f64 {
    let full = f64::from(vp.width);
    let Some(sizes) = sizes else { return full };
    for entry in crate::viewport::split_top(sizes, ',') {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        // The length is the last component; a condition precedes it.
        let (cond, len) = match entry.rfind(|c: char| c.is_ascii_whitespace() || c == ')') {
            Some(p) if entry[..=p].trim_end().ends_with(')') => {
                (Some(entry[..=p].trim()), entry[p + 1..].trim())
            }
            _ => (None, entry),
        };
        if len.eq_ignore_ascii_case("auto") {
            continue;
        }
        let Some(px) = length_px(len, vp).filter(|p| *p >= 0.0) else {
            continue;
        };
        match cond {
            None => return px,
            Some(c) => {
                if vp.condition(c) == Some(true) {
                    return px;
                }
            }
        }
    }
    full
}

/// The URL Chromium fetches for an image with this `srcset`, `sizes` and
/// `src` on a screen `vp`. None: nothing to fetch.
pub fn pick(
    srcset: Option<&str>,
    sizes: Option<&str>,
    src: Option<&str>,
    vp: &Viewport,
) -> Option<String> {
    let mut cands = srcset.map(parse_srcset).unwrap_or_default();
    let width_mode = cands.iter().any(|c| c.width.is_some());
    if !width_mode {
        if let Some(src) = src.filter(|s| !s.trim().is_empty()) {
            if !cands.iter().any(|c| c.density.unwrap_or(1.0) == 1.0) {
                cands.push(Candidate {
                    url: src.trim().to_string(),
                    width: None,
                    density: Some(1.0),
                });
            }
        }
    }
    if cands.is_empty() {
        return None;
    }
    let size = source_size(sizes, vp);
    let mut dens: Vec<(f64, String)> = cands
        .into_iter()
        .filter_map(|c| {
            let d = match (c.width, c.density) {
                (Some(w), _) if size > 0.0 => w / size,
                (Some(_), _) => f64::INFINITY,
                (None, d) => d.unwrap_or(1.0),
            };
            (!width_mode || c.width.is_some()).then_some((d, c.url))
        })
        .collect();
    // Stable: among equal densities the first written wins.
    dens.sort_by(|a, b| a.0.total_cmp(&b.0));
    dens.dedup_by(|b, a| a.0 == b.0);
    // The smallest density that reaches the DPR, else the largest (what
    // Chromium 156 fetched for every fixture in tests/browser.rs).
    let i = dens
        .iter()
        .position(|(d, _)| *d >= vp.dpr - 1e-9)
        .unwrap_or(dens.len() - 1);
    Some(dens[i].1.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::viewport::{DESKTOP, MOBILE};

    fn vp(width: u32, dpr: f64) -> Viewport {
        Viewport {
            width,
            height: 900,
            dpr,
            mobile: false,
        }
    }

    #[test]
    fn parses_candidates() {
        let c = parse_srcset(" a.jpg 1x, b.jpg 2x,c.jpg, d,e.jpg 100w, bad.jpg 3q");
        let urls: Vec<&str> = c.iter().map(|c| c.url.as_str()).collect();
        assert_eq!(urls, ["a.jpg", "b.jpg", "c.jpg", "d,e.jpg"]);
        assert_eq!(parse_srcset("x.jpg 100w 2x").len(), 0);
    }

    #[test]
    fn density_descriptors() {
        let s = Some("a-1x.jpg 1x, a-2x.jpg 2x, a-3x.jpg 3x");
        assert_eq!(pick(s, None, None, &vp(1000, 1.0)).unwrap(), "a-1x.jpg");
        assert_eq!(pick(s, None, None, &vp(1000, 2.0)).unwrap(), "a-2x.jpg");
        assert_eq!(pick(s, None, None, &vp(1000, 2.625)).unwrap(), "a-3x.jpg");
        // 1.75: the first density >= 1.75 is 2x.
        assert_eq!(pick(s, None, None, &MOBILE).unwrap(), "a-2x.jpg");
        // src is the 1x candidate when none is written.
        assert_eq!(
            pick(Some("b.jpg 2x"), None, Some("a.jpg"), &DESKTOP).unwrap(),
            "a.jpg"
        );
        assert_eq!(
            pick(Some("b.jpg 2x"), None, Some("a.jpg"), &vp(1, 2.0)).unwrap(),
            "b.jpg"
        );
        assert_eq!(pick(None, None, Some("a.jpg"), &DESKTOP).unwrap(), "a.jpg");
        // Just below the ratio does not do: the next one up.
        assert_eq!(
            pick(Some("a.jpg 1.8x, b.jpg 2.5x"), None, None, &vp(1, 2.0)).unwrap(),
            "b.jpg"
        );
        // None reaches it: the largest.
        assert_eq!(
            pick(Some("a.jpg 1x, b.jpg 1.5x"), None, None, &vp(1, 3.0)).unwrap(),
            "b.jpg"
        );
    }

    #[test]
    fn width_descriptors_and_sizes() {
        let s = Some("s.jpg 400w, m.jpg 800w, l.jpg 1600w");
        // 100vw at 1350 px: densities 0.30, 0.59, 1.19 -> l.
        assert_eq!(pick(s, None, Some("src.jpg"), &DESKTOP).unwrap(), "l.jpg");
        // 400px slot: 1, 2, 4.
        assert_eq!(
            pick(
                Some("a.jpg 600w, b.jpg 1024w, c.jpg 2048w"),
                Some("600px"),
                None,
                &vp(1350, 2.0)
            )
            .unwrap(),
            "c.jpg"
        );
        let sz = Some("(max-width: 600px) 100vw, 400px");
        assert_eq!(pick(s, sz, None, &DESKTOP).unwrap(), "s.jpg");
        assert_eq!(pick(s, sz, None, &vp(1350, 2.0)).unwrap(), "m.jpg");
        // Mobile: 412px slot at 1.75 -> 0.97, 1.94, 3.88 -> m.
        assert_eq!(pick(s, sz, None, &MOBILE).unwrap(), "m.jpg");
        assert_eq!(
            source_size(Some("(min-width: 1000px) 50vw, 90vw"), &DESKTOP),
            675.0
        );
        assert_eq!(
            source_size(Some("calc(100vw - 2em), 300px"), &DESKTOP),
            300.0
        );
    }
}
