// check_speedscope.js FILE NODE_MODULES: validates FILE against the file format schema that
// npm's speedscope package ships (dist/release/file-format-schema.json) with ajv (JSON Schema
// draft-07), then prints each profile as "name|unit|endValue|samples|sum of weights" for the
// test to compare. Exit 0 valid, 1 invalid (ajv's errors on stderr), 77 the packages are absent.
'use strict';
const path = require('path');
const fs = require('fs');
const [file, modules] = process.argv.slice(2);
let Ajv, schema;
try {
    Ajv = require(path.join(modules, 'ajv'));
    schema = JSON.parse(fs.readFileSync(
        path.join(modules, 'speedscope', 'dist', 'release', 'file-format-schema.json'), 'utf8'));
} catch (e) {
    console.error(`speedscope or ajv not installed in ${modules} (npm ci in web/): ${e.message}`);
    process.exit(77);
}
const ajv = new (Ajv.default || Ajv)({allErrors: true, strict: false});
const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
const validate = ajv.compile(schema);
if (!validate(doc)) {
    console.error(JSON.stringify(validate.errors, null, 1));
    process.exit(1);
}
for (const p of doc.profiles) {
    const frames = p.samples.map(s => s.map(i => doc.shared.frames[i].name));
    const sum = p.weights.reduce((a, b) => a + b, 0);
    console.log(`${p.name}|${p.unit}|${p.endValue}|${p.samples.length}|${sum}`);
    for (let i = 0; i < frames.length; i++)
        console.log(`  ${frames[i][frames[i].length - 1].split(' ')[0]} ${p.weights[i]}`);
}
