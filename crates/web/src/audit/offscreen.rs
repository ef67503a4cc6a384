//! Offscreen images, as Lighthouse's `offscreen-images` (Lighthouse 12;
//! 13 dropped the audit): an `<img>` fetched with the page that is hidden
//! (no area) or lies below the first screens, and is not lazy-loaded,
//! costs its bytes before the user can see it. Lighthouse's rules, as they
//! apply to a loader that runs no script: the visible part of the image's
//! box is clipped to the viewport widened by 100 px on the left, right and
//! top and by three viewport heights below (`ALLOWABLE_OFFSCREEN_IN_PX`,
//! `ALLOWABLE_OFFSCREEN_BOTTOM_IN_VIEWPORTS`); an image counts when at
//! least 75 % of it is outside and that share of its transfer size is at
//! least 2 KiB; one with `loading=lazy` or `loading=eager` is left alone; a
//! URL shown several times is judged by its least wasteful showing.
//! Lighthouse also drops images requested in the 50 ms before its
//! time-to-interactive; redline runs no script and keeps every image the
//! page requested before its load event.
//!
//! Positions come from [`super::layout`]: bounds on each image's top from
//! stacking block boxes (heights from `height`, from images of known size,
//! UA margins), and the image's displayed size from the image-size model.
//! The image's horizontal position is taken as inside the viewport's width.
//! An image whose bounds do not settle which side of the 75 % line it is
//! on is "not known" and not judged.

use std::collections::HashMap;

use super::images::{scan, sheets};
use super::layout::{Cap, Span};
use super::{check, finding, pct, Check, Ctx, Fix, Severity};
use crate::page::bytes;
use crate::viewport::Viewport;

/// Lighthouse: the viewport widened by this many px left, right and above.
const ALLOWABLE_OFFSCREEN_PX: f64 = 100.0;
/// Lighthouse: and by this many viewport heights below.
const BOTTOM_VIEWPORTS: f64 = 3.0;
/// Lighthouse: findings from this many bytes wasted.
const MIN_BYTES: u64 = 2048;
/// Lighthouse: and from this share of the image outside.
const MIN_WASTED: f64 = 0.75;

pub(super) const FIX_OFFSCREEN: Fix = Fix {
    apache: "# not a server setting: add loading=\"lazy\" to <img> elements below the first screen and to hidden ones",
    nginx: "# not a server setting: add loading=\"lazy\" to <img> elements below the first screen and to hidden ones",
    lighttpd: "# not a server setting: add loading=\"lazy\" to <img> elements below the first screen and to hidden ones",
};

/// What the offscreen rule says of one `<img>`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Offscreen {
    /// Not rendered (no area): all of it wasted.
    Hidden,
    /// At least 75 % of it outside the widened viewport: `wasted` is that
    /// share (a lower bound when its top is not known exactly).
    Below {
        /// Share of the image outside.
        wasted: f64,
    },
    /// Less than 75 % outside.
    OnScreen,
    /// Its position or size needs layout redline does not do.
    NotKnown,
    /// `loading=lazy` or `loading=eager`: left alone.
    LoadingSet,
}

/// One `<img>` placed on the page.
#[derive(Clone, Debug, PartialEq)]
pub struct Placed {
    /// The URL it fetches.
    pub url: String,
    /// Bounds on its top in CSS px from the page's top (lower, upper when
    /// known); None when nothing is known (out of flow, past the bounds).
    pub top: Option<(f64, Option<f64>)>,
    /// Its displayed width and height in CSS px, when known.
    pub size: Option<(f64, f64)>,
    /// The verdict.
    pub verdict: Offscreen,
}

/// The share of a `w`×`h` box with its top at `top` that lies outside
/// the viewport `vw`×`vh` widened as Lighthouse widens it (left edge
/// taken as inside the viewport).
fn wasted(top: f64, w: f64, h: f64, vw: f64, vh: f64) -> f64 {
    let total = w * h;
    if total <= 0.0 {
        return 1.0;
    }
    let t = top.max(-ALLOWABLE_OFFSCREEN_PX);
    let b = (top + h).min(vh + BOTTOM_VIEWPORTS * vh);
    let visible = (b - t).max(0.0) * w.min(vw + ALLOWABLE_OFFSCREEN_PX).max(0.0);
    1.0 - visible / total
}

