// SPDX-License-Identifier: MIT
// Draws each panel of a Grafana dashboard JSON (packaging/grafana/bulkhead.json) from a Prometheus
// server's HTTP API: timeseries panels with /api/v1/query_range and uPlot, stat panels with
// /api/v1/query at the end of the range, the state timeline as coloured segments. Grafana's
// variables are replaced as Grafana would for one instance and every cell. Only what the bulkhead
// dashboard uses is supported. Parameters (the page's query string):
//   dashboard  URL of the dashboard JSON     prom      Prometheus' base URL
//   instance   the scrape target             start,end the range, Unix seconds
//   step       seconds between points        rate_interval  $__rate_interval ("10s")
// Sets document.title to "done" (or "error: ...") when every panel is drawn.
'use strict';

const params = new URLSearchParams(location.search);
const prom = params.get('prom');
const instance = params.get('instance');
const end = Number(params.get('end'));
const start = Number(params.get('start'));
const step = Number(params.get('step') || 2);
const rateInterval = params.get('rate_interval') || '10s';
const palette = ['#73bf69', '#f2cc0c', '#8ab8ff', '#ff780a', '#f2495c', '#5794f2', '#b877d9',
                 '#705da0', '#37872d', '#fade2a', '#c4162a', '#1f60c4'];
const stateColour = {running: '#73bf69', starting: '#5794f2', stopping: '#ff780a',
                     backoff: '#f2cc0c', failed: '#f2495c', stopped: '#8e8e9e'};

// A regex-escaped value inside a PromQL string literal, as Grafana writes it: "127\\.0\\.0\\.1".
function regexEscape(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, '\\\\$&'); }

function expand(expr) {
  return expr.replaceAll('$__rate_interval', rateInterval)
      .replaceAll('$__range', `${Math.round(end - start)}s`)
      .replaceAll('$instance', regexEscape(instance))
      .replaceAll('$cell', '.*');
}

async function api(path, args) {
  const url = `${prom}/api/v1/${path}?${new URLSearchParams(args)}`;
  const answer = await (await fetch(url)).json();
  if (answer.status !== 'success') throw new Error(`${path}: ${answer.error}`);
  return answer.data.result;
}

function legend(format, metric) {
  return (format || '{{__name__}}').replace(/\{\{\s*(\w+)\s*\}\}/g, (_, k) => metric[k] ?? '');
}

function formatter(unit) {
  const num = (v, d = 2) => (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(d).replace(/\.?0+$/, ''));
  switch (unit) {
    case 's': return (v) => (v == null ? '' : Math.abs(v) >= 1 ? `${num(v)} s`
                             : Math.abs(v) >= 0.001 ? `${num(v * 1e3)} ms` : `${num(v * 1e6)} µs`);
    case 'percentunit': return (v) => (v == null ? '' : `${num(v * 100, 1)}%`);
    case 'reqps': return (v) => (v == null ? '' : `${num(v)}/s`);
    case 'bytes': return (v) => {
      if (v == null) return '';
      const units = ['B', 'KiB', 'MiB', 'GiB'];
      let i = 0;
      while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
      return `${num(v, 1)} ${units[i]}`;
    };
    default: return (v) => (v == null ? '' : num(v));
  }
}

function place(el, pos) {
  el.style.gridColumn = `${pos.x + 1} / span ${pos.w}`;
  el.style.gridRow = `${pos.y + 1} / span ${pos.h}`;
}

function panelBox(grid, panel) {
  const box = document.createElement('div');
  box.className = 'panel';
  place(box, panel.gridPos);
  box.innerHTML = '<h2></h2><div class="body"></div>';
  box.querySelector('h2').textContent = panel.title;
  grid.appendChild(box);
  return box.querySelector('.body');
}

async function drawStat(body, panel) {
  const result = await api('query', {query: expand(panel.targets[0].expr), time: end});
  if (result.length === 0) { body.innerHTML = '<div class="nodata">No data</div>'; return; }
  const value = Number(result[0].value[1]);
  const steps = panel.fieldConfig.defaults.thresholds?.steps || [{color: 'blue', value: null}];
  let colour = steps[0].color;
  for (const s of steps) if (s.value !== null && value >= s.value) colour = s.color;
  const named = {green: '#37872d', red: '#c4162a', blue: '#1f60c4'};
  body.innerHTML = '<div class="stat"></div>';
  body.firstChild.style.background = named[colour] || colour;
  body.firstChild.textContent = formatter(panel.fieldConfig.defaults.unit)(value);
}

async function rangeSeries(panel) {
  const xs = [];
  for (let t = start; t <= end; t += step) xs.push(t);
  const series = [];
  for (const target of panel.targets) {
    const result = await api('query_range',
                             {query: expand(target.expr), start, end, step});
    for (const r of result) {
      const byTime = new Map(r.values.map(([t, v]) => [Math.round(t), Number(v)]));
      series.push({label: legend(target.legendFormat, r.metric), metric: r.metric,
                   ys: xs.map((t) => {
                     const v = byTime.get(Math.round(t));
                     return v === undefined || Number.isNaN(v) ? null : v;
                   })});
    }
  }
  series.sort((a, b) => a.label.localeCompare(b.label));
  return {xs, series};
}

