//! Image checks, in bytes on the wire: images larger than needed at the
//! device pixel ratio (the displayed size from the `<img>` `width`/`height`
//! attributes times the DPR, Lighthouse's "properly size images"), and
//! images in a format that costs bytes (a photograph served as PNG; a
//! JPEG, PNG or GIF that WebP would make more than 4 KiB smaller, with
//! Lighthouse's estimate of 2 bits per pixel for WebP). Findings only
//! above [`IMAGE_MIN_WASTE`] (4 KiB, Lighthouse's threshold).

use super::{check, finding, pct, Check, Ctx, Fix, Severity, IMAGE_MIN_WASTE};
use crate::page::bytes;

pub(super) const FIX_IMAGES: Fix = Fix {
    apache: "# not a server setting: resize images to the size shown times the device pixel ratio (or offer srcset)\n# and serve photographs as JPEG, WebP or AVIF",
    nginx: "# not a server setting: resize images to the size shown times the device pixel ratio (or offer srcset)\n# and serve photographs as JPEG, WebP or AVIF",
    lighttpd: "# not a server setting: resize images to the size shown times the device pixel ratio (or offer srcset)\n# and serve photographs as JPEG, WebP or AVIF",
};

/// WebP at about 2 bits per pixel (Lighthouse's estimate for photographs).
fn webp_estimate(px: u64) -> u64 {
    px / 4
}

pub(super) fn scaled(cx: &Ctx) -> Check {
    let dpr = cx.probes.dpr.unwrap_or(1.0).clamp(0.5, 4.0);
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok() {
        let (Some((iw, ih)), Some((w, h))) = (e.intrinsic, e.html_size) else {
            continue;
        };
        if iw == 0 || ih == 0 {
            continue;
        }
        // A missing dimension scales with the other (aspect ratio kept).
        let (dw, dh) = match (w, h) {
            (Some(w), Some(h)) => (w, h),
            (Some(w), None) => (w, (u64::from(ih) * u64::from(w) / u64::from(iw)) as u32),
            (None, Some(h)) => ((u64::from(iw) * u64::from(h) / u64::from(ih)) as u32, h),
            (None, None) => continue,
        };
        if !e.third_party {
            n += 1;
        }
        // Pixels needed: the displayed size times the DPR in each direction.
        let (nw, nh) = (
            (f64::from(dw.max(1)) * dpr).ceil(),
            (f64::from(dh.max(1)) * dpr).ceil(),
        );
        let needed = nw * nh;
        let real = f64::from(iw) * f64::from(ih);
        if real <= needed {
            continue;
        }
        let waste = (e.body_wire_bytes as f64 * (1.0 - needed / real)) as u64;
        if waste <= IMAGE_MIN_WASTE {
            continue;
        }
        if !e.third_party {
            bad += 1;
        }
        let (t, mut fi) = finding(
            Severity::Warning,
            e,
            format!(
                "{iw}×{ih} image shown at {dw}×{dh} CSS px; at DPR {dpr} it needs {nw}×{nh}; about {} of its {} on the wire wasted",
                bytes(waste),
                bytes(e.body_wire_bytes)
            ),
        );
        fi.saving_bytes = Some(waste);
        f.push((t, fi));
    }
    check(
        "images-scaled",
        "Images no larger than needed at the device pixel ratio",
        "a finding when more than 4 KiB on the wire is wasted against the size shown × DPR (Lighthouse); the size shown comes from width/height attributes",
        pct(n - bad, n),
        format!(
            "{} of {} images with a size in the HTML are no larger than needed at DPR {dpr}",
            n - bad,
            n
        ),
        f,
        FIX_IMAGES,
    )
}

