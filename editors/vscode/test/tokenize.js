// Tokenises files with VS Code's own TextMate engine (vscode-textmate on the Oniguruma
// of vscode-oniguruma) and the grammar in ../syntaxes; prints, per file, every token as
// [line, start, end, innermost scope]. tests/editors/test_textmate.py compares this with what
// planc's own lexer reads.
//
//     node test/tokenize.js FILE...
"use strict";

const fs = require("fs");
const path = require("path");
const oniguruma = require("vscode-oniguruma");
const textmate = require("vscode-textmate");

const here = __dirname;
const wasm = fs.readFileSync(path.join(here, "..", "node_modules", "vscode-oniguruma",
  "release", "onig.wasm")).buffer;
const grammarFile = path.join(here, "..", "syntaxes", "planc.tmLanguage.json");

async function main(files) {
  await oniguruma.loadWASM(wasm);
  const registry = new textmate.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scope) => scope === "source.planc"
      ? textmate.parseRawGrammar(fs.readFileSync(grammarFile, "utf8"), grammarFile)
      : null,
  });
  const grammar = await registry.loadGrammar("source.planc");
  const out = {};
  for (const file of files) {
    const lines = fs.readFileSync(file, "utf8").split(/\r\n|\r|\n/);
    let state = textmate.INITIAL;
    const tokens = [];
    lines.forEach((line, i) => {
      const r = grammar.tokenizeLine(line, state);
      for (const t of r.tokens) {
        tokens.push([i, t.startIndex, Math.min(t.endIndex, line.length),
          t.scopes[t.scopes.length - 1]]);
      }
      state = r.ruleStack;
    });
    out[file] = tokens;
  }
  process.stdout.write(JSON.stringify(out));
}

main(process.argv.slice(2)).catch((e) => { console.error(String(e)); process.exit(1); });
