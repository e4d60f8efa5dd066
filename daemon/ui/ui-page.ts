/**
 * The web view's one page: HTML, CSS and a small script, no build step and no library. It reads
 * the daemon's server-sent events (`snapshot`, `run`, `text`, `pool`) and draws the pool, the runs
 * as delegation trees grouped by client, the selected run's transcript as it streams, and usage
 * per run, lineage and client. Text from runs is only ever set as textContent, never as HTML.
 */
export const UI_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>subagentd</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
  header { display: flex; gap: 1.5em; align-items: center; padding: .6em 1em; background: #1d2330; color: #fff; }
  header h1 { font-size: 1.1em; margin: 0; }
  header button { margin-left: auto; }
  main { display: grid; grid-template-columns: minmax(22em, 1fr) 1.3fr; gap: 1em; padding: 1em; }
  section { background: #fff; border: 1px solid #d8dce3; border-radius: 6px; padding: .6em .9em; }
  h2 { font-size: 1em; margin: .2em 0 .5em; }
  ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 1.2em; }
  ul.tree { padding-left: 0; }
  li.run > .line { display: flex; gap: .5em; align-items: center; padding: .15em .3em; border-radius: 4px; cursor: pointer; }
  li.run.selected > .line { background: #e6eefc; }
  .state { font-size: .8em; padding: 0 .4em; border-radius: 3px; background: #e3e6eb; }
  .state.running { background: #d7f0dc; } .state.queued { background: #fbecc8; } .state.ended { background: #eceff3; color: #666; }
  .tokens { color: #666; font-size: .85em; margin-left: auto; }
  .client { margin: .6em 0 .2em; font-weight: 600; }
  pre#transcript { white-space: pre-wrap; word-break: break-word; min-height: 12em; max-height: 60vh; overflow: auto; background: #fafbfc; padding: .6em; margin: 0; }
  table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: .15em .5em; border-bottom: 1px solid #eef0f3; }
  button { font: inherit; padding: .1em .6em; cursor: pointer; }
</style>
</head>
<body>
<header><h1>subagentd</h1><span id="daemon"></span><span id="conn">connecting…</span><button id="drain" title="refuse new runs, let running ones finish, then stop">Drain daemon</button></header>
<main>
  <div>
    <section><h2>Pool</h2><table id="pool"></table></section>
    <section><h2>Runs</h2><div id="runs"></div></section>
    <section><h2>Usage by client</h2><table id="usage"></table></section>
  </div>
  <section><h2 id="transcript-title">Transcript</h2><pre id="transcript"></pre></section>
</main>
<script>
const runs = new Map();
let selected;
let poolState;
const el = (tag, props = {}, ...children) => { const e = document.createElement(tag); Object.assign(e, props); for (const c of children) e.append(c); return e; };
const post = (path) => fetch(path, { method: 'POST', headers: { 'x-subagentd-ui': '1' } });
const row = (...cells) => el('tr', {}, ...cells.map((c) => el('td', { textContent: String(c) })));
const lineageTokens = (run) => {
  let input = run.usage.input, output = run.usage.output;
  for (const child of runs.values()) if (child.parentRunId === run.runId) { const t = lineageTokens(child); input += t.input; output += t.output; }
  return { input, output };
};
function drawPool() {
  if (!poolState) return;
  const p = poolState, a = p.admission;
  document.getElementById('daemon').textContent = 'v' + p.daemon.version + ' pid ' + p.daemon.pid + (p.daemon.shuttingDown ? ' (shutting down)' : '');
  const rows = [row('slots', a.running + ' running of ' + a.limits.maxConcurrentRuns), row('queue', a.queued + ' waiting (max ' + a.limits.maxQueued + ')'), row('connections', p.connections), row('providers', p.providers.join(', '))];
  for (const [endpoint, c] of Object.entries(p.endpoints)) rows.push(row('endpoint ' + endpoint, c.requests + ' requests, ' + c.rateLimited + ' × 429, ' + c.errors + ' errors'));
  document.getElementById('pool').replaceChildren(...rows);
}
function node(run) {
  const tokens = run.parentRunId === undefined ? lineageTokens(run) : run.usage;
  const line = el('div', { className: 'line' },
    el('span', { className: 'label', textContent: run.label || run.provider }),
    el('span', { className: 'state ' + run.state, textContent: run.state === 'ended' ? (run.stopReason || 'ended') : run.state }),
    el('span', { className: 'tokens', textContent: tokens.input + ' in / ' + tokens.output + ' out' + (run.parentRunId === undefined ? ' (lineage)' : '') }));
  if (run.state !== 'ended') {
    const cancel = el('button', { className: 'cancel', textContent: 'Cancel' });
    cancel.onclick = (e) => { e.stopPropagation(); cancel.disabled = true; post('/runs/' + run.runId + '/cancel'); };
    line.append(cancel);
  }
  line.onclick = () => select(run.runId);
  const li = el('li', { className: 'run' + (run.runId === selected ? ' selected' : '') }, line);
  li.dataset.runId = run.runId;
  li.dataset.state = run.state;
  const kids = [...runs.values()].filter((r) => r.parentRunId === run.runId);
  if (kids.length > 0) li.append(el('ul', {}, ...kids.map(node)));
  return li;
}
function drawRuns() {
  const byClient = new Map();
  for (const run of runs.values()) {
    if (run.parentRunId !== undefined && runs.has(run.parentRunId)) continue;
    const key = run.client + ' · ' + run.connectionId.slice(0, 8);
    if (!byClient.has(key)) byClient.set(key, []);
    byClient.get(key).push(run);
  }
  const out = [];
  for (const [client, roots] of byClient) out.push(el('div', { className: 'client', textContent: client }), el('ul', { className: 'tree' }, ...roots.map(node)));
  document.getElementById('runs').replaceChildren(...out);
  const usage = new Map();
  for (const run of runs.values()) { const u = usage.get(run.client) || { input: 0, output: 0, runs: 0 }; u.input += run.usage.input; u.output += run.usage.output; u.runs += 1; usage.set(run.client, u); }
  document.getElementById('usage').replaceChildren(el('tr', {}, ...['client', 'runs', 'tokens in', 'tokens out'].map((h) => el('th', { textContent: h }))), ...[...usage].map(([c, u]) => row(c, u.runs, u.input, u.output)));
}
function select(runId) {
  selected = runId;
  const run = runs.get(runId);
  document.getElementById('transcript-title').textContent = 'Transcript: ' + (run ? (run.label || run.provider) + ' ' + run.runId : '');
  document.getElementById('transcript').textContent = run ? run.transcript : '';
  drawRuns();
}
const events = new EventSource('/events');
events.onopen = () => { document.getElementById('conn').textContent = 'live'; };
events.onerror = () => { document.getElementById('conn').textContent = 'reconnecting…'; };
events.addEventListener('snapshot', (e) => {
  const data = JSON.parse(e.data);
  runs.clear();
  for (const run of data.runs) runs.set(run.runId, run);
  poolState = data.pool;
  drawPool(); drawRuns();
  if (selected) select(selected);
});
events.addEventListener('run', (e) => {
  const run = JSON.parse(e.data);
  run.transcript = runs.get(run.runId)?.transcript ?? '';
  runs.set(run.runId, run);
  drawRuns();
});
events.addEventListener('text', (e) => {
  const { runId, text } = JSON.parse(e.data);
  const run = runs.get(runId);
  if (!run) return;
  run.transcript += text;
  if (runId === selected) document.getElementById('transcript').textContent = run.transcript;
});
events.addEventListener('pool', (e) => { poolState = JSON.parse(e.data); drawPool(); });
document.getElementById('drain').onclick = () => { if (confirm('Drain the daemon? New runs are refused; it stops when running ones finish.')) post('/drain'); };
</script>
</body>
</html>
`;
