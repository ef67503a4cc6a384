//! What a JPEG, PNG or BMP would weigh in a modern format, by encoding it
//! as Lighthouse has Chromium encode it (`Audits.getEncodedResponse`):
//! WebP at quality 85 (libwebp at method 3 on the premultiplied pixels, as
//! Chromium's Skia) and JPEG at quality 92 with
//! 4:2:0 chroma and optimised Huffman tables (libjpeg-turbo's output, within
//! 1 % on the bench's photographs; an image with alpha premultiplied, as
//! Chromium's), AVIF then estimated from the two as
//! Lighthouse does (`(jpeg × 5/10 + webp × 8/10) / 2`). Measured against
//! Chromium's own encoder in `crates/web/tests/images_browser.rs`.

/// The sizes of one image re-encoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Encoded {
    /// WebP, quality 85.
    pub webp: u64,
    /// JPEG, quality 92.
    pub jpeg: u64,
}

impl Encoded {
    /// Lighthouse's AVIF estimate from the two encodes.
    pub fn avif(&self) -> u64 {
        ((self.jpeg as f64 * 0.5 + self.webp as f64 * 0.8) / 2.0).round() as u64
    }
}

/// Pixels decoded at most (a 40-megapixel photograph; a hostile header
/// cannot make the audit allocate more).
const MAX_PIXELS: u64 = 40_000_000;

/// Re-encodes `body` (a whole JPEG, PNG or BMP); None when it does not
/// decode or is larger than [`MAX_PIXELS`].
pub fn reencode(body: &[u8]) -> Option<Encoded> {
    let reader = image::ImageReader::new(std::io::Cursor::new(body))
        .with_guessed_format()
        .ok()?;
    let (w, h) = reader.into_dimensions().ok()?;
    if u64::from(w) * u64::from(h) > MAX_PIXELS || w == 0 || h == 0 {
        return None;
    }
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_PIXELS * 8);
    let mut reader = image::ImageReader::new(std::io::Cursor::new(body))
        .with_guessed_format()
        .ok()?;
    reader.limits(limits);
    let img = reader.decode().ok()?;
    let (w16, h16) = (u16::try_from(w).ok()?, u16::try_from(h).ok()?);
    // Chromium decodes to premultiplied pixels: a transparent pixel is
    // black whatever colour it stores, a translucent one keeps its colour
    // only to the alpha's precision.
    let alpha = img.color().has_alpha();
    let premultiplied = |rgba: &image::RgbaImage| -> image::RgbImage {
        let mut rgb = image::RgbImage::new(rgba.width(), rgba.height());
        for (d, s) in rgb.pixels_mut().zip(rgba.pixels()) {
            let a = u32::from(s[3]);
            for c in 0..3 {
                d[c] = ((u32::from(s[c]) * a + 127) / 255) as u8;
            }
        }
        rgb
    };
    // Skia's WebP encoder (Chromium's) at quality 85: libwebp's default
    // preset but method 3, fed the premultiplied pixels unpremultiplied
    // again (measured on sqlite.org's five RGBA logos: within 0.1 % of
    // Chromium's `Audits.getEncodedResponse`, where the stored colours at
    // method 4 gave 0.84-0.87 of it).
    let mut config = webp::WebPConfig::new().ok()?;
    config.quality = 85.0;
    config.method = 3;
    let webp = if alpha {
        let mut rgba = img.to_rgba8();
        let pm = premultiplied(&rgba);
        for (d, s) in rgba.pixels_mut().zip(pm.pixels()) {
            let a = u32::from(d[3]);
            for c in 0..3 {
                d[c] = (u32::from(s[c]) * 255 + a / 2)
                    .checked_div(a)
                    .map_or(0, |v| v.min(255) as u8);
            }
        }
        webp::Encoder::from_rgba(rgba.as_raw(), w, h)
            .encode_advanced(&config)
            .ok()?
            .len()
    } else {
        let rgb = img.to_rgb8();
        webp::Encoder::from_rgb(rgb.as_raw(), w, h)
            .encode_advanced(&config)
            .ok()?
            .len()
    };
    // JPEG has no alpha: Chromium encodes the premultiplied pixels
    // (measured on sqlite.org's RGBA logos: 18,686 B against Chromium's
    // 18,688 B, where dropping the alpha gave 52,253 B).
    let rgb = if alpha {
        premultiplied(&img.to_rgba8())
    } else {
        img.to_rgb8()
    };
    let mut jpeg = Vec::new();
    let mut enc = jpeg_encoder::Encoder::new(&mut jpeg, 92);
    enc.set_sampling_factor(jpeg_encoder::SamplingFactor::R_4_2_0);
    enc.set_optimized_huffman_tables(true);
    enc.encode(rgb.as_raw(), w16, h16, jpeg_encoder::ColorType::Rgb)
        .ok()?;
    Some(Encoded {
        webp: webp as u64,
        jpeg: jpeg.len() as u64,
    })
}
