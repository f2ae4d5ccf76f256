// Runs the page's block decoder (src/decode.js) under Node on blocks of a
// dump, as the browser does, and prints one JSON line: the traces (times as
// decimal strings), the requests' attributes, and the traces decoded with
// only every third of each block wanted (the others null), of every block.
// tests/decoder.rs compares them with the Rust reader's.
//
//   node decode_blocks.mjs DECODE.js BLOCKS.json
//
// BLOCKS.json: [{ "count": traces in the block, "payload": base64 of its zlib payload }].
import fs from 'node:fs';

const [decoderPath, blocksPath] = process.argv.slice(2);
const mtfDecode = new Function(`${fs.readFileSync(decoderPath, 'utf8')}\nreturn mtfDecode;`)();
const traces = [];
const attributes = [];
const everyThird = [];
for (const { count, payload } of JSON.parse(fs.readFileSync(blocksPath, 'utf8'))) {
  const raw = await mtfDecode.inflate(Buffer.from(payload, 'base64'));
  traces.push(...mtfDecode.decodeBlock(raw, count));
  everyThird.push(...mtfDecode.decodeBlock(raw, count, (t) => t % 3 === 0));
  attributes.push(...mtfDecode.attributes(raw, count));
}
const json = JSON.stringify({ traces, attributes, everyThird }, (_, value) => (typeof value === 'bigint' ? value.toString() : value));
console.log(json);