pub(super) fn format(cx: &Ctx) -> Check {
    let mut f = Vec::new();
    let (mut n, mut bad) = (0, 0);
    for e in cx.ok() {
        let ct = e.content_type.as_str();
        if !matches!(ct, "image/png" | "image/jpeg" | "image/gif") {
            continue;
        }
        let Some((w, h)) = e.intrinsic else { continue };
        if !e.third_party {
            n += 1;
        }
        let px = u64::from(w) * u64::from(h);
        let wire = e.body_wire_bytes;
        // IHDR colour type 2 (RGB) or 6 (RGBA), many bytes per pixel, large:
        // a photograph; as JPEG about 2 bits per pixel at quality ~80.
        let truecolor_png = ct == "image/png"
            && e.body
                .as_ref()
                .is_some_and(|b| b.len() > 25 && matches!(b[25], 2 | 6));
        let webp = webp_estimate(px);
        let why = if truecolor_png && px >= 40_000 && wire > px && wire > webp + IMAGE_MIN_WASTE {
            Some(format!(
                "{w}×{h} true-colour PNG of {} ({:.1} bytes per pixel): likely a photograph; as JPEG or WebP about {}",
                bytes(wire),
                wire as f64 / px as f64,
                bytes(webp)
            ))
        } else if wire > webp + IMAGE_MIN_WASTE {
            Some(format!(
                "{w}×{h} {} of {}: as WebP about {} (2 bits per pixel; AVIF smaller still)",
                ct.trim_start_matches("image/").to_ascii_uppercase(),
                bytes(wire),
                bytes(webp)
            ))
        } else {
            None
        };
        let Some(why) = why else { continue };
        if !e.third_party {
            bad += 1;
        }
        let (t, mut fi) = finding(Severity::Warning, e, why);
        fi.saving_bytes = Some(wire - webp);
        f.push((t, fi));
    }
    check(
        "images-format",
        "Images in a fitting format (no photographs as PNG; WebP/AVIF)",
        "a finding when a photograph is a PNG, or WebP (about 2 bits per pixel, Lighthouse's estimate) would save more than 4 KiB on the wire",
        pct(n - bad, n),
        format!("{} of {n} JPEG/PNG/GIF images in a fitting format", n - bad),
        f,
        FIX_IMAGES,
    )
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{entry, page};
    use super::super::{audit, Probes};
    use crate::discover::Kind;
    use crate::load::Load;

    fn flagged(l: &Load, id: &str, dpr: Option<f64>) -> usize {
        let p = Probes {
            dpr,
            ..Default::default()
        };
        let a = audit("http://a.test/", l, None, Vec::new(), &[], &p);
        a.checks.iter().find(|c| c.id == id).unwrap().findings.len()
    }

    #[test]
    fn expected_size_follows_the_device_pixel_ratio() {
        // 200×200, 30 KB on the wire, shown at 100×100 CSS px.
        let mut img = entry("http://a.test/i.jpg", Kind::Image, "image/jpeg", 30_000);
        img.intrinsic = Some((200, 200));
        img.html_size = Some((Some(100), Some(100)));
        let l = page(img);
        // DPR 1: 3/4 of the pixels wasted (22.5 KB): a finding.
        assert_eq!(flagged(&l, "images-scaled", None), 1);
        // DPR 2 needs all 200×200: nothing wasted.
        assert_eq!(flagged(&l, "images-scaled", Some(2.0)), 0);
        // DPR 1.75 (Lighthouse mobile): 175×175 needed, 23 % of 30 KB = 7 KB: a finding.
        assert_eq!(flagged(&l, "images-scaled", Some(1.75)), 1);
    }

    #[test]
    fn webp_and_photo_png_estimates() {
        // A 300×300 JPEG of 40 KB: WebP ~22 KB, saves > 4 KiB.
        let mut jpg = entry("http://a.test/p.jpg", Kind::Image, "image/jpeg", 40_000);
        jpg.intrinsic = Some((300, 300));
        assert_eq!(flagged(&page(jpg.clone()), "images-format", None), 1);
        // The same at 24 KB: WebP would save under 4 KiB.
        jpg.body_wire_bytes = 24_000;
        assert_eq!(flagged(&page(jpg), "images-format", None), 0);
        // A true-colour PNG photograph: named as such.
        let mut png = entry("http://a.test/p.png", Kind::Image, "image/png", 300_000);
        png.intrinsic = Some((300, 300));
        let mut head = vec![0u8; 32];
        head[25] = 2;
        png.body = Some(head);
        let l = page(png);
        let a = audit(
            "http://a.test/",
            &l,
            None,
            Vec::new(),
            &[],
            &Probes::default(),
        );
        let c = a.checks.iter().find(|c| c.id == "images-format").unwrap();
        assert!(
            c.findings[0].evidence.contains("likely a photograph"),
            "{c:?}"
        );
        assert_eq!(c.severity, super::Severity::Warning);
    }
}
