#!/usr/bin/env python3
"""Writes the bench's fixture pages (bench/lighthouse.sh) into DIR: real
photographs (smooth gradients and noise, as JPEG and as true-colour PNG,
made with Pillow), CSS and JS written out long (unminified), render-blocking
and deferred resources, images shown smaller than they are, through
descendant and child selectors."""
import os
import random
import sys

from PIL import Image, ImageFilter


def photo(w, h, seed):
    """A photograph-like picture: smooth colour fields plus fine noise."""
    rnd = random.Random(seed)
    small = Image.new("RGB", (16, 12))
    small.putdata([(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)) for _ in range(16 * 12)])
    img = small.resize((w, h), Image.BICUBIC)
    noise = Image.effect_noise((w, h), 24).convert("RGB")
    img = Image.blend(img, noise, 0.18).filter(ImageFilter.SMOOTH)
    return img


def css(n):
    rules = []
    for i in range(n):
        rules.append(
            f".card-{i} {{\n    margin : {i % 17}px auto ;\n    padding : 0 {i % 9}px ;\n"
            f"    color : #{(i * 2654435761) % 0xFFFFFF:06x} ;\n    /* rule {i}: spacing for the card grid */\n}}\n"
        )
    return "".join(rules)


def js(n):
    lines = ["/* the page's behaviour, written long */"]
    for i in range(n):
        lines.append(
            f"function handlerNumber{i}(eventObject) {{\n    var targetElement = eventObject.target;\n"
            f"    if (targetElement && targetElement.dataset) {{\n        targetElement.dataset.seen = '{i}';\n    }}\n"
            f"    return targetElement;\n}}\n"
        )
    return "\n".join(lines)


PAGES = {
    "shop.html": """<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Shop</title>
<link rel="stylesheet" href="css/site.css">
<link rel="stylesheet" href="css/print.css" media="print">
<script src="js/app.js"></script>
<script defer src="js/later.js"></script>
<style>.hero img { width: 600px } .grid > img { width: 224px }</style>
</head><body>
<div class="hero"><img src="img/hero.jpg" alt=""></div>
<div class="grid"><img src="img/a.jpg" alt=""><img src="img/b.png" alt=""><img src="img/c.jpg" alt=""></div>
<p>Products and more products.</p>
<img src="img/logo.png" width="120" alt="">
</body></html>
""",
    "blog.html": """<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Blog</title>
<link rel="stylesheet" href="css/blog.css">
<script src="js/blog.js"></script>
</head><body>
<article><h1>A post</h1><p>Text.</p>
<img src="img/photo.png" style="width: 480px" alt="">
<img src="img/wide.jpg" width="800" alt="">
</article>
</body></html>
""",
}


def main(d):
    os.makedirs(os.path.join(d, "img"), exist_ok=True)
    os.makedirs(os.path.join(d, "css"), exist_ok=True)
    os.makedirs(os.path.join(d, "js"), exist_ok=True)
    photo(1600, 1200, 1).save(os.path.join(d, "img/hero.jpg"), quality=92)
    photo(900, 600, 2).save(os.path.join(d, "img/a.jpg"), quality=90)
    photo(640, 640, 3).save(os.path.join(d, "img/b.png"))
    photo(448, 300, 4).save(os.path.join(d, "img/c.jpg"), quality=85)
    photo(1200, 800, 5).save(os.path.join(d, "img/photo.png"))
    photo(1000, 600, 6).save(os.path.join(d, "img/wide.jpg"), quality=95)
    Image.new("RGB", (240, 80), (200, 30, 30)).save(os.path.join(d, "img/logo.png"))
    for name, text in {
        "css/site.css": css(400),
        "css/print.css": css(20),
        "css/blog.css": css(150),
        "js/app.js": js(300),
        "js/later.js": js(50),
        "js/blog.js": js(120),
    }.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    for name, text in PAGES.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv[1])
