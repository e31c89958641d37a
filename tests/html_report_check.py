#!/usr/bin/env python3
"""Checks for tests/test_html_report.cpp, standard library only.

  html_report_check.py markup PAGE.html   well-formed (every tag closes: parsed as XML), HTML's
                                          self-closing rule kept, ids unique, each <details> opens
                                          with <summary>, nothing fetched from elsewhere
  html_report_check.py png SHOT.png [RRGGBB]...
                                          decodes the screenshot: how many colours, and how many
                                          pixels of each colour asked for; fails on one colour or
                                          on a colour asked for that is absent
"""
import html.parser
import re
import struct
import sys
import xml.etree.ElementTree
import zlib

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class HtmlRules(html.parser.HTMLParser):
    """What an XML parser does not check: HTML's own rules, and self-containment."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.errors, self.ids, self.stack, self.elements = [], set(), [], 0
        self.expect_summary = False

    def handle_starttag(self, tag, attrs):
        self.elements += 1
        if self.expect_summary and tag != "summary":
            self.errors.append(f"<details> starts with <{tag}>, not <summary>")
        self.expect_summary = tag == "details"
        for name, value in attrs:
            value = value or ""
            if name == "id":
                if value in self.ids:
                    self.errors.append(f"duplicate id {value!r}")
                self.ids.add(value)
            if name in ("src", "href", "srcset", "action", "poster") and (re.match(r"^[a-z][a-z0-9+.-]*:", value) or value.startswith("//")):
                self.errors.append(f"<{tag} {name}={value!r}> refers outside the page")
        if tag in ("link", "iframe", "object", "embed", "img", "base") or (tag == "script" and dict(attrs).get("src")):
            self.errors.append(f"<{tag}> may fetch something")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        in_svg = "svg" in self.stack or tag == "svg"
        if tag not in VOID and not in_svg:
            self.errors.append(f"<{tag}/> self-closed: HTML would leave it open")
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] == "style" and re.search(r"@import|url\(", data):
            self.errors.append("the style sheet fetches something")
        if self.expect_summary and data.strip():
            self.errors.append("<details> starts with text, not <summary>")


def check_markup(path):
    text = open(path, encoding="utf-8").read()
    errors = []
    try:
        xml.etree.ElementTree.fromstring(re.sub(r"^<!DOCTYPE html>", "", text))
    except xml.etree.ElementTree.ParseError as e:
        errors.append(f"not well-formed: {e}")
    rules = HtmlRules()
    rules.feed(text)
    rules.close()
    errors += rules.errors
    if rules.stack:
        errors.append(f"left open: {rules.stack}")
    for e in errors[:20]:
        print(f"{path}: {e}")
    if not errors:
        print(f"markup ok: {rules.elements} elements, {len(rules.ids)} ids")
    return 1 if errors else 0


def png_pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG file")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    width, height, depth, colour, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        raise SystemExit(f"{path}: PNG of depth {depth}, colour type {colour}, interlace {interlace}: not read here")
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    previous = bytearray(stride)
    rows = []
    for y in range(height):
        kind = raw[y * (stride + 1)]
        row = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        unfilter(row, previous, kind, channels)
        rows.append(bytes(row))
        previous = row
    return width, height, channels, rows


def unfilter(row, up, kind, bpp):
    n = len(row)
    if kind == 1:
        for i in range(bpp, n):
            row[i] = (row[i] + row[i - bpp]) & 255
    elif kind == 2:
        for i in range(n):
            row[i] = (row[i] + up[i]) & 255
    elif kind == 3:
        for i in range(n):
            left = row[i - bpp] if i >= bpp else 0
            row[i] = (row[i] + ((left + up[i]) >> 1)) & 255
    elif kind == 4:
        for i in range(n):
            a = row[i - bpp] if i >= bpp else 0
            b, c = up[i], (up[i - bpp] if i >= bpp else 0)
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255


def check_png(path, wanted):
    width, height, channels, rows = png_pixels(path)
    counts = {}
    for row in rows:
        for x in range(0, len(row), channels):
            key = row[x:x + 3]
            counts[key] = counts.get(key, 0) + 1
    print(f"png {width}x{height}: {len(counts)} colours")
    failed = len(counts) <= 1
    for colour in wanted:
        n = counts.get(bytes.fromhex(colour), 0)
        print(f"#{colour}: {n} pixels")
        failed = failed or n == 0
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "markup":
        sys.exit(check_markup(sys.argv[2]))
    if len(sys.argv) >= 3 and sys.argv[1] == "png":
        sys.exit(check_png(sys.argv[2], sys.argv[3:]))
    sys.exit(__doc__)
