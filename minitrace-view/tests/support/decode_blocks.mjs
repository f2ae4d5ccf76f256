// Runs the page's block decoder (src/decode.js) under Node on blocks of a
// dump, as the browser does, and prints the traces as one JSON line, times
// as decimal strings: tests/decoder.rs compares them with the Rust reader's.
//
//   node decode_blocks.mjs DECODE.js BLOCKS.json
//
// BLOCKS.json: [{ "count": traces in the block, "payload": base64 of its zlib payload }].
import fs from 'node:fs';

const [decoderPath, blocksPath] = process.argv.slice(2);
const mtfDecode = new Function(`${fs.readFileSync(decoderPath, 'utf8')}\nreturn mtfDecode;`)();
const traces = [];
for (const { count, payload } of JSON.parse(fs.readFileSync(blocksPath, 'utf8'))) {
  const raw = await mtfDecode.inflate(Buffer.from(payload, 'base64'));
  traces.push(...mtfDecode.decodeBlock(raw, count));
}
console.log(JSON.stringify(traces, (_, value) => (typeof value === 'bigint' ? value.toString() : value)));
