// Build step: copy the quant-params JSON Schema from the Python package (its single source,
// quantcore/schema/) into schemas/, where package.json's jsonValidation points and the .vsix takes it
// from. Outside the Fixpoint repository (no ../quantcore) an existing copy is kept.
const fs = require('fs');
const path = require('path');

const source = path.join(__dirname, '..', '..', 'quantcore', 'schema', 'quant-params.schema.json');
const target = path.join(__dirname, '..', 'schemas', 'quant-params.schema.json');

if (!fs.existsSync(source)) {
  if (fs.existsSync(target)) {
    console.log(`copy-schema: ${path.relative(process.cwd(), source)} not found; keeping schemas/quant-params.schema.json`);
    process.exit(0);
  }
  console.error(`copy-schema: the schema ${source} is missing (build the extension inside the Fixpoint repository)`);
  process.exit(1);
}
const text = fs.readFileSync(source, 'utf8');
JSON.parse(text); // a broken schema fails the build, not the user's editor
fs.mkdirSync(path.dirname(target), { recursive: true });
if (!fs.existsSync(target) || fs.readFileSync(target, 'utf8') !== text) fs.writeFileSync(target, text);
console.log('copy-schema: schemas/quant-params.schema.json up to date');