async function drawTimeseries(body, panel) {
  const {xs, series} = await rangeSeries(panel);
  if (series.length === 0) { body.innerHTML = '<div class="nodata">No data</div>'; return; }
  const unit = panel.fieldConfig.defaults.unit;
  const bars = panel.fieldConfig.defaults.custom?.drawStyle === 'bars';
  const fmt = formatter(unit);
  const width = body.clientWidth;
  const legendRows = Math.ceil(series.length / Math.max(1, Math.floor(width / 190)));
  const opts = {
    width, height: Math.max(80, body.clientHeight - 8 - 16 * legendRows),
    legend: {show: true, live: false},
    cursor: {show: false},
    scales: {x: {time: true}},
    axes: [
      {stroke: '#8e8e9e', grid: {stroke: '#2c3235'}, ticks: {stroke: '#2c3235'}},
      {stroke: '#8e8e9e', grid: {stroke: '#2c3235'}, ticks: {stroke: '#2c3235'}, size: 60,
       values: (u, vals) => vals.map(fmt)},
    ],
    series: [{}, ...series.map((s, i) => ({
      label: s.label, stroke: palette[i % palette.length], width: 1.5,
      fill: bars ? palette[i % palette.length] + '99' : palette[i % palette.length] + '1a',
      paths: bars ? uPlot.paths.bars({size: [0.9, 12]}) : undefined,
      points: {show: false},
    }))],
  };
  const thresholds = panel.fieldConfig.defaults.thresholds?.steps?.filter((s) => s.value !== null);
  if (panel.fieldConfig.defaults.custom?.thresholdsStyle?.mode === 'dashed' && thresholds?.length) {
    opts.hooks = {draw: [(u) => {
      const ctx = u.ctx;
      for (const t of thresholds) {
        const y = u.valToPos(t.value, 'y', true);
        ctx.save();
        ctx.strokeStyle = '#f2495c';
        ctx.setLineDash([6, 4]);
        ctx.beginPath();
        ctx.moveTo(u.bbox.left, y);
        ctx.lineTo(u.bbox.left + u.bbox.width, y);
        ctx.stroke();
        ctx.restore();
      }
    }]};
    opts.scales.y = {range: (u, min, max) => [0, Math.max(max, thresholds[0].value * 1.5)]};
  }
  new uPlot(opts, [xs, ...series.map((s) => s.ys)], body);
}

async function drawTimeline(body, panel) {
  const {xs, series} = await rangeSeries(panel);
  const cells = [...new Set(series.map((s) => s.metric.cell))].sort();
  const div = document.createElement('div');
  div.className = 'timeline';
  for (const cell of cells) {
    const lane = document.createElement('div');
    lane.className = 'lane';
    lane.innerHTML = '<span class="name"></span><span class="bar"></span>';
    lane.firstChild.textContent = cell;
    const mine = series.filter((s) => s.metric.cell === cell);
    xs.forEach((_, i) => {
      const on = mine.find((s) => s.ys[i] !== null);
      const seg = document.createElement('span');
      seg.style.flex = '1';
      seg.style.background = on ? stateColour[on.metric.state] || '#555' : 'transparent';
      lane.lastChild.appendChild(seg);
    });
    div.appendChild(lane);
  }
  const key = document.createElement('div');
  key.className = 'legend';
  for (const [state, colour] of Object.entries(stateColour)) {
    key.insertAdjacentHTML('beforeend', `<span><i style="background:${colour}"></i>${state}</span>`);
  }
  div.appendChild(key);
  body.appendChild(div);
}

async function main() {
  const dashboard = await (await fetch(params.get('dashboard'))).json();
  const grid = document.getElementById('grid');
  document.getElementById('note').textContent =
      `the queries of packaging/grafana/bulkhead.json from Prometheus (${instance}), ` +
      `${new Date(start * 1000).toISOString().slice(11, 19)}–` +
      `${new Date(end * 1000).toISOString().slice(11, 19)} UTC; drawn by ` +
      'scripts/dashboard-screenshot with uPlot, not Grafana';
  const draws = [];
  for (const panel of dashboard.panels) {
    if (panel.type === 'row') {
      const row = document.createElement('div');
      row.className = 'row';
      row.textContent = panel.title;
      place(row, panel.gridPos);
      grid.appendChild(row);
      continue;
    }
    const body = panelBox(grid, panel);
    const draw = {stat: drawStat, timeseries: drawTimeseries,
                  'state-timeline': drawTimeline}[panel.type];
    draws.push(draw(body, panel).catch((e) => {
      body.textContent = String(e);
      throw e;
    }));
  }
  await Promise.all(draws);
}

main().then(() => { document.title = 'done'; },
            (e) => { document.title = `error: ${e}`; });
