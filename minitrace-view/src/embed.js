'use strict';
// The bytes of the page's data elements, as embed.rs writes them.
const mtEmbed = (() => {
  // A data element's bytes. The page is windows-1252, so each byte is one
  // character: its own code point, but for 0x80-0x9F, which are these.
  // An escaped byte ('=' then the byte XOR 0x40) is one the HTML parser
  // would change (NUL, CR), one that could end the element ('<'), or '='.
  const HIGH = [0x20ac, 0x81, 0x201a, 0x192, 0x201e, 0x2026, 0x2020, 0x2021, 0x2c6, 0x2030, 0x160, 0x2039,
    0x152, 0x8d, 0x17d, 0x8f, 0x90, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014, 0x2dc, 0x2122,
    0x161, 0x203a, 0x153, 0x9d, 0x17e, 0x178];
  const byteOf = new Uint8Array(0x10000);
  for (let b = 0; b < 256; b++) byteOf[b >= 0x80 && b < 0xa0 ? HIGH[b - 0x80] : b] = b;
  const ESCAPE = 0x3d;
  function bytes(text) {
    const out = new Uint8Array(text.length);
    let j = 0;
    for (let i = 0; i < text.length; i++) {
      const b = byteOf[text.charCodeAt(i)];
      out[j++] = b === ESCAPE ? byteOf[text.charCodeAt(++i)] ^ 0x40 : b;
    }
    return j === out.length ? out : out.slice(0, j);
  }

  return { bytes };
})();
