// The longest functions of some TypeScript files, by lines (nested functions count on their own too):
// `node scripts/longest-functions.mjs $(find src -name '*.ts')`; `TOP=30` for more rows (default 15).
import { readFileSync } from 'node:fs';
import ts from 'typescript';

const rows = [];
for (const file of process.argv.slice(2)) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line;
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body) {
      const parent = node.parent;
      const name = node.name?.getText(source) ?? (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) ? parent.name.getText(source) : '<anon>');
      const start = lineOf(node.getStart(source));
      rows.push([lineOf(node.end) - start + 1, `${file}:${start + 1} ${name}`]);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}
rows.sort((a, b) => b[0] - a[0]);
for (const [lines, where] of rows.slice(0, Number(process.env.TOP ?? 15))) console.log(String(lines).padStart(5), where);
