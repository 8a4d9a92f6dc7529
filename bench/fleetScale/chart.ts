// The fleet-scale bench's pictures: line charts written as SVG (no chart library), laid out on
// one HTML page and turned into a PNG by a headless Chromium's screenshot, where one is installed.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Series {
  readonly name: string;
  readonly points: ReadonlyArray<readonly [number, number]>;
  readonly dashed?: boolean;
}

export interface Chart {
  readonly title: string;
  readonly x: string;
  readonly y: string;
  readonly logX?: boolean;
  /** A logarithmic y axis, from `logY` up (values below it are drawn at it). */
  readonly logY?: number;
  readonly series: readonly Series[];
  /** A horizontal line (a target), with its label. */
  readonly mark?: { readonly y: number; readonly label: string };
}

const W = 560;
const H = 340;
const M = { left: 60, right: 150, top: 34, bottom: 44 };
const colours = ['#1f6feb', '#d1242f', '#1a7f37', '#8250df', '#bf8700', '#0a7ea4', '#cf222e', '#57606a'];
const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const step = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * step >= value) return m * step;
  return 10 * step;
}

/** One chart as an SVG element. */
export function svg(chart: Chart): string {
  const all = chart.series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const xs = all.map(([x]) => x);
  const xMin = chart.logX ? Math.min(...xs) : 0;
  const xMax = Math.max(...xs);
  const top = Math.max(...all.map(([, y]) => y), chart.mark?.y ?? 0);
  const yMax = chart.logY !== undefined ? 10 ** Math.ceil(Math.log10(Math.max(top, chart.logY * 10))) : niceMax(top * 1.05);
  const yMin = chart.logY ?? 0;
  const px = (x: number): number =>
    M.left + (chart.logX ? (Math.log10(x) - Math.log10(xMin)) / Math.max(1e-9, Math.log10(xMax) - Math.log10(xMin)) : (x - xMin) / Math.max(1e-9, xMax - xMin)) * (W - M.left - M.right);
  const py = (y: number): number =>
    H -
    M.bottom -
    (chart.logY !== undefined ? (Math.log10(Math.max(y, yMin)) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin)) : y / yMax) * (H - M.top - M.bottom);
  const yTicks =
    chart.logY !== undefined
      ? Array.from({ length: Math.round(Math.log10(yMax / yMin)) + 1 }, (_, i) => yMin * 10 ** i)
      : [0, 1, 2, 3, 4].map((i) => (yMax * i) / 4);
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">`);
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  parts.push(`<text x="${M.left}" y="20" font-size="13" font-weight="bold">${escape(chart.title)}</text>`);
  for (const y of yTicks) {
    parts.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${py(y)}" y2="${py(y)}" stroke="#eee"/>`);
    parts.push(`<text x="${M.left - 6}" y="${py(y) + 4}" text-anchor="end">${+y.toPrecision(3)}</text>`);
  }
  const ticks = [...new Set(xs)].sort((a, b) => a - b);
  for (const x of ticks) parts.push(`<text x="${px(x)}" y="${H - M.bottom + 16}" text-anchor="middle">${x >= 1000 ? `${x / 1000}k` : x}</text>`);
  parts.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${H - M.bottom}" y2="${H - M.bottom}" stroke="#888"/>`);
  parts.push(`<line x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${H - M.bottom}" stroke="#888"/>`);
  parts.push(`<text x="${(M.left + W - M.right) / 2}" y="${H - 8}" text-anchor="middle">${escape(chart.x)}</text>`);
  parts.push(`<text transform="translate(14 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">${escape(chart.y)}</text>`);
  if (chart.mark !== undefined) {
    parts.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${py(chart.mark.y)}" y2="${py(chart.mark.y)}" stroke="#999" stroke-dasharray="2 3"/>`);
    parts.push(`<text x="${W - M.right - 4}" y="${py(chart.mark.y) - 4}" text-anchor="end" fill="#666">${escape(chart.mark.label)}</text>`);
  }
  chart.series.forEach((series, i) => {
    const colour = colours[i % colours.length]!;
    const points = series.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    if (points.length === 0) return;
    const path = points.map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    parts.push(`<path d="${path}" fill="none" stroke="${colour}" stroke-width="2"${series.dashed ? ' stroke-dasharray="5 3"' : ''}/>`);
    for (const [x, y] of points) parts.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${colour}"/>`);
    const ly = M.top + 8 + i * 16;
    parts.push(`<line x1="${W - M.right + 10}" x2="${W - M.right + 28}" y1="${ly}" y2="${ly}" stroke="${colour}" stroke-width="2"${series.dashed ? ' stroke-dasharray="5 3"' : ''}/>`);
    parts.push(`<text x="${W - M.right + 32}" y="${ly + 4}">${escape(series.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

/**
 * The charts, two a row, under a caption: written as one SVG at `file` with .svg for .png, and
 * turned into the PNG at `file` by a headless Chromium where one is installed. Whether the PNG was made.
 */
export function png(charts: readonly Chart[], caption: string, file: string): boolean {
  const rows = Math.ceil(charts.length / 2);
  const width = 2 * W + 30;
  const height = rows * (H + 10) + 40;
  const placed = charts.map((chart, i) => svg(chart).replace('<svg ', `<svg x="${10 + (i % 2) * (W + 10)}" y="${30 + Math.floor(i / 2) * (H + 10)}" `));
  const page = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="10" y="18" font-size="12" fill="#444">${escape(caption)}</text>`,
    ...placed,
    '</svg>',
  ].join('\n');
  const svgFile = file.replace(/\.png$/, '.svg');
  writeFileSync(svgFile, page);
  const chromium = ['chromium', 'chromium-browser', 'google-chrome'].find((name) => spawnSync(name, ['--version'], { stdio: 'ignore' }).status === 0);
  if (chromium === undefined) return false;
  const dir = mkdtempSync(join(tmpdir(), 'fleet-scale-chart-'));
  try {
    const run = spawnSync(
      chromium,
      ['--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', `--user-data-dir=${join(dir, 'profile')}`, `--window-size=${width},${height}`, `--screenshot=${file}`, `file://${svgFile}`],
      { stdio: 'ignore', timeout: 60_000 },
    );
    return run.status === 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