/// Places every `<img>` of a page on screen `screen` (`sheets`: the
/// stylesheets fetched, in load order; `intrinsic`: an image URL's pixel
/// size when known) and judges it by the offscreen rule.
pub fn image_positions(
    html: &[u8],
    page_url: &str,
    screen: &Viewport,
    sheets: &[&str],
    intrinsic: &dyn Fn(&str) -> Option<(u32, u32)>,
) -> Vec<Placed> {
    let s = scan(html, page_url, screen, sheets);
    // Lighthouse's innerWidth/innerHeight: the layout viewport, its height
    // scaled as the width was (a phone page without a viewport <meta>).
    let vw = f64::from(s.layout.width);
    let vh = f64::from(screen.height) * vw / f64::from(screen.width.max(1));
    let sizes: Vec<Option<(f64, f64)>> = s
        .imgs
        .iter()
        .map(|img| {
            let shown = img.shown.as_ref()?;
            let (iw, ih) = intrinsic(&img.url).filter(|(w, h)| *w > 0 && *h > 0)?;
            let (iw, ih) = (f64::from(iw), f64::from(ih));
            // A cap of unknown size over a width that may exceed it.
            if img.cap == Cap::Unknown {
                return None;
            }
            let w = shown.width_for(iw);
            let h = img.css_height.or(shown.height).unwrap_or(w * ih / iw);
            Some((w, h))
        })
        .collect();
    let heights: HashMap<usize, f64> = s
        .imgs
        .iter()
        .zip(&sizes)
        .filter_map(|(img, sz)| Some((img.node?, sz.as_ref()?.1)))
        .collect();
    let tops = s.layout().tops(&heights);
    s.imgs
        .iter()
        .zip(sizes)
        .map(|(img, size)| {
            let top = img
                .node
                .and_then(|n| tops.top.get(&n).copied())
                .filter(|t| t.lo.is_finite());
            let verdict = if img.loading_set {
                Offscreen::LoadingSet
            } else if img.hidden {
                Offscreen::Hidden
            } else {
                judge(top, size, vw, vh)
            };
            Placed {
                url: img.url.clone(),
                top: top.map(|t| (t.lo, t.hi)),
                size,
                verdict,
            }
        })
        .collect()
}

fn judge(top: Option<Span>, size: Option<(f64, f64)>, vw: f64, vh: f64) -> Offscreen {
    let Some(top) = top else {
        return Offscreen::NotKnown;
    };
    let bottom_limit = vh + BOTTOM_VIEWPORTS * vh;
    if top.lo >= bottom_limit {
        return Offscreen::Below { wasted: 1.0 };
    }
    let Some((w, h)) = size else {
        return Offscreen::NotKnown;
    };
    // Lowest top: the most visible; highest: the least.
    let least = wasted(top.lo, w, h, vw, vh);
    if least >= MIN_WASTED {
        return Offscreen::Below { wasted: least };
    }
    match top.hi {
        Some(hi) if wasted(hi, w, h, vw, vh) < MIN_WASTED => Offscreen::OnScreen,
        _ => Offscreen::NotKnown,
    }
}

