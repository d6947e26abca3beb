// Runs every grpcurl call in the README's ```sh blocks through grpcurl-lite
// against a live server and checks each reply against the "# expect..." line
// that follows it.
//   node cookbook.js README.md GRPCURL_LITE_DIR 127.0.0.1:PORT
// Prints one line per call and "N passed, M failed"; exit status 1 on any failure.
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

const [readmePath, glDir, addr] = process.argv.slice(2);
const grpcurl = path.join(glDir, 'grpcurl.js');

// Commands span lines (quoted JSON, trailing backslashes); join them first.
function commandsIn(block) {
  const out = [];
  let cur = null;
  for (const line of block.split('\n')) {
    if (line.startsWith('# expect')) {
      if (cur) out.push({ cmd: cur, expect: line });
      cur = null;
    } else if (line.startsWith('grpcurl ')) {
      cur = line;
    } else if (cur !== null) {
      cur += '\n' + line;
    }
  }
  return out;
}

// grpcurl -plaintext [-d 'JSON'] ADDR VERB-or-METHOD [ARG]
function parse(cmd) {
  const flat = cmd.replace(/\\\n/g, ' ');
  let json = null;
  const m = flat.match(/-d '([\s\S]*?)'/);
  if (m) json = m[1];
  const rest = flat.replace(/-d '[\s\S]*?'/, '').trim().split(/\s+/).slice(1)
    .filter((t) => t !== '-plaintext');
  return { json, target: rest[0], args: rest.slice(1) };
}

// protobufjs does not apply google.protobuf.Struct's JSON mapping; rewrite
// {"k": v} into the descriptor form grpcurl-lite sends.
function toValue(v) {
  if (v === null) return { null_value: 'NULL_VALUE' };
  if (typeof v === 'number') return { number_value: v };
  if (typeof v === 'string') return { string_value: v };
  if (typeof v === 'boolean') return { bool_value: v };
  if (Array.isArray(v)) return { list_value: { values: v.map(toValue) } };
  return { struct_value: toStruct(v) };
}
function toStruct(o) {
  return { fields: Object.entries(o).map(([key, v]) => ({ key, value: toValue(v) })) };
}

// Likewise proto3 maps (the Open Inference Protocol's `parameters`): grpcurl
// takes a JSON object, grpcurl-lite the descriptor form (a list of entries).
function toEntries(o) {
  return Object.entries(o).map(([key, value]) => ({ key, value }));
}
function mapsToEntries(req) {
  if (req.parameters && !Array.isArray(req.parameters)) req.parameters = toEntries(req.parameters);
  for (const t of [...(req.inputs || []), ...(req.outputs || [])]) {
    if (t.parameters && !Array.isArray(t.parameters)) t.parameters = toEntries(t.parameters);
  }
}

// Every key in `want` must be in `got` with an equal value (arrays: same length, each subset-equal).
function subsetEqual(want, got) {
  if (Array.isArray(want)) {
    return Array.isArray(got) && want.length === got.length &&
      want.every((w, i) => subsetEqual(w, got[i]));
  }
  if (want !== null && typeof want === 'object') {
    return got !== null && typeof got === 'object' &&
      Object.keys(want).every((k) => subsetEqual(want[k], got[k]));
  }
  return want === got || (typeof want === 'number' && Number(got) === want);
}

function run(args) {
  try {
    return { ok: true, out: execFileSync('node', [grpcurl, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30000 }) };
  } catch (e) {
    return { ok: false, out: (e.stdout || '') + (e.stderr || '') };
  }
}

const readme = fs.readFileSync(readmePath, 'utf8');
const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
let passed = 0, failed = 0;
for (const { cmd, expect } of blocks.flatMap(commandsIn)) {
  const { json, target, args } = parse(cmd);
  if (target !== 'localhost:50051') throw new Error(`cookbook calls must target localhost:50051: ${cmd}`);
  let res, ok, why = '';
  if (args[0] === 'list' || args[0] === 'describe') {
    res = run([addr, ...args]);
    const lines = res.out.split('\n');
    const wants = expect.replace('# expect-lines:', '').trim();
    // "rpc X(...) returns (...)" lines contain spaces; match the whole text then.
    const items = args[0] === 'list' ? wants.split(/\s+/) : [wants];
    ok = res.ok && items.every((w) => lines.includes(w));
    why = res.out;
  } else {
    const req = JSON.parse(json);
    if (req.attrs) req.attrs = toStruct(req.attrs);
    for (const step of req.then || []) if (step.attrs) step.attrs = toStruct(step.attrs);
    if (args[0].startsWith('inference.')) mapsToEntries(req);
    res = run([addr, 'call', args[0], JSON.stringify(req)]);
    if (expect.startsWith('# expect-error:')) {
      const [code, ...msg] = expect.replace('# expect-error:', '').trim().split(' ');
      ok = !res.ok && res.out.includes(code) && res.out.includes(msg.join(' '));
    } else {
      const want = JSON.parse(expect.replace('# expect:', '').trim());
      ok = res.ok && subsetEqual(want, JSON.parse(res.out));
    }
    why = res.out;
  }
  const title = `${args.join(' ')} ${json ? json.replace(/\s+/g, '').slice(0, 60) : ''}`;
  if (ok) { passed++; console.log(`PASS ${title}`); }
  else { failed++; console.log(`FAIL ${title}\n  expected ${expect}\n  got ${why.slice(0, 2000)}`); }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