pub(super) fn offscreen(cx: &Ctx) -> Check {
    const THRESHOLD: &str = "a finding when an image fetched with the page and not lazy-loaded is hidden or at least 75 % outside the viewport widened by 100 px and by three screens below, and that share of its transfer size is at least 2 KiB (Lighthouse's offscreen-images); positions from block layout, \"not known\" where they need more";
    let screen = cx.first.discovery.viewport;
    let sheets = sheets(cx);
    let sizes: HashMap<String, (u32, u32)> = cx
        .ok()
        .filter_map(|e| Some((url::Url::parse(&e.url).ok()?.to_string(), e.intrinsic?)))
        .collect();
    let placed = cx
        .doc()
        .and_then(|d| Some((d.url.as_str(), d.body.as_deref()?)))
        .map(|(u, b)| image_positions(b, u, &screen, &sheets, &|x| sizes.get(x).copied()))
        .unwrap_or_default();
    // Per URL, the least wasteful showing (Lighthouse): on screen beats
    // not known beats offscreen; a hidden copy loses to any other.
    // A lazy or eager showing is left alone: another showing decides.
    let rank = |v: &Offscreen| match v {
        Offscreen::OnScreen => 0,
        Offscreen::NotKnown => 1,
        Offscreen::Below { .. } => 2,
        Offscreen::Hidden => 3,
        Offscreen::LoadingSet => 4,
    };
    let mut by_url: HashMap<&str, Offscreen> = HashMap::new();
    for p in &placed {
        let keep = by_url.get(p.url.as_str()).is_some_and(|old| {
            rank(old) < rank(&p.verdict)
                || matches!((old, &p.verdict), (Offscreen::Below { wasted: a }, Offscreen::Below { wasted: b }) if a <= b)
        });
        if !keep {
            by_url.insert(&p.url, p.verdict);
        }
    }
    let mut f = Vec::new();
    let (mut n, mut bad, mut unknown, mut saved) = (0, 0, 0, 0u64);
    for e in cx.ok().filter(|e| !e.after_load) {
        let key = url::Url::parse(&e.url).map_or(e.url.clone(), |u| u.to_string());
        let Some(v) = by_url.remove(key.as_str()) else {
            continue;
        };
        let share = match v {
            Offscreen::LoadingSet => continue,
            Offscreen::NotKnown => {
                unknown += 1;
                continue;
            }
            Offscreen::OnScreen => 0.0,
            Offscreen::Hidden => 1.0,
            Offscreen::Below { wasted } => wasted,
        };
        if !e.third_party {
            n += 1;
        }
        let waste = (e.wire_bytes as f64 * share).round() as u64;
        if share < MIN_WASTED || waste < MIN_BYTES {
            continue;
        }
        if !e.third_party {
            bad += 1;
            saved += waste;
        }
        let why = match v {
            Offscreen::Hidden => "hidden (not rendered), fetched anyway".to_string(),
            _ if share >= 1.0 => "entirely below the first screens".to_string(),
            _ => format!("{:.0} % of it below the first screens", share * 100.0),
        };
        let (t, mut fi) = finding(
            Severity::Warning,
            e,
            format!(
                "{why} and not lazy-loaded: {} of its {} transferred before anyone can see it",
                bytes(waste),
                bytes(e.wire_bytes)
            ),
        );
        fi.saving_bytes = Some(waste);
        f.push((t, fi));
    }
    let known = if unknown > 0 {
        format!(
            "; {unknown} whose position needs layout redline does not do (not known, not judged)"
        )
    } else {
        String::new()
    };
    let summary = if n == 0 && unknown > 0 {
        format!("not applicable: no image with a known position{known}")
    } else {
        format!(
            "{} of {n} images on the first screens or lazy-loaded; {} offscreen or hidden ({} to defer){known}",
            n - bad,
            bad,
            bytes(saved)
        )
    };
    check(
        "offscreen-images",
        "Offscreen and hidden images lazy-loaded",
        THRESHOLD,
        pct(n - bad, n),
        summary,
        f,
        FIX_OFFSCREEN,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::viewport::{DESKTOP, MOBILE};

    #[test]
    fn lighthouse_clipping() {
        // Fully in the first screen, half past four screens, past them.
        assert_eq!(wasted(10.0, 100.0, 100.0, 1350.0, 940.0), 0.0);
        assert!((wasted(3760.0 - 50.0, 100.0, 100.0, 1350.0, 940.0) - 0.5).abs() < 1e-9);
        assert_eq!(wasted(5000.0, 100.0, 100.0, 1350.0, 940.0), 1.0);
        // Wider than the viewport plus 100 px: the rest is outside.
        assert!((wasted(0.0, 2900.0, 10.0, 1350.0, 940.0) - 0.5).abs() < 1e-9);
        assert_eq!(wasted(0.0, 0.0, 10.0, 1350.0, 940.0), 1.0);
    }

    fn verdicts(html: &str, vp: &Viewport) -> Vec<(String, Offscreen)> {
        image_positions(html.as_bytes(), "http://a.test/", vp, &[], &|_| {
            Some((400, 300))
        })
        .into_iter()
        .map(|p| {
            (
                p.url.trim_start_matches("http://a.test/").to_string(),
                p.verdict,
            )
        })
        .collect()
    }

    #[test]
    fn block_flow_places_images() {
        let html = "<meta name=viewport content=\"width=device-width\"><body>\
            <img src=top.jpg>\
            <div style=\"height: 5000px\"></div>\
            <img src=deep.jpg><img src=lazy.jpg loading=lazy>\
            <p>text of unknown height</p><img src=after-text.jpg>\
            <div style=\"display: none\"><img src=hidden.jpg></div>\
            <div style=\"position: absolute; top: 0\"><img src=abs.jpg></div>";
        let v = verdicts(html, &DESKTOP);
        let get = |u: &str| v.iter().find(|(k, _)| k == u).map(|(_, v)| *v).unwrap();
        assert_eq!(get("top.jpg"), Offscreen::OnScreen);
        assert_eq!(get("deep.jpg"), Offscreen::Below { wasted: 1.0 });
        assert_eq!(get("lazy.jpg"), Offscreen::LoadingSet);
        // Below 5000 px whatever the text's height: still known.
        assert_eq!(get("after-text.jpg"), Offscreen::Below { wasted: 1.0 });
        assert_eq!(get("hidden.jpg"), Offscreen::Hidden);
        assert_eq!(get("abs.jpg"), Offscreen::NotKnown);
        // Text above an image near the fold: its top is not known.
        let html = "<body><p>some words</p><img src=a.jpg>";
        assert_eq!(verdicts(html, &MOBILE)[0].1, Offscreen::NotKnown);
    }
}
